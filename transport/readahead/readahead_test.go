package readahead

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// pair returns a wrapped server side and the client side of a loopback TCP connection.
func pair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	wl := Listen(ln)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := wl.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestSmallReadReadsAhead(t *testing.T) {
	server, client := pair(t)
	c, ok := server.(*conn)
	if !ok {
		t.Skipf("connection not wrapped on this platform (%T)", server)
	}
	const msg = "POST /mcp HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := client.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	var one [1]byte
	if n, err := c.Read(one[:]); n != 1 || err != nil || one[0] != 'P' {
		t.Fatalf("first byte: %d %v %q", n, err, one[:n])
	}
	// The rest was read with it (a loopback write of this size arrives whole).
	if c.buf == nil || int(c.w-c.r) != len(msg)-1 {
		t.Fatalf("read ahead: buf %v, %d bytes; want %d", c.buf != nil, c.w-c.r, len(msg)-1)
	}
	rest := make([]byte, 10)
	var got strings.Builder
	got.WriteByte(one[0])
	for got.Len() < len(msg) {
		n, err := c.Read(rest)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(rest[:n])
	}
	if got.String() != msg || c.buf != nil {
		t.Errorf("got %q (buffer kept: %v), want %q", got.String(), c.buf != nil, msg)
	}
}

func TestIdleConnectionHoldsNoBuffer(t *testing.T) {
	server, client := pair(t)
	c, ok := server.(*conn)
	if !ok {
		t.Skipf("connection not wrapped on this platform (%T)", server)
	}
	done := make(chan error, 1)
	go func() {
		var one [1]byte
		_, err := c.Read(one[:])
		done <- err
	}()
	// The reader is parked on an empty socket: its buffer went back to the pool. It can
	// only be observed once the read returns, so the read is ended by a deadline.
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a deadline error", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%v is not a net.Error timeout", err)
	}
	if c.buf != nil {
		t.Error("an idle read kept a buffer")
	}
	_ = client
}

func TestEOFAndLargeReads(t *testing.T) {
	server, client := pair(t)
	big := strings.Repeat("x", 3*bufSize)
	go func() {
		_, _ = client.Write([]byte(big))
		client.Close()
	}()
	// A large buffer reads straight from the socket; the whole stream arrives, then EOF.
	b, err := io.ReadAll(bufio.NewReaderSize(server, 2*bufSize))
	if err != nil || string(b) != big {
		t.Fatalf("read %d bytes, %v; want %d", len(b), err, len(big))
	}
	var one [1]byte
	if n, err := server.Read(one[:]); n != 0 || err != io.EOF {
		t.Errorf("after the end: %d %v, want io.EOF", n, err)
	}
}

func TestReadAfterClose(t *testing.T) {
	server, _ := pair(t)
	server.Close()
	var one [1]byte
	_, err := server.Read(one[:])
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("read on a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestFasthttpKeepAlive serves keep-alive requests with fasthttp's low-memory mode (one
// byte read first, the path this package shortens) through the wrapped listener.
func TestFasthttpKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{
		ReduceMemoryUsage: true,
		ReadTimeout:       5 * time.Second,
		IdleTimeout:       5 * time.Second,
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetBody(append([]byte("echo:"), ctx.PostBody()...))
		},
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(Listen(ln)) }()
	defer func() {
		_ = srv.Shutdown()
		<-served
	}()
	c := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 1}
	for i := range 200 {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		req.SetRequestURI("http://" + ln.Addr().String() + "/mcp")
		req.Header.SetMethod("POST")
		body := strings.Repeat("b", i*37) // up to past one buffer
		req.SetBodyString(body)
		if err := c.DoTimeout(req, resp, 5*time.Second); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := string(resp.Body()); got != "echo:"+body {
			t.Fatalf("request %d: %d bytes back, want %d", i, len(got), len(body)+5)
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
	}
	if n := c.ConnsCount(); n != 1 {
		t.Errorf("%d connections, want the one kept alive", n)
	}
}

// TestSmallReadAllocates nothing: a request read ahead into a pooled buffer costs no
// allocation (the read attempt is bound once per connection, not a closure per read).
func TestSmallReadAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	server, client := pair(t)
	if _, ok := server.(*conn); !ok {
		t.Skipf("connection not wrapped on this platform (%T)", server)
	}
	msg := []byte("POST /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
	p := make([]byte, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(msg); {
			n, err := server.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request read, want 0", allocs)
	}
}
