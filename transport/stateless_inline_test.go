package transport

import (
	"bufio"
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

// onCallerHandler works on the goroutine that delivers each stateless request, as the
// router's forward run on the caller does: it asks WatchOnCaller first (its answer goes
// to watch), then "now" answers at once and "slow" blocks until its client leaves
// (OnAbandon) or the test ends, then answers.
type onCallerHandler struct {
	watch     chan bool
	running   chan struct{} // one per "slow" request, once its abandon hook is in
	abandoned chan struct{}
	end       chan struct{}
}

func newOnCallerHandler() *onCallerHandler {
	return &onCallerHandler{watch: make(chan bool, 4), running: make(chan struct{}, 4),
		abandoned: make(chan struct{}, 4), end: make(chan struct{})}
}

func (h *onCallerHandler) Stateless(m *codec.Message, header []byte) bool {
	return string(header) == "stateless-1"
}

func (h *onCallerHandler) SessionClosed(*Session) {}

func (h *onCallerHandler) HandleMessage(x *Exchange) {
	if x.Msg.Kind != codec.KindRequest {
		x.Done()
		return
	}
	h.watch <- x.WatchOnCaller()
	id := append([]byte(nil), x.Msg.ID...)
	if string(x.Msg.Method) == "slow" {
		left := make(chan struct{})
		x.OnAbandon(func() { close(left); h.abandoned <- struct{}{} })
		h.running <- struct{}{}
		select {
		case <-left:
		case <-h.end:
		}
	}
	x.Reply(codec.AppendResult(nil, id, []byte(`{"done":true}`)))
}

// startOnCaller serves h on a real loopback listener (a connection with a descriptor,
// which the close watcher takes), with StatelessStreamAfter streamAfter.
func startOnCaller(t *testing.T, h *onCallerHandler, streamAfter time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(HTTPConfig{
		Rules:                DefaultHTTPRules(ln.Addr().String(), testRevisions, "2025-03-26"),
		StatelessStreamAfter: streamAfter,
	}, reg, h)
	srv := &fasthttp.Server{Handler: hs.ServeStreamable, Logger: quietLogger{}, NoDefaultContentType: true}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(h.end)
		srv.Shutdown()
		hs.Shutdown()
		reg.Close()
	})
	return ln.Addr().String()
}

