package transport

// A test harness for the client-facing HTTP transports: an HTTPServer served by fasthttp
// on an in-memory listener, a scriptable Handler, and a net/http client that dials the
// listener, so that every test goes through real HTTP framing without touching the
// network.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/memhttp"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// waitLimit bounds every wait of these tests; a test that hits it fails instead of
// hanging. It is generous: the machine is shared and noisy.
const waitLimit = 20 * time.Second

// testRevisions are the revisions the test server accepts in MCP-Protocol-Version.
var testRevisions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

// testHandler is a scriptable Handler. Its behaviour is chosen by the method name:
//
//	initialize     Bind with params.protocolVersion (default 2025-03-26), reply it and
//	               the revision the transport established (x.Version)
//	ping           reply {}
//	echo           reply {"params":<params>}
//	progress       x.Send params.count notifications, then reply; with params.gate it
//	               first sends params.before notifications and waits for h.gate
//	close          reply {}, then close the session
//	broadcast      Session.Send params.count notifications on the standalone stream
//	hold           reply when h.release is closed (in-flight requests)
//	noreply        never answer until h.release (the transport's reply timeout)
//	anything else  reply -32601
//
// Notifications and responses are finished with Done and recorded in h.seen.
type testHandler struct {
	gate    chan struct{} // progress waits on it
	release chan struct{} // hold waits on it

	mu      sync.Mutex
	seen    []string // methods (or "response") of every message handled, in order
	closed  []string // ids of sessions closed
	holding int      // hold requests waiting
	bindErr error    // last Bind error
}

func newTestHandler() *testHandler {
	return &testHandler{gate: make(chan struct{}), release: make(chan struct{})}
}

func (h *testHandler) AcceptSessionless(m *codec.Message, _ string) bool {
	return m.Kind == codec.KindRequest && string(m.Method) == "initialize"
}

func (h *testHandler) SessionClosed(s *Session) {
	h.mu.Lock()
	h.closed = append(h.closed, s.ID())
	h.mu.Unlock()
}

// checkClosedOnly checks that SessionClosed was called once, for session sid only.
func (h *testHandler) checkClosedOnly(t testing.TB, sid string) {
	t.Helper()
	h.mu.Lock()
	closed := append([]string(nil), h.closed...)
	h.mu.Unlock()
	if len(closed) != 1 || closed[0] != sid {
		t.Errorf("SessionClosed calls %q, want [%s]", closed, sid)
	}
}

type testParams struct {
	ProtocolVersion string `json:"protocolVersion"`
	Count           int    `json:"count"`
	Before          int    `json:"before"`
	Gate            bool   `json:"gate"`
	Size            int    `json:"size"`
}

