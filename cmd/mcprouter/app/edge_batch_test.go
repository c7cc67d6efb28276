//go:build unix

package app

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// packetListener hands the server one side of SOCK_SEQPACKET socket pairs (dial), so
// that every write(2) of the router is one packet the client reads on its own: the
// client counts the router's writes exactly, without timing anything.
type packetListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPacketListener() *packetListener {
	return &packetListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

var loopbackAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}

func (l *packetListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *packetListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *packetListener) Addr() net.Addr { return loopbackAddr }

// loopbackConn is a socket pair's server side addressed as a loopback TCP client,
// as fasthttp's per-address count and the router's per-address limits expect.
type loopbackConn struct{ *net.UnixConn }

func (loopbackConn) LocalAddr() net.Addr  { return loopbackAddr }
func (loopbackConn) RemoteAddr() net.Addr { return loopbackAddr }

// dial connects a client: the server side goes to Accept.
func (l *packetListener) dial(t *testing.T) *net.UnixConn {
	t.Helper()
	server, client := testio.PacketPair(t)
	l.conns <- loopbackConn{server}
	client.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails the test, not the run
	return client
}

// packetClient reads the router's replies one write at a time.
type packetClient struct {
	t      *testing.T
	c      *net.UnixConn
	got    bytes.Buffer // read so far, not yet parsed
	writes int          // packets read: the router's writes
}

func (p *packetClient) send(s string) {
	p.t.Helper()
	if _, err := p.c.Write([]byte(s)); err != nil {
		p.t.Fatal(err)
	}
}

// readUntil reads packets until complete holds of what is read and not yet parsed.
func (p *packetClient) readUntil(what string, complete func([]byte) bool) {
	p.t.Helper()
	b := make([]byte, 64<<10)
	for !complete(p.got.Bytes()) {
		n, err := p.c.Read(b)
		if err != nil {
			p.t.Fatalf("%s: after %q: %v", what, p.got.String(), err)
		}
		p.writes++
		p.got.Write(b[:n])
	}
}

// reply reads one reply with a body of Content-Length bytes.
func (p *packetClient) reply(what string) *fasthttp.Response {
	p.t.Helper()
	var r *fasthttp.Response
	p.readUntil(what, func(b []byte) bool {
		r = new(fasthttp.Response)
		br := bufio.NewReader(bytes.NewReader(b))
		if r.Read(br) != nil {
			return false
		}
		p.got.Next(len(b) - br.Buffered())
		return true
	})
	return r
}

// streamHead reads a stream's status line, headers and first chunk.
func (p *packetClient) streamHead(what string) string {
	p.t.Helper()
	var head string
	p.readUntil(what, func(b []byte) bool {
		h, rest, ok := strings.Cut(string(b), "\r\n\r\n")
		if !ok {
			return false
		}
		size, data, ok := strings.Cut(rest, "\r\n")
		n, err := strconv.ParseUint(size, 16, 32)
		if !ok || err != nil || len(data) < int(n)+2 {
			return false
		}
		head = h + "\r\n\r\n" + data[:n]
		p.got.Reset()
		return true
	})
	return head
}

// mcpPost is a 2025-11-25 POST of body to /mcp on session (none: "").
func mcpPost(body, session string) string {
	h := []string{"MCP-Protocol-Version: 2025-11-25"}
	if session != "" {
		h = append(h, "Mcp-Session-Id: "+session)
	}
	return string(post("/mcp", body, h...))
}

// TestPipelinedOpeningWrites: a session opened as mcpload does (initialize, then
// notifications/initialized, a tools/call and the GET stream pipelined in one write)
// through the router gets every answer, in order; the pipelined three leave in one
// write of the router's (the answers wait for one another, and the stream's head
// takes them along), against three with connections.pipelined_reply_wait off. The
// wait is long here (a minute), so that a slow machine cannot cut it short: the
// call's answer comes from a backend.
func TestPipelinedOpeningWrites(t *testing.T) {
	backend := mcpbackendtest.Start(t, backendsrv.Config{Name: "b", Tick: -1})
	for _, tc := range []struct {
		name   string
		wait   time.Duration
		writes int
	}{{"batched", time.Minute, 1}, {"off", -1, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte("listen: 127.0.0.1:0\nbackends:\n  - {name: b, url: " + strconv.Quote(backend.URL()) + "}\n"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Connections.PipelinedReplyWait = tc.wait
			a, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			testwait.Cleanup(t, 20*time.Second, a.Shutdown)
			a.Start(20 * time.Second)
			ln := newPacketListener()
			a.Serve(ln)
			c := &packetClient{t: t, c: ln.dial(t)}

			c.send(mcpPost(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, ""))
			init := c.reply("initialize")
			session := string(init.Header.Peek("Mcp-Session-Id"))
			if init.StatusCode() != 200 || session == "" || !bytes.Contains(init.Body(), []byte(`"id":1`)) {
				t.Fatalf("initialize: %d %q session %q", init.StatusCode(), init.Body(), session)
			}
			before := c.writes
			c.send(mcpPost(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, session) +
				mcpPost(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b__echo","arguments":{"text":"hi"}}}`, session) +
				"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: " + session + "\r\n\r\n")
			if r := c.reply("notifications/initialized"); r.StatusCode() != 202 {
				t.Fatalf("notification: %d %q", r.StatusCode(), r.Body())
			}
			if r := c.reply("tools/call"); r.StatusCode() != 200 || !bytes.Contains(r.Body(), []byte(`"id":2`)) || !bytes.Contains(r.Body(), []byte("hi")) {
				t.Fatalf("tools/call: %d %q", r.StatusCode(), r.Body())
			}
			head := c.streamHead("GET stream")
			if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "text/event-stream") || !strings.Contains(head, "id: ") {
				t.Fatalf("GET stream's head and first event %q", head)
			}
			if got := c.writes - before; got != tc.writes {
				t.Errorf("the pipelined three came in %d writes, want %d", got, tc.writes)
			}
		})
	}
}
