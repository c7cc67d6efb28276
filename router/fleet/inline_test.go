package fleet

// The forward on the client request's own goroutine (router.Config.RunOnCaller,
// Fleet.RunsOnCaller): a client on Streamable HTTP, the router, this fleet and a
// scripted Streamable HTTP backend on loopback. What the backend sends about a request
// on the request's reply stream (progress, a request to the client) reaches the client
// while the backend still waits; a broken stream, a backend that never answers and one
// that sends about the request on its GET stream end as they do through a pool worker.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/memhttp"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// inlineWait bounds every wait of these tests.
const inlineWait = 10 * time.Second

// scriptBackend is a Streamable HTTP backend whose tools/call the test scripts: call
// writes the reply to each. It answers the handshake and tools/list itself, hands the
// responses the router sends it (the client's answers) to answers, and serves a GET
// stream when get is set (405 otherwise), and a resumption (GET with Last-Event-ID)
// with resume.
type scriptBackend struct {
	// tools is the tools/list result; "" for one tool, call, that declares nothing.
	tools   string
	call    func(w http.ResponseWriter, r *http.Request, m *codec.Message)
	get     func(w http.ResponseWriter, r *http.Request)
	resume  func(w http.ResponseWriter, r *http.Request, lastID string)
	answers chan string
}

func (b *scriptBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		if id := r.Header.Get("Last-Event-ID"); id != "" && b.resume != nil {
			b.resume(w, r, id)
			return
		}
		if b.get != nil {
			b.get(w, r)
			return
		}
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	case http.MethodDelete:
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var m codec.Message
	if codec.Scan(raw, &m) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	reply := ""
	switch {
	case m.Kind == codec.KindResult || m.Kind == codec.KindError:
		b.answers <- string(raw)
		w.WriteHeader(http.StatusAccepted)
		return
	case m.Kind == codec.KindNotification:
		w.WriteHeader(http.StatusAccepted)
		return
	case string(m.Method) == "initialize":
		w.Header().Set("Mcp-Session-Id", "up1")
		reply = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"b","version":"1"}}`
	case string(m.Method) == "tools/list":
		reply = b.tools
		if reply == "" {
			reply = `{"tools":[{"name":"call","inputSchema":{"type":"object"}}]}`
		}
	case string(m.Method) == "tools/call":
		b.call(w, r, &m)
		return
	default:
		reply = `{}`
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(codec.AppendResult(nil, m.ID, []byte(reply)))
}

// writeEvent writes one SSE event (with an id unless id is "") and flushes it.
func writeEvent(w http.ResponseWriter, id, data string) {
	if id != "" {
		fmt.Fprintf(w, "id: %s\n", id)
	}
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

// startSSE makes w an event stream and sends its headers.
func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// inlineRig is a router with RunOnCaller (or without: on false) in front of one
// scripted backend, "b", behind the Streamable HTTP transport.
type inlineRig struct {
	t  *testing.T
	f  *Fleet
	r  *router.Router
	b  *scriptBackend
	cl *http.Client
}

// startInlineFleet starts h on loopback and, in front of it, a started fleet with one
// HTTP backend "b" used in era with backend timeout timeout, for an inline rig's
// router; the rig closes the fleet in its own cleanup, in its order.
func startInlineFleet(t *testing.T, h http.Handler, timeout time.Duration, era Era, log *slog.Logger) *Fleet {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f := New(Config{HealthInterval: time.Hour, Logger: log, Backends: []BackendConfig{{
		Name: "b", Timeout: timeout, Era: era,
		Dialers: []Dialer{{Addr: srv.URL, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			return upstream.DialHTTP(ctx, srv.URL+"/mcp", upstream.HTTPOptions{Name: "b", ReconnectMin: time.Millisecond, ReconnectMax: 10 * time.Millisecond}, sink)
		}}},
	}}})
	f.Start(inlineWait)
	return f
}

// newInlineRig starts b on loopback, a fleet with backend timeout timeout in front of
// it, and the router with the transport's reply timeout replyTimeout.
func newInlineRig(t *testing.T, b *scriptBackend, on bool, timeout, replyTimeout time.Duration) *inlineRig {
	t.Helper()
	if b.answers == nil {
		b.answers = make(chan string, 4)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := startInlineFleet(t, b, timeout, Era2025, log)
	r, err := router.New(router.Config{Fleet: f, Logger: log, RunOnCaller: on, ReplyTimeout: replyTimeout})
	if err != nil {
		t.Fatal(err)
	}
	reg := transport.NewRegistry(transport.RegistryConfig{}, r)
	hs := transport.NewHTTPServer(transport.HTTPConfig{
		Rules:        transport.DefaultHTTPRules("127.0.0.1:0", router.HeaderVersions, router.V20250326),
		ReplyTimeout: replyTimeout,
	}, reg, r)
	ms := memhttp.Start(t, &fasthttp.Server{Handler: hs.ServeStreamable, NoDefaultContentType: true}, inlineWait)
	t.Cleanup(func() {
		hs.Shutdown()
		reg.Close()
		f.Close()
		testwait.Cleanup(t, inlineWait, r.Close)
	})
	return &inlineRig{t: t, f: f, r: r, b: b, cl: ms.Client}
}

// client is a client of the rig's router on session sid ("": none yet), at 2025-06-18;
// one per goroutine.
func (g *inlineRig) client(sid string) *mcpraw.Client {
	return &mcpraw.Client{URL: "http://127.0.0.1/mcp", Version: router.V20250618, Session: sid, HTTP: g.cl}
}

// post sends one message on session sid and returns the response, its body unread.
func (g *inlineRig) post(sid, body string) *http.Response {
	g.t.Helper()
	c := g.client(sid)
	resp, err := c.Do(c.NewRequest(context.Background(), http.MethodPost, body))
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// session opens a client session that declares sampling.
func (g *inlineRig) session() string {
	g.t.Helper()
	resp := g.post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	body, _ := io.ReadAll(resp.Body)
	sid := resp.Header.Get(transport.HeaderSessionID)
	if resp.StatusCode != 200 || sid == "" {
		g.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp := g.post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		g.t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return sid
}

// ranInline is how many jobs r ran on their callers.
func ranInline(r *router.Router) (n uint64) {
	for _, s := range r.Dispatcher().Stats().Shards {
		n += s.RanInline
	}
	return n
}

// wantRanInline fails the test, saying msg, if r ran no job on its caller.
func wantRanInline(t *testing.T, r *router.Router, msg string) {
	t.Helper()
	if ranInline(r) == 0 {
		t.Error(msg)
	}
}

// events reads an event stream's data lines, one message each, onto a channel, closed
// at the stream's end.
func events(body io.Reader) <-chan string {
	ch := make(chan string, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
				ch <- data
			}
		}
	}()
	return ch
}

// next is the stream's next message, failing the test at the stream's end.
func next(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case msg, ok := <-ch:
		if !ok {
			t.Fatalf("the stream ended before %s", what)
		}
		return msg
	case <-time.After(inlineWait):
		t.Fatalf("no %s within %v", what, inlineWait)
		return ""
	}
}

// heard reports whether the request the backend sees as wire id was told of a message
// of the backend's about it (the table's with: delivered to its exchange).
func (g *inlineRig) heard(wire []byte) bool {
	id, ok := parseID(wire)
	if !ok {
		return false
	}
	sh := g.f.table.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	return e != nil && e.heard
}

const toolCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call","_meta":{"progressToken":"p"}}}`

