package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/memhttp"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// statelessHandler serves the requests whose MCP-Protocol-Version header is
// "stateless-1" without a session, as a handler of a stateless revision would.
type statelessHandler struct {
	abandoned chan string // the method of each request whose client left
	gate      chan struct{}
	release   chan struct{} // closed by a test: "held" sends its first message
}

func (h *statelessHandler) Stateless(m *codec.Message, header []byte) bool {
	return string(header) == "stateless-1"
}

func (h *statelessHandler) SessionClosed(*Session) {}

// ScreenReply marks every reply it passed and settles 409 for the errors "settled" and
// "Method not found" (the latter's handler set 404, which stays); ScreenSend drops what
// mentions "secret".
func (h *statelessHandler) ScreenReply(x *Exchange, msg, buf []byte) []byte {
	if strings.Contains(string(msg), `"message":"settled"`) || strings.Contains(string(msg), `"message":"Method not found"`) {
		x.SettleStatus(http.StatusConflict)
	}
	buf = append(buf, msg[:len(msg)-1]...)
	return append(buf, `,"screened":true}`...)
}

func (h *statelessHandler) ScreenSend(x *Exchange, msg, buf []byte) ([]byte, bool) {
	return msg, !strings.Contains(string(msg), "secret")
}

func (h *statelessHandler) HandleMessage(x *Exchange) {
	if x.Msg.Kind != codec.KindRequest {
		x.Done()
		return
	}
	if !x.Stateless || x.Session != nil {
		x.Reply(codec.AppendError(nil, x.Msg.ID, codec.CodeInvalidRequest, "not stateless", nil))
		return
	}
	id := append([]byte(nil), x.Msg.ID...)
	method := string(x.Msg.Method)
	switch method {
	case "headers":
		res := `{"version":"` + string(x.Headers.Version) + `","method":"` + string(x.Headers.Method) +
			`","name":"` + string(x.Headers.Name) + `","params":` + string(codec.AppendString(nil, string(x.Headers.Params))) + `}`
		x.Reply(codec.AppendResult(nil, id, []byte(res)))
	case "refused":
		x.SetStatus(http.StatusNotFound)
		x.Reply(codec.AppendError(nil, id, codec.CodeMethodNotFound, "Method not found", nil))
	case "failed":
		x.Reply(codec.AppendError(nil, id, codec.CodeInvalidParams, "bad", nil))
	case "settled":
		x.Reply(codec.AppendError(nil, id, codec.CodeInvalidParams, "settled", nil))
	case "slow": // answers when the test ends, sending nothing before
		x.OnAbandonBy(abandonSignal{h.abandoned, method}) // the form without a closure
		go func() {
			<-h.gate
			x.Reply(codec.AppendResult(nil, id, []byte(`{"done":true}`)))
		}()
	case "held": // holds its stream back until the test releases it
		x.HoldStream()
		go func() {
			<-h.release
			x.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"n":1}}`))
			x.Reply(codec.AppendResult(nil, id, []byte(`{"done":true}`)))
		}()
	case "listen", "keep": // acknowledged, then held until the test releases it or ends
		x.HoldStream()
		x.OnAbandon(func() { h.abandoned <- method })
		send, reply, done := x.Send, x.Reply, x.Done
		if method == "listen" { // the request given back (Hold), as a listen stream does
			held := x.Hold()
			send, reply, done = held.Send, held.Reply, held.Done
		}
		send([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`))
		go func() {
			select {
			case <-h.release:
				send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"secret"}}`))
				send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"n":2}}`))
				reply(codec.AppendResult(nil, id, []byte(`{"done":true}`)))
			case <-h.gate: // the test ended, or the client left: the handler ends it
				done()
			}
		}()
	case "stream", "wait":
		x.OnAbandon(func() { h.abandoned <- method })
		go func() {
			x.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"n":1}}`))
			x.Send([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"secret"}}`))
			if method == "wait" {
				<-h.gate // until the test ends
			}
			x.Reply(codec.AppendResult(nil, id, []byte(`{"done":true}`)))
		}()
	}
}