func (h *testHandler) HandleMessage(x *Exchange) {
	m := &x.Msg
	h.mu.Lock()
	if m.Kind == codec.KindRequest || m.Kind == codec.KindNotification {
		h.seen = append(h.seen, string(m.Method))
	} else {
		h.seen = append(h.seen, "response")
	}
	h.mu.Unlock()
	if m.Kind != codec.KindRequest {
		x.Done()
		return
	}
	var p testParams
	if len(m.Params) > 0 {
		json.Unmarshal(m.Params, &p)
	}
	id := append([]byte(nil), m.ID...)
	result := func(res string) []byte { return codec.AppendResult(nil, id, []byte(res)) }
	switch string(m.Method) {
	case "initialize":
		v := p.ProtocolVersion
		if v == "" {
			v = "2025-03-26"
		}
		if _, err := x.Bind(v, struct{}{}); err != nil {
			h.mu.Lock()
			h.bindErr = err
			h.mu.Unlock()
			x.Reply(codec.AppendError(nil, id, codec.CodeInvalidRequest, "cannot open session: "+err.Error(), nil))
			return
		}
		x.Reply(result(`{"protocolVersion":` + string(codec.AppendString(nil, v)) + `,"transportVersion":` + string(codec.AppendString(nil, x.Version)) + `}`))
	case "ping":
		x.Reply(result(`{}`))
	case "close": // like the router's shutdown: answer, then end the session
		sess := x.Session
		x.Reply(result(`{}`))
		sess.Close()
	case "echo":
		x.Reply(result(`{"params":` + string(m.Params) + `}`))
	case "progress":
		go func() {
			n := 0
			if p.Gate {
				for ; n < p.Before; n++ {
					x.Send(progressNote(n, p.Size))
				}
				select {
				case <-h.gate:
				case <-time.After(waitLimit):
				}
			}
			for ; n < p.Count; n++ {
				x.Send(progressNote(n, p.Size))
			}
			x.Reply(result(`{"sent":` + fmt.Sprint(p.Count) + `}`))
		}()
	case "broadcast":
		for i := 0; i < p.Count; i++ {
			x.Session.Send(progressNote(i, p.Size))
		}
		x.Reply(result(`{}`))
	case "hold", "noreply":
		h.mu.Lock()
		h.holding++
		h.mu.Unlock()
		go func() {
			select {
			case <-h.release:
			case <-time.After(2 * waitLimit):
			}
			x.Reply(result(`{"held":true}`))
		}()
	default:
		x.Reply(codec.AppendError(nil, id, codec.CodeMethodNotFound, "Method not found", nil))
	}
}

// progressNote is the n-th notification a test handler sends, padded to about size bytes.
func progressNote(n, size int) []byte {
	pad := ""
	if size > 64 {
		pad = strings.Repeat("x", size-64)
	}
	return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":%d,"pad":"%s"}}`, n, pad))
}

func (h *testHandler) holdingCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holding
}

// testServer is an HTTPServer on an in-memory listener.
type testServer struct {
	t    testing.TB
	ln   *fasthttputil.InmemoryListener
	HTTP *HTTPServer
	Reg  *Registry
	h    *testHandler
	cl   *http.Client
}

type serverOpts struct {
	cfg  HTTPConfig
	reg  RegistryConfig
	body int // fasthttp MaxRequestBodySize
	head int // fasthttp ReadBufferSize (header limit)
}

