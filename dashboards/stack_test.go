package dashboards

// A real router (cmd/mcprouter/app, in process) in front of the reference backend
// (cmd/mcpbackend/server, in process), both on loopback, and a small MCP client over
// plain HTTP to drive traffic through them. Shared by the tests of this package.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// waitLimit bounds every wait of these tests: a deadlock guard, not a timing assertion.
const waitLimit = 30 * time.Second

// maxLog bounds the log output a test keeps: enough to look at.
const maxLog = 8 << 20

// stack is a running router with one backend.
type stack struct {
	t       *testing.T
	app     *app.App
	backend *server.Server
	logs    *testio.Buffer
	cl      *http.Client
}

// startStack starts a backend and a router; level is the router's log level (debug
// writes a line per request). With -short the test is skipped instead: every test that
// needs a stack is an end-to-end one.
func startStack(t *testing.T, level slog.Level) *stack {
	t.Helper()
	return startStackWith(t, level, nil, nil)
}

// startStackVia is startStack with the router reaching the backend through via, which
// is given the backend's URL and returns the URL the router must use.
func startStackVia(t *testing.T, level slog.Level, via func(backendURL string) string) *stack {
	t.Helper()
	return startStackWith(t, level, via, nil)
}

// startStackWith is startStackVia with edit applied to the router's configuration.
func startStackWith(t *testing.T, level slog.Level, via func(backendURL string) string, edit func(*app.Config)) *stack {
	t.Helper()
	testbin.Long(t, "starts a router and a backend")
	logs := &testio.Buffer{Max: maxLog}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))
	be := mcpbackendtest.Start(t, server.Config{Tick: 50 * time.Millisecond, Logger: log.With("side", "backend")})
	url := be.URL()
	if via != nil {
		url = via(url)
	}
	cfg := app.Config{
		Listen:   "127.0.0.1:0",
		Backends: []app.BackendConfig{{Name: "demo", URL: url}},
	}
	if edit != nil {
		edit(&cfg)
	}
	a := apptest.Start(t, cfg, log.With("side", "router"), waitLimit)
	if a.AdminURL() == "" {
		t.Fatal("no admin listener")
	}
	return &stack{t: t, app: a, backend: be, logs: logs, cl: &http.Client{Timeout: waitLimit}}
}

// get fetches an admin URL path and returns its body.
func (s *stack) get(path string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.app.AdminURL()+path, nil)
	resp, body := s.do(req)
	return resp.StatusCode, body
}

// do sends req and reads the whole body.
func (s *stack) do(req *http.Request) (*http.Response, string) {
	s.t.Helper()
	resp, err := s.cl.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp, string(b)
}