// abandonSignal is a transport.Abandoner that says which method was abandoned.
type abandonSignal struct {
	ch     chan<- string
	method string
}

func (a abandonSignal) Abandon() { a.ch <- a.method }

// startStateless serves a statelessHandler on an in-memory listener.
// streamAfter is HTTPConfig.StatelessStreamAfter (negative: never, so that quick
// replies are JSON whatever the machine's load).
func startStateless(t testing.TB, streamAfter time.Duration) (*statelessHandler, *http.Client) {
	h, ms := startStatelessServer(t, streamAfter)
	return h, ms.Client
}

// startStatelessServer is startStateless with the in-memory server itself, whose
// listener opens raw connections to it.
func startStatelessServer(t testing.TB, streamAfter time.Duration) (*statelessHandler, *memhttp.Server) {
	h, srv, stop := newStatelessServer(streamAfter)
	ms := memhttp.Start(t, srv, waitLimit)
	t.Cleanup(stop)
	return h, ms
}

// startStatelessTCP serves a statelessHandler on a loopback listener: connections with
// a descriptor, which the close watcher takes. It returns the listener's address.
func startStatelessTCP(t *testing.T) (*statelessHandler, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, srv, stop := newStatelessServer(-1)
	go srv.Serve(ln)
	t.Cleanup(func() {
		stop()
		srv.Shutdown()
	})
	return h, ln.Addr().String()
}

// newStatelessServer is a statelessHandler behind an HTTPServer and the fasthttp.Server
// serving it; stop ends the handler's waits and the HTTPServer.
func newStatelessServer(streamAfter time.Duration) (h *statelessHandler, srv *fasthttp.Server, stop func()) {
	h = &statelessHandler{abandoned: make(chan string, 4), gate: make(chan struct{}), release: make(chan struct{})}
	cfg := HTTPConfig{
		Rules:                DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26"),
		KeepAlive:            time.Hour, // a client that leaves is seen at once, not at a keep-alive
		StatelessStreamAfter: streamAfter,
		StatusOf: func(reply []byte) int {
			if strings.Contains(string(reply), `"error"`) {
				return http.StatusTeapot
			}
			return 0
		},
	}
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(cfg, reg, h)
	srv = &fasthttp.Server{Handler: hs.ServeStreamable, Logger: quietLogger{}, NoDefaultContentType: true}
	return h, srv, func() {
		close(h.gate)
		hs.Shutdown()
		reg.Close()
	}
}

func statelessPost(t *testing.T, cl *http.Client, body string, headers map[string]string) *http.Response {
	t.Helper()
	return statelessPostCtx(t, context.Background(), cl, body, headers)
}

