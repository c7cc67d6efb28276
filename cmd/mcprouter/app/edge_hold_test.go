package app

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport/readahead"
)

// holdServer is the MCP listener's server as newServer configures it (default
// connection limits, fasthttp's per-address count, low-memory mode), its replies held
// by holdPlainReplies, in front of a test handler:
//
//	/plain   answers "plain:" and the body
//	/sse     streams one event, waits for gate, then streams another
//	/block   signals entered, waits for release, then answers "late"
type holdServer struct {
	addr     string
	srv      *fasthttp.Server
	served   chan error
	lnClosed chan struct{}
	gate     chan struct{} // /sse's second event
	entered  chan struct{} // /block's handler runs
	release  chan struct{} // /block's answer
	mu       sync.Mutex
	unheld   int // requests whose connection HolderOf did not see
}

func startHoldServer(t *testing.T) *holdServer {
	t.Helper()
	cfg, err := ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	h := &holdServer{served: make(chan error, 1), lnClosed: make(chan struct{}), gate: make(chan struct{}),
		entered: make(chan struct{}, 1), release: make(chan struct{})}
	h.srv = a.newServer()
	h.srv.Handler = holdPlainReplies(a.streamsUnbounded(h.handle), cfg.Connections.PipelinedReplyWait)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	go func() { h.served <- h.srv.Serve(readahead.Listen(&notifyClose{Listener: ln, closed: h.lnClosed})) }()
	t.Cleanup(func() {
		_ = h.srv.Shutdown()
		<-h.served
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.unheld > 0 {
			t.Errorf("%d requests on connections whose replies cannot be held or whose descriptor cannot be had (readahead.HolderOf, SyscallConnOf)", h.unheld)
		}
	})
	return h
}

func (h *holdServer) handle(ctx *fasthttp.RequestCtx) {
	_, raw := readahead.SyscallConnOf(ctx.Conn()) // the streams' raw writes and close watch
	if readahead.HolderOf(ctx.Conn()) == nil || !raw {
		h.mu.Lock()
		h.unheld++
		h.mu.Unlock()
	}
	switch string(ctx.Path()) {
	case "/plain":
		ctx.SetBodyString("plain:" + string(ctx.PostBody()))
	case "/sse":
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			w.WriteString("data: first\n\n")
			w.Flush()
			<-h.gate
			w.WriteString("data: last\n\n")
		})
	case "/block":
		h.entered <- struct{}{}
		<-h.release
		ctx.SetBodyString("late")
	}
}