// metric returns the sum of the samples of the exposition whose name and labels start
// with prefix (e.g. `mcprouter_requests_total{backend="demo"`).
func metric(exposition, prefix string) float64 {
	var sum float64
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// waitMetric scrapes until the metric's value reaches min.
func (s *stack) waitMetric(prefix string, min float64) string {
	s.t.Helper()
	var body string
	testwait.For(s.t, fmt.Sprintf("%s to reach %v", prefix, min), waitLimit, func() bool {
		_, body = s.get("/metrics")
		return metric(body, prefix) >= min
	})
	return body
}

// session is one Streamable HTTP client session.
type session struct {
	s      *stack
	id     string
	nextID atomic.Int64
}

const version = "2025-06-18"

// post sends one message and returns the HTTP status and body (an SSE body is read to
// its end).
func (s *stack) post(sid, body string) (int, http.Header, string) {
	s.t.Helper()
	resp, body := s.do(s.request(context.Background(), sid, body))
	return resp.StatusCode, resp.Header, body
}

// request builds a Streamable HTTP request to the router within ctx: a POST of body,
// or with no body the GET that opens the session's stream; sid "" is no session.
func (s *stack) request(ctx context.Context, sid, body string) *http.Request {
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	return s.client(sid).NewRequest(ctx, method, body)
}

// client is a hand-made client of the router on session sid ("" for none yet).
func (s *stack) client(sid string) *mcpraw.Client {
	return &mcpraw.Client{URL: s.app.URL(), Version: version, Session: sid, HTTP: s.cl}
}

// open opens a session (initialize, initialized).
func (s *stack) open() *session {
	s.t.Helper()
	c := s.client("")
	if r, err := c.Initialize(context.Background(), ""); err != nil || r.Status != http.StatusOK || c.Session == "" {
		s.t.Fatalf("initialize: %v %v", err, r)
	}
	return &session{s: s, id: c.Session}
}

// call sends a request and returns the response body.
func (c *session) call(method, params string) string {
	c.s.t.Helper()
	id := c.nextID.Add(1)
	msg := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"` + method + `"`
	if params != "" {
		msg += `,"params":` + params
	}
	status, _, body := c.s.post(c.id, msg+"}")
	if status != 200 {
		c.s.t.Fatalf("%s: HTTP %d %s", method, status, body)
	}
	return body
}

// listen opens the session's GET stream and counts the events on it until ctx ends.
func (c *session) listen(ctx context.Context, events *atomic.Int64) {
	resp, err := http.DefaultClient.Do(c.s.request(ctx, c.id, ""))
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: {") {
			events.Add(1)
		}
	}
}

// legacySession opens a 2024-11-05 HTTP+SSE session and initializes it; the stream
// stays open until ctx ends.
func (s *stack) legacySession(ctx context.Context) {
	s.t.Helper()
	base := strings.TrimSuffix(s.app.URL(), "/mcp")
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var endpoint string
	for endpoint == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			s.t.Fatalf("legacy stream: %v", err)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			endpoint = strings.TrimSpace(d)
		}
	}
	go func() { io.Copy(io.Discard, br); resp.Body.Close() }()
	post := func(body string) {
		r, err := http.Post(base+endpoint, "application/json", strings.NewReader(body))
		if err != nil {
			s.t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 202 {
			s.t.Fatalf("legacy POST: %d", r.StatusCode)
		}
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
}

// traffic exercises what the dashboards show: forwarded and router-answered requests,
// errors, a malformed body, a legacy session, a subscription whose updates fan out to
// a GET stream. It returns when the fan-out has delivered and the GET stream has read
// events; streams stay open until ctx ends.
func (s *stack) traffic(ctx context.Context) *session {
	s.t.Helper()
	c := s.open()
	c.call("tools/list", "")
	if body := c.call("tools/call", `{"name":"demo__echo","arguments":{"text":"hello"}}`); !strings.Contains(body, "hello") {
		s.t.Fatalf("echo: %s", body)
	}
	c.call("tools/call", `{"name":"missing"}`)
	c.call("ping", "")
	c.call("resources/read", `{"uri":"counter://tick"}`)
	if status, _, _ := s.post(c.id, `{"jsonrpc":"2.0","id":`); status != 400 {
		s.t.Fatalf("malformed body: HTTP %d, want 400", status)
	}
	var events atomic.Int64
	go c.listen(ctx, &events)
	c.call("resources/subscribe", `{"uri":"counter://tick"}`)
	s.legacySession(ctx)
	s.waitMetric("mcprouter_fanout_deliveries_total", 2)
	s.waitMetric("mcprouter_fanout_delivery_seconds_count", 2) // timed, not only counted
	testwait.For(s.t, "an event on the GET stream", waitLimit, func() bool { return events.Load() > 0 })
	return c
}

// load keeps n sessions calling echo until ctx ends or max calls were made, and
// returns the number of calls made.
func (s *stack) load(ctx context.Context, n, max int) int64 {
	var calls atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		c := s.open()
		wg.Go(func() {
			for ctx.Err() == nil && calls.Add(1) <= int64(max) {
				id := c.nextID.Add(1)
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"}}}`, id)
				resp, err := s.cl.Do(s.request(ctx, c.id, body))
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	return min(calls.Load(), int64(max))
}
