package transport

import (
	"bufio"
	"fmt"
	"net"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport/sse"
)

// serveLoopback serves ts's routes on a loopback TCP listener too and returns its
// address: hijacked connections there are real sockets, recycled by fasthttp once their
// handler returns.
func (ts *testServer) serveLoopback() string {
	ts.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ts.t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: ts.route, NoDefaultContentType: true, Logger: quietLogger{}}
	done := make(chan struct{})
	go func() {
		srv.Serve(ln)
		close(done)
	}()
	ts.t.Cleanup(func() {
		srv.Shutdown()
		ln.Close()
		select {
		case <-done:
		case <-time.After(waitLimit):
			ts.t.Error("loopback server did not stop")
		}
	})
	return ln.Addr().String()
}

// openGET opens the GET stream of session sid on addr with a raw connection and
// returns once the response head is read (the stream is attached by then).
func openGET(addr, sid string) (net.Conn, *bufio.Reader, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(waitLimit))
	raw := "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n" + HeaderSessionID + ": " + sid + "\r\n\r\n"
	if _, err := c.Write([]byte(raw)); err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReader(c)
	var h fasthttp.ResponseHeader
	if err := h.Read(br); err != nil {
		c.Close()
		return nil, nil, err
	}
	if h.StatusCode() != fasthttp.StatusOK {
		c.Close()
		return nil, nil, fmt.Errorf("GET: status %d", h.StatusCode())
	}
	return c, br, nil
}

// TestGETTakeoverStorm: concurrent clients take the same session's GET stream over
// and over (each GET interrupts the pump of the one before, whose hijacked connection
// fasthttp recycles as soon as that pump returns). Nothing may crash or race, and the
// last GET gets the session's events.
func TestGETTakeoverStorm(t *testing.T) {
	const clients, rounds = 10, 20 // 200 takeovers
	ts := newTestServer(t, serverOpts{})
	addr := ts.serveLoopback()
	sid := ts.initialize("2025-03-26")

	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev net.Conn
			for r := 0; r < rounds; r++ {
				c, _, err := openGET(addr, sid)
				if prev != nil {
					prev.Close()
				}
				if err != nil {
					errs <- err
					return
				}
				prev = c
			}
			prev.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	c, br, err := openGET(addr, sid)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"broadcast","params":{"count":2}}`, headers: sessionHeaders(sid, "")}); resp.StatusCode != 200 {
		t.Fatalf("broadcast: %d %s", resp.StatusCode, bodyOf(resp))
	}
	rd := sse.NewReader(httputil.NewChunkedReader(br), 0)
	got := 0
	for got < 2 {
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("last GET after %d events: %v", got, err)
		}
		if strings.Contains(string(ev.Data), "notifications/progress") {
			got++
		}
	}
}
