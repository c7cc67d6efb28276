package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// countingListener counts the connections a test server accepted.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// pipeServer starts h on a loopback server that counts its connections.
func pipeServer(t *testing.T, h http.Handler) (*httptest.Server, *countingListener) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	cl := &countingListener{Listener: srv.Listener}
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, cl
}

var idRe = regexp.MustCompile(`"id":(\d+)`)

// requestID returns the numeric id of a JSON-RPC request body, -1 if none.
func requestID(b []byte) int {
	m := idRe.FindSubmatch(b)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// readID reads a request and returns its JSON-RPC id.
func readID(r *http.Request) int {
	b, _ := io.ReadAll(r.Body)
	return requestID(b)
}

// writeEcho answers request id with a JSON reply.
func writeEcho(w http.ResponseWriter, id int) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, echoReply(id))
}

func echoReply(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"r%d"}]}}`, id, id)
}

// sendAll sends tools/call with ids from..from+n-1 concurrently and returns the errors.
func sendAll(t *testing.T, c Conn, from, n int) []error {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := from + i
			errs[i] = c.Send(testCtx(t), []byte(msgCall(id, "echo", strconv.Itoa(id))))
		}()
	}
	wg.Wait()
	return errs
}

// sendAllOK is sendAll for calls that must all succeed.
func sendAllOK(t *testing.T, c Conn, from, n int) {
	t.Helper()
	for i, err := range sendAll(t, c, from, n) {
		if err != nil {
			t.Fatalf("call %d: %v", from+i, err)
		}
	}
}

// pipeConns returns the pipelined connections c holds now.
func pipeConns(c *HTTPConn) []*pipeConn {
	c.pipe.mu.Lock()
	defer c.pipe.mu.Unlock()
	return slices.Clone(c.pipe.conns)
}

// outstanding counts the requests queued or written on c's pipelined connections and
// not yet answered: the calls waiting on the pipeline.
func outstanding(c *HTTPConn) int {
	n := 0
	for _, pc := range pipeConns(c) {
		pc.mu.Lock()
		n += pc.outstanding
		pc.mu.Unlock()
	}
	return n
}

// The official Go SDK server behind a pipelined client: lifecycle, concurrent calls
// with SSE and JSON replies, Close without leaks.
func TestPipelineGoSDK(t *testing.T) {
	for _, tc := range []struct {
		name  string
		json  bool
		conns int
	}{{"sse-replies", false, 1}, {"json-replies", true, 1}, {"json-replies-2conns", true, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := pipeServer(t, sdkHandler("g1", tc.json))
			c, s := dialHTTP(t, srv.URL, HTTPOptions{Name: "sdk", Pipeline: tc.conns})
			doHandshake(t, c, s)
			for i, err := range sendAll(t, c, 100, 40) {
				if err != nil {
					t.Fatalf("call %d: %v", 100+i, err)
				}
			}
			for id := 100; id < 140; id++ {
				if got := resultText(t, s.response(strconv.Itoa(id))); got != fmt.Sprintf("g1:%d", id) {
					t.Fatalf("id %d: result %q", id, got)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			noLeaks(t)
		})
	}
}

// Concurrent calls share one connection: the first is held by the server while the
// others are written behind it, and every one is answered, in order, once.
func TestPipelineSharesConnection(t *testing.T) {
	const n = 16
	var seen sync.Map
	var dup atomic.Int32
	first := make(chan struct{}, 1)
	first <- struct{}{}
	release := make(chan struct{})
	srv, cl := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := readID(r)
		if _, loaded := seen.LoadOrStore(id, true); loaded {
			dup.Add(1)
		}
		select {
		case <-first: // hold the first request until the others are queued behind it
			<-release
		default:
		}
		writeEcho(w, id)
	}))
	s := newRecSink()
	// A window longer than the test lets every call queue behind the held one.
	c, err := DialHTTP(testCtx(t), srv.URL, HTTPOptions{Pipeline: 1, PipelineWindow: time.Hour}, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan []error)
	go func() { done <- sendAll(t, c, 1, n) }()
	s.waitFor(t, "every call to wait on the pipelined connection", func() bool { return outstanding(c) == n })
	close(release)
	for i, err := range <-done {
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	for id := 1; id <= n; id++ {
		if got := resultText(t, s.response(strconv.Itoa(id))); got != fmt.Sprintf("r%d", id) {
			t.Fatalf("id %d: result %q", id, got)
		}
	}
	if got := cl.n.Load(); got != 1 {
		t.Fatalf("%d connections for %d concurrent calls, want 1 (pipelined)", got, n)
	}
	if dup.Load() != 0 {
		t.Fatalf("%d requests processed twice", dup.Load())
	}
}

// An SSE reply (progress, then the response) is read by its caller from the pipelined
// connection; calls after it still work.
func TestPipelineSSEReply(t *testing.T) {
	srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := readID(r)
		if id%2 == 0 {
			writeEcho(w, id)
			return
		}
		sseHeaders(w)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%d,\"progress\":1}}\n\n", id)
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: %s\n\n", echoReply(id))
	}))
	c, s := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1})
	defer c.Close()
	for round := range 3 {
		from := 10 + round*20
		sendAllOK(t, c, from, 12)
		for id := from; id < from+12; id++ {
			if got := resultText(t, s.response(strconv.Itoa(id))); got != fmt.Sprintf("r%d", id) {
				t.Fatalf("id %d: result %q", id, got)
			}
		}
	}
	progress := s.count(func(m *codec.Message) bool {
		return m.Kind == codec.KindNotification && isMethod(m, "notifications/progress")
	})
	if progress != 18 {
		t.Fatalf("%d progress notifications delivered, want 18", progress)
	}
}

// A caller that gives up returns at once; the connection stops taking requests behind
// the abandoned one, later calls go elsewhere and succeed.
func TestPipelineAbandonedCall(t *testing.T) {
	forPipelineModes(t, func(t *testing.T, mode func(HTTPOptions) HTTPOptions) {
		release := make(chan struct{})
		srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := readID(r)
			if id == 1 {
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
			writeEcho(w, id)
		}))
		c, s := dialHTTP(t, srv.URL, mode(HTTPOptions{Pipeline: 1}))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := c.Send(ctx, []byte(msgCall(1, "echo", "slow"))); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("abandoned call: %v, want DeadlineExceeded", err)
		}
		sendAllOK(t, c, 2, 8) // after an abandoned call
		for id := 2; id < 10; id++ {
			if s.response(strconv.Itoa(id)) == nil {
				t.Fatalf("id %d not answered", id)
			}
		}
		close(release)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if s.response("1") != nil {
			t.Fatal("the abandoned call's late response was delivered")
		}
		noLeaks(t)
	})
}

// A pipelined call forwarded under a Deadline (waited for with the call's own timer,
// not the Deadline's Done) ends at the deadline, or when the Deadline's parent ends.
func TestPipelineDeadlineWait(t *testing.T) {
	for _, parentEnds := range []bool{false, true} {
		t.Run(fmt.Sprint("parent ends ", parentEnds), func(t *testing.T) {
			release, held := make(chan struct{}), make(chan struct{}, 1)
			srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := readID(r)
				if id == 1 {
					held <- struct{}{}
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}
				writeEcho(w, id)
			}))
			defer close(release)
			c, _ := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1})
			defer c.Close()
			parent, cancel := context.WithCancel(context.Background())
			defer cancel()
			want, d := context.DeadlineExceeded, 100*time.Millisecond
			if parentEnds {
				want, d = context.Canceled, time.Hour
				go func() {
					<-held
					cancel()
				}()
			}
			dl := NewDeadline(parent, time.Now().Add(d))
			defer dl.Release()
			if err := c.Send(dl, []byte(msgCall(1, "echo", "slow"))); !errors.Is(err, want) {
				t.Fatalf("Send: %v, want %v", err, want)
			}
			if dl.started.Load() {
				t.Fatal("the wait armed the Deadline's timer")
			}
			sendAllOK(t, c, 2, 4)
		})
	}
}

// Connection: close on a response ends the connection; the requests written behind it
// were not processed by the server, so they are sent again, and each is processed once.
func TestPipelineConnectionClose(t *testing.T) {
	forPipelineModes(t, func(t *testing.T, mode func(HTTPOptions) HTTPOptions) {
		var count sync.Map
		var closes atomic.Int32
		srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := readID(r)
			v, _ := count.LoadOrStore(id, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			if id%5 == 0 && closes.Add(1) <= 3 {
				w.Header().Set("Connection", "close")
			}
			time.Sleep(time.Millisecond)
			writeEcho(w, id)
		}))
		c, s := dialHTTP(t, srv.URL, mode(HTTPOptions{Pipeline: 1}))
		defer c.Close()
		sendAllOK(t, c, 1, 30)
		for id := 1; id <= 30; id++ {
			if s.response(strconv.Itoa(id)) == nil {
				t.Fatalf("id %d not answered", id)
			}
			v, _ := count.Load(id)
			if n := v.(*atomic.Int32).Load(); n != 1 {
				t.Fatalf("id %d processed %d times", id, n)
			}
		}
	})
}

// A backend that drops the connection with requests outstanding fails them (they may
// have run, so calls are not retried) without hanging, and leaves no goroutine behind.
func TestPipelineBackendDrops(t *testing.T) {
	forPipelineModes(t, func(t *testing.T, mode func(HTTPOptions) HTTPOptions) {
		addr := rawBackend(t, func(conn net.Conn) {
			buf := make([]byte, 64<<10)
			_, _ = conn.Read(buf) // take some requests, answer none
			time.Sleep(20 * time.Millisecond)
			_ = conn.Close()
		})
		c, _ := dialHTTP(t, "http://"+addr+"/mcp", mode(HTTPOptions{Pipeline: 1}))
		for i, err := range sendAll(t, c, 1, 8) {
			if err == nil {
				t.Fatalf("call %d succeeded against a backend that answers nothing", i+1)
			}
		}
		if err := c.Close(); err != nil {
			t.Log(err)
		}
		noLeaks(t)
	})
}

// Past the depth of every pipelined connection, requests use the ordinary pool.
func TestPipelineFullUsesPool(t *testing.T) {
	hold := make(chan struct{})
	var held atomic.Int32
	srv, cl := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := readID(r)
		if held.Add(1) == 1 {
			<-hold
		}
		writeEcho(w, id)
	}))
	c, s := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1, PipelineDepth: 2})
	defer c.Close()
	done := make(chan []error)
	go func() { done <- sendAll(t, c, 1, 6) }()
	s.waitFor(t, "calls answered by the pool while the pipeline is held", func() bool {
		return s.count(func(*codec.Message) bool { return true }) >= 3
	})
	close(hold)
	for i, err := range <-done {
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if cl.n.Load() < 2 {
		t.Fatalf("%d connections: the calls past the depth did not use the pool", cl.n.Load())
	}
}

// Close interrupts calls waiting on a pipelined connection.
func TestPipelineCloseInterrupts(t *testing.T) {
	forPipelineModes(t, func(t *testing.T, mode func(HTTPOptions) HTTPOptions) {
		release := make(chan struct{})
		defer close(release)
		srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		s := newRecSink()
		// The window keeps every call on the pipelined connection, whatever the delays.
		c, err := DialHTTP(testCtx(t), srv.URL, mode(HTTPOptions{Pipeline: 1, PipelineWindow: time.Hour}), s)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan []error)
		go func() { errs <- sendAll(t, c, 1, 4) }()
		// Close only once all four calls are waiting on the connection.
		s.waitFor(t, "the calls to wait on the pipelined connection", func() bool { return outstanding(c) == 4 })
		_ = c.Close()
		select {
		case got := <-errs:
			for i, err := range got {
				if !errors.Is(err, ErrClosed) {
					t.Fatalf("call %d after Close: %v, want ErrClosed", i+1, err)
				}
			}
		case <-time.After(waitLimit):
			t.Fatal("calls still blocked after Close")
		}
		noLeaks(t)
	})
}

// An SSE reply that streams for longer than IdleTimeout is not cut as idle while other
// calls pick connections.
func TestPipelineLongSSEReply(t *testing.T) {
	finish := make(chan struct{})
	srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := readID(r)
		if id != 1 {
			writeEcho(w, id)
			return
		}
		sseHeaders(w)
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		<-finish
		fmt.Fprintf(w, "data: %s\n\n", echoReply(id))
	}))
	const idle = 30 * time.Millisecond
	c, s := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1, IdleTimeout: idle})
	defer c.Close()
	long := make(chan error, 1)
	go func() { long <- c.Send(testCtx(t), []byte(msgCall(1, "echo", "long"))) }()
	s.waitFor(t, "the long call's progress", func() bool {
		return s.count(func(m *codec.Message) bool { return isMethod(m, "notifications/progress") }) == 1
	})
	// The stream has now been silent for longer than IdleTimeout: an idle connection
	// would be closed by the next pick.
	conns := pipeConns(c)
	if len(conns) != 1 {
		t.Fatalf("%d pipelined connections, want the streaming one", len(conns))
	}
	streaming := conns[0]
	s.waitFor(t, "the stream to be quiet for longer than IdleTimeout", func() bool {
		streaming.mu.Lock()
		defer streaming.mu.Unlock()
		return streaming.streaming && time.Since(streaming.lastUsed) > idle
	})
	for i := range 10 {
		if err := c.Send(testCtx(t), []byte(msgCall(100+i, "echo", "short"))); err != nil {
			t.Fatalf("short call %d: %v", i, err)
		}
	}
	streaming.mu.Lock()
	dead := streaming.dead
	streaming.mu.Unlock()
	if dead != nil {
		t.Fatalf("the streaming connection was closed: %v", dead)
	}
	close(finish)
	if err := <-long; err != nil {
		t.Fatalf("long SSE call: %v", err)
	}
	if s.response("1") == nil {
		t.Fatal("the long call's response was not delivered")
	}
}

// A call that stays unanswered past PipelineWindow stops collecting requests behind it:
// later calls do not wait for it.
func TestPipelineWindow(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{})
	srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := readID(r)
		if id == 1 {
			close(held)
			<-release
		}
		writeEcho(w, id)
	}))
	const window = 5 * time.Millisecond
	c, s := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1, PipelineWindow: window})
	defer c.Close()
	slow := make(chan error, 1)
	go func() { slow <- c.Send(testCtx(t), []byte(msgCall(1, "echo", "slow"))) }()
	// The slow call is on the connection and the server holds it...
	testwait.Recv(t, "the slow call at the server", waitLimit, held)
	// ...and it is older than the window: the connection takes nothing behind it.
	pc := pipeConns(c)[0]
	s.waitFor(t, "the slow call to be older than the window", func() bool {
		n, young := pc.load(time.Now(), 0)
		return n == 1 && !young
	})
	for id := 2; id <= 6; id++ {
		if err := c.Send(testCtx(t), []byte(msgCall(id, "echo", "later"))); err != nil {
			t.Fatalf("call %d: %v", id, err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("the held call ended early: %v", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("held call: %v", err)
	}
}

// Pipelining over TLS (an https backend URL).
func TestPipelineTLS(t *testing.T) {
	echoOverTLS(t, HTTPOptions{Pipeline: 1})
}

// echoOverTLS sends 12 echo calls to an https backend through a connection dialed with
// opts (its TLSConfig trusting the backend's certificate) and checks every answer.
func echoOverTLS(t *testing.T, opts HTTPOptions) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeEcho(w, readID(r))
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	opts.TLSConfig = &tls.Config{RootCAs: roots}
	c, s := dialHTTP(t, srv.URL, opts)
	defer c.Close()
	sendAllOK(t, c, 1, 12)
	for id := 1; id <= 12; id++ {
		if got := resultText(t, s.response(strconv.Itoa(id))); got != fmt.Sprintf("r%d", id) {
			t.Fatalf("id %d: result %q", id, got)
		}
	}
}

// A backend that closes every connection after one response (no keep-alive) turns
// pipelining off: the calls all succeed, each processed once.
func TestPipelineNoKeepAlive(t *testing.T) {
	var count sync.Map
	srv, _ := pipeServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := readID(r)
		v, _ := count.LoadOrStore(id, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		w.Header().Set("Connection", "close")
		writeEcho(w, id)
	}))
	c, _ := dialHTTP(t, srv.URL, HTTPOptions{Pipeline: 1})
	defer c.Close()
	for round := range 3 {
		sendAllOK(t, c, 1+round*10, 10)
	}
	for id := 1; id <= 30; id++ {
		v, _ := count.Load(id)
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Fatalf("id %d processed %d times", id, n)
		}
	}
	if !c.pipe.off.Load() {
		t.Fatal("pipelining still on for a backend without keep-alive")
	}
}