// statelessPostCtx is statelessPost whose request ends with ctx: a client that leaves.
func statelessPostCtx(t *testing.T, ctx context.Context, cl *http.Client, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(HeaderProtocolVersion, "stateless-1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStatelessRequest: a request the handler claims is served without a session, with
// its raw headers (Mcp-Param-* as lines), the handler's screen applied to the reply, and
// the status the handler, its screen (SettleStatus: never over the handler's) or
// HTTPConfig.StatusOf gives.
func TestStatelessRequest(t *testing.T) {
	_, cl := startStateless(t, -1)
	resp := statelessPost(t, cl, `{"jsonrpc":"2.0","id":1,"method":"headers"}`, map[string]string{
		"Mcp-Method": "headers", "Mcp-Name": "=?base64?eA==?=", "Mcp-Param-Region": "eu", "mcp-param-tier": " gold ",
		"Mcp-Methox": "no", "Mcp-Nam": "no", "M": "no", "Mcp-Param-": "no", // near misses, taken for none of them
	})
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get(HeaderSessionID) != "" {
		t.Fatalf("%d, session %q: %s", resp.StatusCode, resp.Header.Get(HeaderSessionID), body)
	}
	for _, want := range []string{`"version":"stateless-1"`, `"method":"headers"`, `"name":"=?base64?eA==?="`,
		`Mcp-Param-Region: eu\n`, `Mcp-Param-Tier: gold\n`, `"screened":true`} {
		if !strings.Contains(body, want) {
			t.Errorf("reply lacks %s: %s", want, body)
		}
	}
	if strings.Contains(body, "no") {
		t.Errorf("a near miss was taken for a header of the revision: %s", body)
	}

	resp = statelessPost(t, cl, `{"jsonrpc":"2.0","id":2,"method":"refused"}`, nil)
	if body := readAll(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Errorf("SetStatus: %d, want 404: %s", resp.StatusCode, body)
	}
	resp = statelessPost(t, cl, `{"jsonrpc":"2.0","id":3,"method":"failed"}`, nil)
	if body := readAll(t, resp); resp.StatusCode != http.StatusTeapot {
		t.Errorf("StatusOf: %d, want 418: %s", resp.StatusCode, body)
	}
	// The screen settled the status: StatusOf (418) is not asked.
	resp = statelessPost(t, cl, `{"jsonrpc":"2.0","id":5,"method":"settled"}`, nil)
	if body := readAll(t, resp); resp.StatusCode != http.StatusConflict {
		t.Errorf("SettleStatus: %d, want 409: %s", resp.StatusCode, body)
	}
	resp = statelessPost(t, cl, `{"jsonrpc":"2.0","method":"notifications/x"}`, nil)
	if body := readAll(t, resp); resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: %d, want 202: %s", resp.StatusCode, body)
	}
	// Without the header the handler claims, the session path answers: no session.
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"headers"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Mcp-Session-Id") {
		t.Errorf("unclaimed request without a session: %d %s, want 400", resp.StatusCode, body)
	}
}

// TestStatelessStream: what the handler sends before the reply opens an SSE stream on
// the POST (the screen dropping what it refuses), ended by the reply.
func TestStatelessStream(t *testing.T) {
	_, cl := startStateless(t, -1)
	resp := statelessPost(t, cl, `{"jsonrpc":"2.0","id":1,"method":"stream"}`, nil)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || resp.Header.Get(HeaderSessionID) != "" {
		t.Fatalf("content type %q, session %q", ct, resp.Header.Get(HeaderSessionID))
	}
	body := readAll(t, resp) // the stream ends with the reply
	if !strings.Contains(body, `"notifications/progress"`) || !strings.Contains(body, `"result":{"done":true},"screened":true`) {
		t.Errorf("stream: %s", body)
	}
	if strings.Contains(body, "secret") {
		t.Errorf("the screen's refusal went out: %s", body)
	}
}

// TestStatelessStreamKeepsConn: a stateless call whose answer is streamed (a message
// before the reply) leaves its connection to the client's next request once the stream
// has ended with the reply (no Connection: close; the chunked body ends), over a
// connection the close watcher takes; and a client that closes such a stream before
// the reply still abandons the call (the watcher sees the close).
func TestStatelessStreamKeepsConn(t *testing.T) {
	h, addr := startStatelessTCP(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitLimit))
	br := bufio.NewReader(conn)
	post := func(c net.Conn, id int, method string) {
		t.Helper()
		if _, err := c.Write(rawStatelessRequest(addr, id, method)); err != nil {
			t.Fatal(err)
		}
	}
	for id := 1; id <= 3; id++ { // one connection for every call
		post(conn, id, "stream")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("call %d: %v", id, err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || resp.Close {
			t.Fatalf("call %d: content type %q, connection closed after it: %v", id, ct, resp.Close)
		}
		if body := readAll(t, resp); !strings.Contains(body, `"id":`+strconv.Itoa(id)+`,"result":{"done":true}`) {
			t.Fatalf("call %d: stream %s", id, body)
		}
	}

	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(waitLimit))
	post(c2, 1, "wait")
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('}'); err != nil || !strings.Contains(line, "notifications/progress") {
		t.Fatalf("first event: %q %v", line, err)
	}
	c2.Close()
	if got := testwait.Recv(t, "OnAbandon after the client closed the stream", waitLimit, h.abandoned); got != "wait" {
		t.Errorf("abandoned %q", got)
	}
}