func newTestServer(t testing.TB, o serverOpts) *testServer {
	t.Helper()
	h := newTestHandler()
	if o.cfg.Rules.Versions == nil {
		o.cfg.Rules = DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26")
	}
	reg := NewRegistry(o.reg, h)
	hs := NewHTTPServer(o.cfg, reg, h)
	ts := &testServer{t: t, HTTP: hs, Reg: reg, h: h}
	if o.body == 0 {
		o.body = 1 << 20
	}
	if o.head == 0 {
		o.head = 8 << 10
	}
	ms := memhttp.Start(t, &fasthttp.Server{
		Handler:              ts.route,
		MaxRequestBodySize:   o.body,
		ReadBufferSize:       o.head,
		NoDefaultContentType: true,
		CloseOnShutdown:      true,
		Logger:               quietLogger{},
	}, waitLimit)
	ts.ln, ts.cl = ms.Listener, ms.Client
	t.Cleanup(ts.close)
	return ts
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func (ts *testServer) route(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/mcp":
		ts.HTTP.ServeStreamable(ctx)
	case "/sse":
		ts.HTTP.ServeLegacyStream(ctx)
	case "/message":
		ts.HTTP.ServeLegacyMessage(ctx)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
}

// close ends the handler's work; the in-memory server itself is stopped after it, by
// memhttp's own cleanup.
func (ts *testServer) close() {
	select {
	case <-ts.h.release:
	default:
		close(ts.h.release)
	}
	ts.HTTP.Shutdown()
	ts.Reg.Close()
}

// req is one HTTP request of a test.
type req struct {
	method  string
	path    string
	body    string
	headers map[string]string // "" value deletes a default header
	from    string            // the client's IP address; "" for the in-memory default (none)
}

// do sends r with the defaults of an MCP client (JSON content type, Accept of both) and
// returns the response with its body read, unless it is an event stream.
func (ts *testServer) do(r req) *http.Response {
	ts.t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = "/mcp"
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	hr, err := http.NewRequestWithContext(ctx, r.method, "http://127.0.0.1"+r.path, strings.NewReader(r.body))
	if err != nil {
		cancel()
		ts.t.Fatal(err)
	}
	if r.method == http.MethodPost {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range r.headers {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	if hr.Header.Get("Host") != "" {
		hr.Host = hr.Header.Get("Host")
	}
	cl := ts.cl
	if r.from != "" {
		cl = ts.clientFrom(r.from)
	}
	resp, err := cl.Do(hr)
	if err != nil {
		cancel()
		ts.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &cancelBody{resp.Body, cancel}
		return resp
	}
	defer cancel()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		ts.t.Fatalf("%s %s: reading body: %v", r.method, r.path, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}

// clientFrom is an HTTP client whose connections come from the IP address ip.
func (ts *testServer) clientFrom(ip string) *http.Client {
	local := &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}
	cl := &http.Client{Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return ts.ln.DialWithLocalAddr(local) },
	}}
	ts.t.Cleanup(cl.CloseIdleConnections)
	return cl
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error { err := b.ReadCloser.Close(); b.cancel(); return err }

func bodyOf(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return string(b)
}

// initialize opens a Streamable HTTP session at revision v and returns its id.
func (ts *testServer) initialize(v string) string {
	ts.t.Helper()
	resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `"}}`})
	if resp.StatusCode != http.StatusOK {
		ts.t.Fatalf("initialize: status %d: %s", resp.StatusCode, bodyOf(resp))
	}
	id := resp.Header.Get(HeaderSessionID)
	if id == "" {
		ts.t.Fatalf("initialize: no %s header", HeaderSessionID)
	}
	return id
}

// sessionHeaders are the headers of a request on session sid at revision v.
func sessionHeaders(sid, v string) map[string]string {
	h := map[string]string{HeaderSessionID: sid}
	if v != "" && v != "2025-03-26" {
		h[HeaderProtocolVersion] = v
	}
	return h
}

// event is an SSE event as a test sees it.
type event struct {
	ID, Event, Data string
	Retry           int
}

// events reads n events (or until the stream ends when n < 0) from an event stream.
func readEvents(t testing.TB, rd *sse.Reader, n int) []event {
	t.Helper()
	var out []event
	for n < 0 || len(out) < n {
		ev, err := rd.Next()
		if err != nil {
			if n < 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
				return out
			}
			t.Fatalf("after %d events: %v", len(out), err)
		}
		e := event{Data: string(ev.Data), Event: string(ev.Event), Retry: ev.Retry}
		if ev.HasID {
			e.ID = string(ev.ID)
		}
		out = append(out, e)
	}
	return out
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, waitLimit, cond)
}

// openLegacy opens a legacy HTTP+SSE stream and returns it, its reader (past the
// endpoint event) and the POST endpoint the endpoint event names.
func (ts *testServer) openLegacy() (*http.Response, *sse.Reader, string) {
	ts.t.Helper()
	stream := ts.do(req{method: "GET", path: "/sse", headers: map[string]string{"Accept": "text/event-stream"}})
	if stream.StatusCode != 200 {
		ts.t.Fatalf("GET /sse: %d %s", stream.StatusCode, bodyOf(stream))
	}
	rd := sse.NewReader(stream.Body, 0)
	ev, err := rd.Next()
	if err != nil {
		ts.t.Fatalf("endpoint event: %v", err)
	}
	if string(ev.Event) != "endpoint" || !strings.HasPrefix(string(ev.Data), "/message?sessionId=") {
		ts.t.Fatalf("first event %q %q, want endpoint /message?sessionId=...", ev.Event, ev.Data)
	}
	return stream, rd, string(ev.Data)
}