// notifyClose closes closed when the listener closes (Shutdown's first step).
type notifyClose struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *notifyClose) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// client is a raw HTTP/1.1 connection, so that requests can be pipelined at will.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialHold(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails the test, not the run
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func request(path, body, extra string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func (c *client) send(s string) {
	c.t.Helper()
	if _, err := c.c.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// reply reads one response whole.
func (c *client) reply() *fasthttp.Response {
	c.t.Helper()
	r := new(fasthttp.Response)
	if err := r.Read(c.br); err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	return r
}

// want reads a reply per body, in order, and fails unless each has that body.
func (c *client) want(bodies ...string) {
	c.t.Helper()
	for _, body := range bodies {
		if r := c.reply(); string(r.Body()) != body {
			c.t.Fatalf("reply %q, want %q", r.Body(), body)
		}
	}
}

// plain sends a /plain request with body and waits for its reply, the body echoed:
// a client that sends its next request only once it has the last reply.
func (c *client) plain(body string) {
	c.t.Helper()
	c.send(request("/plain", body, ""))
	c.want("plain:" + body)
}

// readUntil reads lines into seen until done holds of all read so far, failing the
// test, named by what, if the connection ends or errs first.
func (c *client) readUntil(seen *strings.Builder, what string, done func(string) bool) {
	c.t.Helper()
	for !done(seen.String()) {
		line, err := c.br.ReadString('\n')
		if err != nil {
			c.t.Fatalf("%s: %q %v", what, seen.String(), err)
		}
		seen.WriteString(line)
	}
}

func (c *client) wantEOF() {
	c.t.Helper()
	if b, err := c.br.ReadByte(); err != io.EOF {
		c.t.Fatalf("after the last reply: %q %v, want the connection's end", b, err)
	}
}

// TestHoldPlainReplies: a client that sends its next request only once it has the
// reply gets every reply (the held write goes out from the server's next read);
// pipelined requests, in one write or in several, get theirs in order.
func TestHoldPlainReplies(t *testing.T) {
	h := startHoldServer(t)
	c := dialHold(t, h.addr)
	for i := range 50 {
		body := strings.Repeat("b", i*7)
		c.plain(body)
	}
	c.send(request("/plain", "1", "") + request("/plain", "2", "") + request("/plain", "3", ""))
	c.want("plain:1", "plain:2", "plain:3")
	// Separate writes before any reply: the later ones may reach the socket before the
	// read that sends the earlier reply starts.
	for _, b := range []string{"4", "5", "6"} {
		c.send(request("/plain", b, ""))
	}
	c.want("plain:4", "plain:5", "plain:6")
	c.plain("7")
}

// TestHoldPlainRepliesConnectionClose: a request that closes the connection gets its
// reply, then the end.
func TestHoldPlainRepliesConnectionClose(t *testing.T) {
	lastPlain(t, "bye", "Connection: close\r\n", nil)
}

// lastPlain opens a connection that has had one plain reply, sends a last plain
// request with body and the extra header lines, lets end end the client's side (nil:
// nothing), and wants the request's reply and then the connection's end.
func lastPlain(t *testing.T, body, extra string, end func(c *client)) {
	t.Helper()
	h := startHoldServer(t)
	c := dialHold(t, h.addr)
	c.plain("a")
	c.send(request("/plain", body, extra))
	if end != nil {
		end(c)
	}
	c.want("plain:" + body)
	c.wantEOF()
}

// TestHoldPlainRepliesThenStream: an SSE stream after a plain reply on the same
// connection is not held: its first event reaches the client while the stream is open
// (the handler writes the second only once the test has the first).
func TestHoldPlainRepliesThenStream(t *testing.T) {
	h := startHoldServer(t)
	c := dialHold(t, h.addr)
	c.plain("x")
	c.send(request("/sse", "", ""))
	var seen strings.Builder
	c.readUntil(&seen, "stream before its first event", func(s string) bool { return strings.Contains(s, "data: first") })
	close(h.gate)
	c.readUntil(&seen, "stream's end", func(s string) bool { return strings.HasSuffix(s, "\r\n0\r\n\r\n") }) // the chunked end
	if !strings.Contains(seen.String(), "data: last") {
		t.Fatalf("stream %q lacks its last event", seen.String())
	}
	c.plain("after")
}

// TestHoldPlainRepliesShutdown: a reply finished while the server shuts down (held,
// then the connection closed) reaches the client before the connection's end, and an
// idle connection with its reply sent is closed.
func TestHoldPlainRepliesShutdown(t *testing.T) {
	h := startHoldServer(t)
	idle := dialHold(t, h.addr)
	idle.plain("i")
	c := dialHold(t, h.addr)
	c.send(request("/block", "", ""))
	<-h.entered
	done := make(chan error, 1)
	go func() { done <- h.srv.Shutdown() }()
	<-h.lnClosed
	close(h.release)
	r := c.reply()
	if string(r.Body()) != "late" || !r.ConnectionClose() {
		t.Fatalf("reply during shutdown %q (Connection: close %v)", r.Body(), r.ConnectionClose())
	}
	c.wantEOF()
	idle.wantEOF()
	if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestHoldPlainRepliesHalfClose: a client that ends its side right after its request,
// before it has the reply (its end may reach the socket before the read that sends the
// held reply starts, its readiness then unseen), gets the reply and then the
// connection's end within the held wait's bound, not the idle timeout's.
func TestHoldPlainRepliesHalfClose(t *testing.T) {
	lastPlain(t, "last", "", func(c *client) {
		if err := c.c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHoldPlainRepliesSlowPipelined: a reply held for the request pipelined after it
// (connections.pipelined_reply_wait) reaches the client while that request's handler
// still blocks: the wait's bound is the connection's timer, not the handler's return.
// Nothing is timed: the handler waits until the client has the first reply.
func TestHoldPlainRepliesSlowPipelined(t *testing.T) {
	h := startHoldServer(t)
	c := dialHold(t, h.addr)
	c.plain("a")
	c.send(request("/plain", "1", "") + request("/block", "", ""))
	<-h.entered
	c.want("plain:1")
	close(h.release)
	c.want("late")
	c.plain("after")
}
