package router

// The router behind the Streamable HTTP transport: what only a session created by
// initialize shows (session ids, a second initialize, shutdown, the session limit), and
// requests in both directions through a test Fleet.

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/memhttp"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/sse"
)

type httpHarness struct {
	t   *testing.T
	reg *transport.Registry
	srv *transport.HTTPServer
	cl  *http.Client
}

func newHTTPHarness(t *testing.T, r *Router, maxSessions int) *httpHarness {
	t.Helper()
	return newHTTPHarnessWith(t, r, transport.RegistryConfig{MaxSessions: maxSessions}, transport.HTTPConfig{})
}

func newHTTPHarnessWith(t *testing.T, r *Router, rc transport.RegistryConfig, hc transport.HTTPConfig) *httpHarness {
	t.Helper()
	reg := transport.NewRegistry(rc, r)
	hc.Rules = transport.DefaultHTTPRules("127.0.0.1:0", HeaderVersions, V20250326)
	hs := transport.NewHTTPServer(hc, reg, r)
	ms := memhttp.Start(t, &fasthttp.Server{Handler: hs.ServeStreamable, NoDefaultContentType: true}, waitLimit)
	t.Cleanup(func() {
		hs.Shutdown()
		reg.Close()
	})
	return &httpHarness{t: t, reg: reg, srv: hs, cl: ms.Client}
}