// TestStatelessAbandon: a client that closes the stream of its request before the reply
// runs what the handler registered with OnAbandon (the revision's cancellation).
func TestStatelessAbandon(t *testing.T) {
	abandonAfterFirst(t, "wait", "notifications/progress")
}

// abandonAfterFirst posts a stateless request of method, reads its stream's first event
// (which must hold first), then closes the stream: the handler's OnAbandon must run for
// that request.
func abandonAfterFirst(t *testing.T, method, first string) {
	t.Helper()
	h, cl := startStateless(t, -1)
	ctx, cancel := context.WithCancel(context.Background())
	resp := statelessPostCtx(t, ctx, cl, `{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`, nil)
	line, err := bufio.NewReader(resp.Body).ReadString('}') // the first event is there
	if err != nil || !strings.Contains(line, first) {
		t.Fatalf("first event: %q %v", line, err)
	}
	cancel()
	resp.Body.Close()
	if got := testwait.Recv(t, "OnAbandon after the client left", waitLimit, h.abandoned); got != method {
		t.Errorf("abandoned %q", got)
	}
}

// TestStatelessGetDelete: a GET or DELETE naming a stateless revision gets 405.
func TestStatelessGetDelete(t *testing.T) {
	_, cl := startStateless(t, -1)
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, "http://127.0.0.1/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set(HeaderProtocolVersion, "stateless-1")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s: %d Allow %q: %s", method, resp.StatusCode, resp.Header.Get("Allow"), body)
		}
	}
}

// TestStatelessSlowReply: a reply that is slow to come turns into a stream
// (StatelessStreamAfter), so that the client's closing the connection cancels the
// request at once even though nothing was sent before the reply.
func TestStatelessSlowReply(t *testing.T) {
	h, cl := startStateless(t, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	resp := statelessPostCtx(t, ctx, cl, `{"jsonrpc":"2.0","id":1,"method":"slow"}`, nil)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("slow reply as %q, want a stream", ct)
	}
	cancel()
	resp.Body.Close()
	if got := testwait.Recv(t, "OnAbandon after the client left", waitLimit, h.abandoned); got != "slow" {
		t.Errorf("abandoned %q", got)
	}
}

// TestStatelessHeldStream: a request whose handler holds its stream back (HoldStream)
// is still waited for once StatelessStreamAfter has passed: its stream opens with the
// first message the handler sends, and the reply ends it (it was answered 504 at once).
func TestStatelessHeldStream(t *testing.T) {
	const after = 5 * time.Millisecond
	h, cl := startStateless(t, after)
	// The early deadline passes before the handler sends anything (when the machine is
	// too slow for that, the request is served as any other).
	go func() {
		time.Sleep(20 * after)
		close(h.release)
	}()
	resp := statelessPost(t, cl, `{"jsonrpc":"2.0","id":1,"method":"held"}`, nil)
	body := readAll(t, resp)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("%d %q: %s", resp.StatusCode, ct, body)
	}
	if !strings.Contains(body, `"notifications/progress"`) || !strings.Contains(body, `"result":{"done":true}`) {
		t.Errorf("stream: %s", body)
	}
}

// TestKeepScreenBuf: the screen buffer goes back to its pool with what a screen grew it
// into, never with the message the screen passed as it was (or a view into it).
func TestKeepScreenBuf(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	for _, tc := range []struct {
		name string
		out  []byte
		keep bool
	}{
		{"grown", append([]byte(nil), msg...), true},
		{"msg itself", msg, false},
		{"a view into msg", msg[3:9], false},
		{"empty", nil, false},
	} {
		bp := new([]byte)
		keepScreenBuf(bp, tc.out, msg)
		if kept := cap(*bp) > 0; kept != tc.keep || len(*bp) != 0 {
			t.Errorf("%s: kept %v (len %d), want %v", tc.name, kept, len(*bp), tc.keep)
		}
	}
}