// TestInlineStreamHandOff: a tools/call forwarded on the request's goroutine whose
// backend answers with an event stream: its progress and its sampling request reach
// the client while the backend waits for the client's answer (it waits for it before
// it answers, so an answer proves the hand-off: without it the request's goroutine
// would be reading the backend's stream instead of serving the client's), the answer
// reaches the backend, and the backend's result ends the client's stream.
func TestInlineStreamHandOff(t *testing.T) {
	b := &scriptBackend{}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		startSSE(w)
		writeEvent(w, "", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(m.ProgressToken)+`,"progress":1}}`)
		writeEvent(w, "", `{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`)
		select {
		case <-b.answers:
		case <-r.Context().Done():
			return
		}
		writeEvent(w, "", string(codec.AppendResult(nil, m.ID, []byte(`{"content":[{"type":"text","text":"done"}]}`))))
	}
	g := newInlineRig(t, b, true, inlineWait, time.Minute)
	sid := g.session()
	resp := g.post(sid, toolCall)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("tools/call answered %d %s, want an event stream", resp.StatusCode, ct)
	}
	ch := events(resp.Body)
	if msg := next(t, ch, "the progress"); !strings.Contains(msg, `"progressToken":"p"`) {
		t.Fatalf("first message %s, want the progress with the client's token", msg)
	}
	ask := next(t, ch, "the sampling request")
	var m codec.Message
	if codec.Scan([]byte(ask), &m) != nil || string(m.Method) != "sampling/createMessage" {
		t.Fatalf("second message %s, want the sampling request", ask)
	}
	// The answer goes to the backend, which only then answers the call.
	if resp := g.post(sid, string(codec.AppendResult(nil, m.ID, []byte(`{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`)))); resp.StatusCode != 202 {
		t.Fatalf("the sampling answer: %d", resp.StatusCode)
	}
	if msg := next(t, ch, "the result"); !strings.Contains(msg, `"id":7,"result"`) || !strings.Contains(msg, "done") {
		t.Fatalf("last message %s, want the result", msg)
	}
	wantRanInline(t, g.r, "no request ran on its caller")
}