// post sends one JSON-RPC message of session sid at version (each header left out when
// empty); it returns the response with its body read unless it is an event stream.
func (h *httpHarness) post(sid, version, body string) (*http.Response, string) {
	h.t.Helper()
	c := &mcpraw.Client{URL: "http://127.0.0.1/mcp", HTTP: h.cl, Session: sid, Header: http.Header{transport.HeaderProtocolVersion: {version}}}
	resp, err := c.Do(c.NewRequest(context.Background(), http.MethodPost, body))
	if err != nil {
		h.t.Fatal(err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, ""
	}
	var sb strings.Builder
	bufio.NewReader(resp.Body).WriteTo(&sb)
	resp.Body.Close()
	return resp, sb.String()
}

func (h *httpHarness) initialize(v string) string {
	h.t.Helper()
	resp, body := h.post("", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get(transport.HeaderSessionID)
	if resp.StatusCode != 200 || sid == "" || !strings.Contains(body, `"protocolVersion":"`+v+`"`) {
		h.t.Fatalf("initialize %s: %d session %q: %s", v, resp.StatusCode, sid, body)
	}
	return sid
}

func TestHTTPLifecycle(t *testing.T) {
	r := newTestRouter(t, nil)
	h := newHTTPHarness(t, r, 3)

	// Without a session only initialize and server/discover pass.
	resp, body := h.post("", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp.StatusCode != 400 {
		t.Errorf("sessionless ping: %d %s, want 400", resp.StatusCode, body)
	}
	// server/discover is a 2026-07-28 request, served without a session: its _meta is
	// judged (-32602 and 400 without the client's capabilities), then answered.
	resp, body = h.post("", V20260728, `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"id":"d","error":{"code":-32602`) {
		t.Errorf("server/discover without capabilities: %d %s, want 400 and -32602", resp.StatusCode, body)
	}
	resp, body = h.post("", "", `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if resp.StatusCode != 400 || !strings.Contains(body, `"id":"d","error":{"code":-32020`) {
		t.Errorf("server/discover without its headers: %d %s, want 400 and -32020", resp.StatusCode, body)
	}
	if resp.Header.Get(transport.HeaderSessionID) != "" {
		t.Errorf("server/discover opened a session")
	}

	sid := h.initialize(V20251125)
	// A second initialize on the session is refused; the session goes on.
	_, body = h.post(sid, V20251125, `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !strings.Contains(body, `"code":-32600`) || !strings.Contains(body, "already initialized") {
		t.Errorf("second initialize: %s", body)
	}
	if resp, _ := h.post(sid, V20251125, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		t.Errorf("initialized notification: %d, want 202", resp.StatusCode)
	}
	if _, body := h.post(sid, V20251125, `{"jsonrpc":"2.0","id":3,"method":"ping"}`); body != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Errorf("ping: %s", body)
	}
	// shutdown answers {} and ends the session.
	if _, body := h.post(sid, V20251125, `{"jsonrpc":"2.0","id":4,"method":"shutdown"}`); body != `{"jsonrpc":"2.0","id":4,"result":{}}` {
		t.Errorf("shutdown: %s", body)
	}
	status := 0
	if !testwait.Poll(waitLimit, func() bool {
		resp, _ := h.post(sid, V20251125, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		status = resp.StatusCode
		return status == 404
	}) {
		t.Fatalf("session still alive after shutdown: %d", status)
	}

	// The session limit: the longest-idle session makes room for a new one.
	oldest := h.initialize(V20250618)
	h.initialize(V20250618)
	h.initialize(V20250618)
	resp, body = h.post("", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if resp.Header.Get(transport.HeaderSessionID) == "" {
		t.Errorf("initialize past the session limit, with idle sessions: %s, want the oldest evicted", body)
	}
	if resp, _ := h.post(oldest, V20250618, `{"jsonrpc":"2.0","id":6,"method":"ping"}`); resp.StatusCode != 404 {
		t.Errorf("the longest-idle session after eviction: %d, want 404", resp.StatusCode)
	}
}

// pingFleet is a Fleet whose "tools/call" sends a ping to the client (a server-to-client
// request on the POST's stream), waits for the client's answer, then replies.
type pingFleet struct {
	stubFleet
	mu   sync.Mutex
	wait map[string]chan []byte
}

func (f *pingFleet) Prepare(s *Session, x *transport.Exchange) bool {
	switch x.Msg.Kind {
	case codec.KindResult, codec.KindError:
		f.mu.Lock()
		ch := f.wait[string(x.Msg.ID)]
		delete(f.wait, string(x.Msg.ID))
		f.mu.Unlock()
		if ch != nil {
			ch <- append([]byte(nil), x.Raw...)
		}
		x.Done()
		return false
	case codec.KindRequest:
		return true
	}
	x.Done()
	return false
}

func (f *pingFleet) Run(s *Session, x *transport.Exchange) {
	id := append([]byte(nil), x.Msg.ID...)
	ch := make(chan []byte, 1)
	f.mu.Lock()
	f.wait[`"srv-ping"`] = ch
	f.mu.Unlock()
	if err := x.Send(codec.AppendRequest(nil, []byte(`"srv-ping"`), "ping", nil)); err != nil {
		x.Reply(codec.AppendError(nil, id, codec.CodeInternalError, err.Error(), nil))
		return
	}
	select {
	case answer := <-ch:
		x.Reply(codec.AppendResult(nil, id, []byte(`{"content":[],"clientAnswered":`+string(codec.AppendQuote(nil, answer))+`}`)))
	case <-time.After(waitLimit):
		x.Reply(codec.AppendError(nil, id, codec.CodeInternalError, "client did not answer the ping", nil))
	}
}

// TestPingBothWays: the client pings the router, and a ping from the server side reaches
// the client on the request's stream and its answer comes back through the router.
func TestPingBothWays(t *testing.T) {
	f := &pingFleet{wait: map[string]chan []byte{}}
	r := newTestRouter(t, f)
	h := newHTTPHarness(t, r, 0)
	sid := h.initialize(V20250618)
	if _, body := h.post(sid, V20250618, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); body != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("client ping: %s", body)
	}
	resp, _ := h.post(sid, V20250618, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("tools/call that pings the client: Content-Type %q, want an event stream", resp.Header.Get("Content-Type"))
	}
	defer resp.Body.Close()
	rd := sse.NewReader(resp.Body, 0)
	ev, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.Data) != `{"jsonrpc":"2.0","id":"srv-ping","method":"ping"}` {
		t.Fatalf("server-to-client request: %s", ev.Data)
	}
	if resp, body := h.post(sid, V20250618, `{"jsonrpc":"2.0","id":"srv-ping","result":{}}`); resp.StatusCode != 202 {
		t.Fatalf("client's answer: %d %s, want 202", resp.StatusCode, body)
	}
	ev, err = rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ev.Data), `"id":2,"result":{"content":[],"clientAnswered":"{\"jsonrpc\":\"2.0\",\"id\":\"srv-ping\",\"result\":{}}"}`) {
		t.Fatalf("final reply: %s", ev.Data)
	}
	if _, err := rd.Next(); err == nil {
		t.Errorf("the stream did not end after the reply")
	}
}

// TestRouterClosed: messages that arrive after Close get an error, never silence.
func TestRouterClosed(t *testing.T) {
	r := newTestRouter(t, nil)
	s := openStdio(t, r)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	s.recv()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if got := s.recv(); !strings.Contains(got, `"id":2,"error"`) {
		t.Errorf("ping after Close: %s, want an error", got)
	}
}
