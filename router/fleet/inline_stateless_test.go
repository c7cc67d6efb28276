package fleet

// A stateless (2026-07-28) client's request forwarded on its own goroutine: the client
// on a real loopback connection (the transport watches it while the forward runs), the
// router with RunOnCaller, and a scripted 2025 Streamable HTTP backend.

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
)

// cancelTap hands the backend's notifications/cancelled to cancelled, and the rest of
// what the router sends to b; modern: it answers server/discover offering 2026-07-28
// alone (b then serves 2026-07-28 requests as it serves the others).
type cancelTap struct {
	b         *scriptBackend
	cancelled chan string
	modern    bool
}

func (c *cancelTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		raw, _ := io.ReadAll(r.Body)
		if bytes.Contains(raw, []byte(`"notifications/cancelled"`)) {
			c.cancelled <- string(raw)
		}
		var m codec.Message
		if c.modern && codec.Scan(raw, &m) == nil && string(m.Method) == "server/discover" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(codec.AppendResult(nil, m.ID, []byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"serverInfo":{"name":"b","version":"1"}}`)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
	}
	c.b.ServeHTTP(w, r)
}

// statelessRig is a router serving stateless clients (StatelessOn) with RunOnCaller in
// front of b, its HTTP server on a loopback listener; streamAfter is the transport's
// StatelessStreamAfter.
type statelessRig struct {
	t    *testing.T
	r    *router.Router
	addr string
	tap  *cancelTap
}

func newStatelessRig(t *testing.T, b *scriptBackend, streamAfter time.Duration) *statelessRig {
	return newStatelessRigEra(t, b, streamAfter, Era2025)
}

// newStatelessRigEra is newStatelessRig with the backend used in era (Era2026: the
// backend offers 2026-07-28 alone).
func newStatelessRigEra(t *testing.T, b *scriptBackend, streamAfter time.Duration, era Era) *statelessRig {
	t.Helper()
	if b.answers == nil {
		b.answers = make(chan string, 4)
	}
	tap := &cancelTap{b: b, cancelled: make(chan string, 4), modern: era == Era2026}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := startInlineFleet(t, tap, inlineWait, era, log)
	r, err := router.New(router.Config{Fleet: f, Logger: log, RunOnCaller: true, Stateless: router.StatelessOn, ReplyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: the front stops before the router and the fleet close.
	t.Cleanup(func() {
		f.Close()
		testwait.Cleanup(t, inlineWait, r.Close)
	})
	serveHTTPFront(t, ln, r, streamAfter)
	return &statelessRig{t: t, r: r, addr: ln.Addr().String(), tap: tap}
}

// statelessCall is a 2026-07-28 tools/call of the scripted tool, with a progress token,
// from a client that declares caps.
func statelessCall(caps string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call","_meta":{"progressToken":"p",` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
}

// post writes body as a stateless POST on a new connection and returns the connection.
func (g *statelessRig) post(body string) net.Conn {
	g.t.Helper()
	conn, err := net.Dial("tcp", g.addr)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { conn.Close() })
	req := "POST /mcp HTTP/1.1\r\nHost: " + g.addr + "\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n" +
		"Mcp-Method: tools/call\r\nMcp-Name: call\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := conn.Write([]byte(req)); err != nil {
		g.t.Fatal(err)
	}
	return conn
}

// response reads the response on conn.
func response(t *testing.T, conn net.Conn) *http.Response {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(inlineWait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestInlineStatelessJSON: a stateless call whose 2025 backend answers with JSON is
// forwarded on its request's goroutine (a client that declares no capability the
// backend could ask with) and answered with the decorated result.
func TestInlineStatelessJSON(t *testing.T) {
	b := &scriptBackend{}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(codec.AppendResult(nil, m.ID, []byte(`{"content":[{"type":"text","text":"done"}]}`)))
	}
	g := newStatelessRig(t, b, 0)
	conn := g.post(statelessCall(`{}`))
	resp := response(t, conn)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":7`) || !strings.Contains(string(body), `"resultType":"complete"`) {
		t.Fatalf("stateless call: %d %s", resp.StatusCode, body)
	}
	wantRanInline(t, g.r, "the stateless call did not run on its caller")
}

// TestInlineStatelessStream: the backend's event stream is handed off: its progress
// reaches the client while the backend still holds the result (it answers only once the
// test has seen the progress), then the result ends the client's stream.
func TestInlineStatelessStream(t *testing.T) {
	b := &scriptBackend{}
	seen := make(chan struct{})
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		progressThenResult(w, r, m, seen, `{"content":[{"type":"text","text":"done"}]}`)
	}
	g := newStatelessRig(t, b, 0)
	g.expectProgressThenResult(t, g.post(statelessCall(`{}`)), seen)
}