// TestInlineStreamLate: a backend that starts its event stream late, and then answers
// on it at once: the client gets the result.
func TestInlineStreamLate(t *testing.T) {
	b := &scriptBackend{}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		time.Sleep(50 * time.Millisecond) // the backend's own pace, not a wait of the test's
		startSSE(w)
		writeEvent(w, "1", string(codec.AppendResult(nil, m.ID, []byte(`{"content":[]}`))))
	}
	g := newInlineRig(t, b, true, inlineWait, time.Minute)
	sid := g.session()
	resp := g.post(sid, toolCall)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":7,"result":{"content":[]}`) {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, body)
	}
	wantRanInline(t, g.r, "no request ran on its caller")
}

// TestInlineStreamBroken: an event stream that breaks after its progress, before its
// result, ends as it does through a worker: resumed with Last-Event-ID when its events
// have ids (the client gets the result), failed with the same error otherwise.
func TestInlineStreamBroken(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     string // the progress event's id; "" for none
		resume bool
	}{
		{"resumed", "e1", true},
		{"lost", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome := map[bool]string{}
			for _, on := range []bool{false, true} {
				b := &scriptBackend{}
				b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
					startSSE(w)
					writeEvent(w, tc.id, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(m.ProgressToken)+`,"progress":1}}`)
					// The handler returns: the stream ends without the result.
				}
				var mu sync.Mutex
				var wireID []byte
				b.call = func(call func(http.ResponseWriter, *http.Request, *codec.Message)) func(http.ResponseWriter, *http.Request, *codec.Message) {
					return func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
						mu.Lock()
						wireID = append([]byte(nil), m.ID...)
						mu.Unlock()
						call(w, r, m)
					}
				}(b.call)
				if tc.resume {
					b.resume = func(w http.ResponseWriter, r *http.Request, lastID string) {
						mu.Lock()
						id := wireID
						mu.Unlock()
						if lastID != tc.id {
							w.WriteHeader(http.StatusBadRequest)
							return
						}
						startSSE(w)
						writeEvent(w, "e2", string(codec.AppendResult(nil, id, []byte(`{"content":[{"type":"text","text":"resumed"}]}`))))
					}
				}
				g := newInlineRig(t, b, on, inlineWait, time.Minute)
				sid := g.session()
				resp := g.post(sid, toolCall)
				var got []string
				for msg := range events(resp.Body) {
					got = append(got, msg)
				}
				if len(got) != 2 || !strings.Contains(got[0], `"progressToken":"p"`) || !strings.Contains(got[1], `"id":7`) {
					t.Fatalf("on the caller %v: the client got %q, want the progress and the end", on, got)
				}
				if tc.resume && !strings.Contains(got[1], "resumed") {
					t.Fatalf("on the caller %v: %s, want the resumed stream's result", on, got[1])
				}
				if on && ranInline(g.r) == 0 {
					t.Error("no request ran on its caller")
				}
				outcome[on] = got[1]
			}
			if outcome[true] != outcome[false] {
				t.Errorf("on the caller the call ended with %s, on a worker with %s", outcome[true], outcome[false])
			}
		})
	}
}