// rawStatelessPost writes a stateless POST of method on a new connection to addr.
func rawStatelessPost(t *testing.T, addr, method string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write(rawStatelessRequest(addr, 1, method)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// rawStatelessRequest is the bytes of a stateless POST (revision "stateless-1", no
// session) of request id, method, to the MCP endpoint at host, for the tests that write
// it on a connection of their own.
func rawStatelessRequest(host string, id int, method string) []byte {
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"` + method + `"}`
	return []byte("POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\n" + HeaderProtocolVersion + ": stateless-1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// TestStatelessOnCallerClosed: a stateless request worked on its own goroutine, still
// running after StatelessStreamAfter, is abandoned when its client closes the
// connection (the close watcher, armed by WatchOnCaller), as a closed stream abandons
// one served by another goroutine; a close before the watch is armed counts too.
func TestStatelessOnCallerClosed(t *testing.T) {
	for _, c := range []struct {
		name        string
		streamAfter time.Duration
	}{
		{"closed after the watch (most likely)", time.Millisecond},
		{"closed before the watch", time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newOnCallerHandler()
			addr := startOnCaller(t, h, c.streamAfter)
			conn := rawStatelessPost(t, addr, "slow")
			if !testwait.Recv(t, "WatchOnCaller's answer", waitLimit, h.watch) {
				t.Fatal("WatchOnCaller refused a loopback connection")
			}
			testwait.Recv(t, "the request running on its goroutine", waitLimit, h.running)
			conn.Close()
			testwait.Recv(t, "the abandon hook after the client closed", waitLimit, h.abandoned)
		})
	}
}

// TestStatelessOnCallerAnswered: a request answered on its goroutine before
// StatelessStreamAfter goes out as JSON, and the connection serves the next request.
func TestStatelessOnCallerAnswered(t *testing.T) {
	h := newOnCallerHandler()
	addr := startOnCaller(t, h, time.Second)
	conn := rawStatelessPost(t, addr, "now")
	br := bufio.NewReader(conn)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !strings.Contains(b.String(), `"done":true`) {
			t.Fatalf("reply %d: %d %q %s", i, resp.StatusCode, resp.Header.Get("Content-Type"), b.String())
		}
		if !testwait.Recv(t, "WatchOnCaller's answer", waitLimit, h.watch) {
			t.Fatal("WatchOnCaller refused a loopback connection")
		}
		if i == 0 {
			conn.Write(rawStatelessRequest(addr, 2, "now"))
		}
	}
}

// TestStatelessOnCallerUnwatchable: a connection the close watcher cannot take (no
// descriptor, as with TLS; here in memory) cannot have its request worked on its
// goroutine: WatchOnCaller says no, and the handler must let that goroutine wait.
func TestStatelessOnCallerUnwatchable(t *testing.T) {
	h := newOnCallerHandler()
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(HTTPConfig{
		Rules:                DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26"),
		StatelessStreamAfter: time.Second,
	}, reg, h)
	ms := memhttp.Start(t, &fasthttp.Server{Handler: hs.ServeStreamable, Logger: quietLogger{}, NoDefaultContentType: true}, waitLimit)
	t.Cleanup(func() {
		close(h.end)
		hs.Shutdown()
		reg.Close()
	})
	resp := statelessPost(t, ms.Client, `{"jsonrpc":"2.0","id":1,"method":"now"}`, nil)
	readAll(t, resp)
	if testwait.Recv(t, "WatchOnCaller's answer", waitLimit, h.watch) {
		t.Fatal("WatchOnCaller said yes for a connection without a descriptor")
	}
}

// TestCallerWatchesFull: a request worked on its goroutine takes one of its server's
// callerSlots until its handler returns; when every slot it could take is taken,
// WatchOnCaller says no (the work goes to a worker) and takes none. The sweep, started
// by the first arm, ends once every slot is free.
func TestCallerWatchesFull(t *testing.T) {
	s := NewHTTPServer(HTTPConfig{Rules: DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26"),
		StatelessStreamAfter: time.Millisecond}, NewRegistry(RegistryConfig{}, nil), nil)
	if s.watcher == nil {
		t.Skip("no close watcher here")
	}
	var ctx fasthttp.RequestCtx
	ctx.Init2(loopbackConn(t), nil, false)
	p, x := callerPost(s)
	defer putPost(p)
	other := new(callerWatch)
	for i := range s.callers.slots {
		s.callers.slots[i].Store(other)
	}
	p.inl.ctx = &ctx
	if x.WatchOnCaller() || p.inl.slot != 0 || p.inl.st.Load() != 0 {
		t.Fatalf("every slot taken: WatchOnCaller said yes (slot %d, state %x)", p.inl.slot, p.inl.st.Load())
	}
	p.inl.stop()
	for i := range s.callers.slots {
		s.callers.slots[i].Store(nil)
	}
	p.inl.ctx = &ctx
	if !x.WatchOnCaller() || p.inl.slot == 0 || !s.callers.running.Load() {
		t.Fatal("a free slot: WatchOnCaller said no, or started no sweep")
	}
	if !x.WatchOnCaller() {
		t.Fatal("asked again: WatchOnCaller said no")
	}
	p.inl.stop()
	if p.inl.slot != 0 || s.callers.taken() {
		t.Fatal("a slot still taken after stop")
	}
	testwait.For(t, "the sweep to end with every slot free", waitLimit, func() bool { return !s.callers.running.Load() })
}

// TestArmState: an arm's state is never that of no arm, keeps its due tick whatever its
// count, and is due from that tick on, across the tick's wrap.
func TestArmState(t *testing.T) {
	for _, c := range []struct{ arms, due uint32 }{{0, 0}, {1, 5}, {1 << 31, 0}, {^uint32(0), ^uint32(0)}, {7, ^uint32(0) - 1}} {
		st := armState(c.arms, c.due)
		if st == 0 || st&watchFired != 0 {
			t.Fatalf("arm %d due %d: state %x", c.arms, c.due, st)
		}
		if !dueBy(st, c.due) || !dueBy(st, c.due+3) || dueBy(st, c.due-1) {
			t.Fatalf("arm %d due %d: due by %d, %d, not by %d", c.arms, c.due, c.due, c.due+3, c.due-1)
		}
	}
	if armState(1, 9) == armState(2, 9) {
		t.Fatal("two arms due at one tick share a state")
	}
}