// progressThenResult answers call m with an event stream: a progress notification with
// m's token, then, once seen is closed, result.
func progressThenResult(w http.ResponseWriter, r *http.Request, m *codec.Message, seen <-chan struct{}, result string) {
	startSSE(w)
	writeEvent(w, "", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`+string(m.ProgressToken)+`,"progress":1}}`)
	select {
	case <-seen:
	case <-r.Context().Done():
		return
	}
	writeEvent(w, "", string(codec.AppendResult(nil, m.ID, []byte(result))))
}

// expectProgressThenResult reads the answer to the stateless call (id 7, progress token
// "p") posted on conn, answered by progressThenResult: an event stream whose progress
// comes while the backend holds the result, which comes once seen is closed; and the
// call ran on its caller.
func (g *statelessRig) expectProgressThenResult(t *testing.T, conn net.Conn, seen chan struct{}) {
	t.Helper()
	resp := response(t, conn)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("stateless call answered %d %s, want an event stream: %s", resp.StatusCode, ct, body)
	}
	ch := events(resp.Body)
	if msg := next(t, ch, "the progress"); !strings.Contains(msg, `"progressToken":"p"`) {
		t.Fatalf("first message %s, want the progress with the client's token", msg)
	}
	close(seen)
	if msg := next(t, ch, "the result"); !strings.Contains(msg, `"id":7`) || !strings.Contains(msg, "done") {
		t.Fatalf("last message %s, want the result", msg)
	}
	wantRanInline(t, g.r, "the stateless call did not run on its caller")
}

// TestInlineStatelessClosed: a slow stateless call forwarded on its goroutine, whose
// backend sends nothing before its answer, is cancelled upstream when the client closes
// its connection (seen by the close watcher once StatelessStreamAfter has passed): the
// backend gets notifications/cancelled for it, as through a worker.
func TestInlineStatelessClosed(t *testing.T) {
	b := &scriptBackend{}
	running, stop := make(chan struct{}, 1), make(chan struct{})
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		running <- struct{}{}
		select { // answers nothing: the cancellation came, or the router went
		case <-stop:
		case <-r.Context().Done():
		}
	}
	g := newStatelessRig(t, b, 10*time.Millisecond)
	conn := g.post(statelessCall(`{}`))
	testwait.Recv(t, "the call on the backend", inlineWait, running)
	conn.Close()
	got := testwait.Recv(t, "the backend's notifications/cancelled", inlineWait, g.tap.cancelled)
	close(stop)
	if !strings.Contains(got, `"requestId"`) {
		t.Fatalf("cancellation %s", got)
	}
	wantRanInline(t, g.r, "the stateless call did not run on its caller")
}

// TestInlineStatelessAsks: a client that declares sampling is not forwarded on its
// goroutine to a 2025 backend (which could park its call with input_required behind a
// Send waiting for a JSON reply): its call goes to a worker and is answered.
func TestInlineStatelessAsks(t *testing.T) {
	b := &scriptBackend{}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(codec.AppendResult(nil, m.ID, []byte(`{"content":[]}`)))
	}
	g := newStatelessRig(t, b, 0)
	conn := g.post(statelessCall(`{"sampling":{}}`))
	resp := response(t, conn)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":7`) {
		t.Fatalf("stateless call: %d %s", resp.StatusCode, body)
	}
	if n := ranInline(g.r); n != 0 {
		t.Errorf("%d calls ran on their callers, want none", n)
	}
}

// TestInlineStatelessModern: before a 2026-07-28 backend, a stateless call is forwarded
// on its goroutine whatever the client declares (the backend's input_required is its
// reply), and the backend's event stream is handed off (upstream.StatelessConn under a
// Detacher): its progress reaches the client while the backend holds the result.
func TestInlineStatelessModern(t *testing.T) {
	b := &scriptBackend{}
	seen := make(chan struct{})
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		if r.Header.Get("MCP-Protocol-Version") != "2026-07-28" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		progressThenResult(w, r, m, seen, `{"resultType":"complete","content":[{"type":"text","text":"done"}]}`)
	}
	g := newStatelessRigEra(t, b, 0, Era2026)
	g.expectProgressThenResult(t, g.post(statelessCall(`{"sampling":{}}`)), seen)
}