// TestInlineNeverAnswers: a backend that never answers gets the same HTTP status and
// JSON-RPC error on the caller as on a worker: the backend's timeout (200 and the
// fleet's timeout error) when it comes first, the transport's (504) when that does, in
// which case the request does not run on its caller at all.
func TestInlineNeverAnswers(t *testing.T) {
	const short, long = 300 * time.Millisecond, inlineWait
	for _, tc := range []struct {
		name                  string
		timeout, replyTimeout time.Duration
		status                int
		inline                bool
	}{
		{"backend timeout first", short, long, 200, true},
		{"reply timeout first", long, short, 504, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outcome := map[bool]string{}
			for _, on := range []bool{false, true} {
				b := &scriptBackend{}
				b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
					<-r.Context().Done() // the router gave up and closed the connection
				}
				g := newInlineRig(t, b, on, tc.timeout, tc.replyTimeout)
				sid := g.session()
				resp := g.post(sid, toolCall)
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status {
					t.Fatalf("on the caller %v: %d %s, want %d", on, resp.StatusCode, body, tc.status)
				}
				if ran := ranInline(g.r) > 0; on && ran != tc.inline {
					t.Errorf("ran on its caller: %v, want %v", ran, tc.inline)
				}
				outcome[on] = fmt.Sprint(resp.StatusCode, " ", string(body))
			}
			if outcome[true] != outcome[false] {
				t.Errorf("on the caller: %s; on a worker: %s", outcome[true], outcome[false])
			}
		})
	}
}

// TestInlineRelatedOnGET: a backend that sends a request's progress on its GET stream
// and answers the request with JSON only once the router has handed the progress to
// the request's exchange: the progress, held while the forward runs on the request's
// goroutine, reaches the client before the result, not lost.
func TestInlineRelatedOnGET(t *testing.T) {
	b := &scriptBackend{}
	progress := make(chan string, 1)
	b.get = func(w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		for {
			select {
			case msg := <-progress:
				writeEvent(w, "", msg)
			case <-r.Context().Done():
				return
			}
		}
	}
	var g *inlineRig
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		progress <- `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(m.ProgressToken) + `,"progress":1}}`
		if !testwait.Poll(inlineWait, func() bool { return g.heard(m.ID) }) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(codec.AppendResult(nil, m.ID, []byte(`{"content":[]}`)))
	}
	g = newInlineRig(t, b, true, inlineWait, time.Minute)
	sid := g.session()
	resp := g.post(sid, toolCall)
	var got []string
	for msg := range events(resp.Body) {
		got = append(got, msg)
	}
	if len(got) != 2 || !strings.Contains(got[0], `"progressToken":"p"`) || !strings.Contains(got[1], `"id":7,"result"`) {
		t.Fatalf("the client got %q, want the progress, then the result", got)
	}
	wantRanInline(t, g.r, "no request ran on its caller")
}

// TestInlineConcurrent: sessions calling at once, each call answered with JSON or an
// event stream by turns, some on their callers and some on workers: every call gets
// its own result (under -race, the hand-offs between the caller, the stream's
// goroutine and the pooled per-send state are checked too).
func TestInlineConcurrent(t *testing.T) {
	b := &scriptBackend{}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		// The call's own numbers are in its arguments, sent back: odd calls stream.
		params := string(m.Params)
		res := codec.AppendResult(nil, m.ID, []byte(`{"content":[],"params":`+params+`}`))
		if strings.Contains(params, `"odd":true`) {
			startSSE(w)
			writeEvent(w, "", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(m.ProgressToken)+`,"progress":1}}`)
			writeEvent(w, "", string(res))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(res)
	}
	g := newInlineRig(t, b, true, inlineWait, time.Minute)
	const sessions, calls = 6, 20
	sids := make([]string, sessions)
	for i := range sids {
		sids[i] = g.session()
	}
	var wg sync.WaitGroup
	errs := make(chan string, sessions*calls)
	for i, sid := range sids {
		wg.Go(func() {
			for n := range calls {
				odd := n%2 == 1
				call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"call","arguments":{"s":%d,"n":%d,"odd":%v},"_meta":{"progressToken":"p%d"}}}`, n, i, n, odd, n)
				c := g.client(sid)
				resp, err := c.Do(c.NewRequest(context.Background(), http.MethodPost, call))
				if err != nil {
					errs <- err.Error()
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := fmt.Sprintf(`"id":%d,"result"`, n)
				args := fmt.Sprintf(`"arguments":{"s":%d,"n":%d,"odd":%v}`, i, n, odd)
				if !strings.Contains(string(body), want) || !strings.Contains(string(body), args) {
					errs <- fmt.Sprintf("session %d call %d: %s", i, n, body)
				}
				if odd && !strings.Contains(string(body), fmt.Sprintf(`"progressToken":"p%d"`, n)) {
					errs <- fmt.Sprintf("session %d call %d: no progress in %s", i, n, body)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	wantRanInline(t, g.r, "no request ran on its caller")
}
