package transport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/internal/testsize"
)

// TestStatelessHeld: a request given back once acknowledged (Exchange.Hold) keeps its
// stream, its screen (what it refuses stays out, the reply is screened) and its end by
// the reply.
func TestStatelessHeld(t *testing.T) {
	h, cl := startStateless(t, -1)
	resp := statelessPost(t, cl, `{"jsonrpc":"2.0","id":"l-1","method":"listen"}`, nil)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("%d %q", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	if ack, err := r.ReadString('}'); err != nil || !strings.Contains(ack, "acknowledged") {
		t.Fatalf("first event: %q %v", ack, err)
	}
	close(h.release)
	rest, err := io.ReadAll(r)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	body := string(rest)
	if !strings.Contains(body, `"n":2`) || !strings.Contains(body, `"id":"l-1","result":{"done":true},"screened":true`) {
		t.Errorf("stream after the hold: %s", body)
	}
	if strings.Contains(body, "secret") {
		t.Errorf("the screen's refusal went out: %s", body)
	}
}

// TestStatelessHeldPostReused: a held stream's post goes back to the pool (holdStream):
// the requests posted while two streams are held, which may be served by their posts,
// are answered, and each stream still delivers its own messages and ends with its own
// reply.
func TestStatelessHeldPostReused(t *testing.T) {
	h, cl := startStateless(t, -1)
	var streams [2]*bufio.Reader
	for i := range streams {
		resp := statelessPost(t, cl, fmt.Sprintf(`{"jsonrpc":"2.0","id":"l-%d","method":"listen"}`, i), nil)
		defer resp.Body.Close()
		streams[i] = bufio.NewReader(resp.Body)
		if ack, err := streams[i].ReadString('}'); err != nil || !strings.Contains(ack, "acknowledged") {
			t.Fatalf("stream %d, first event: %q %v", i, ack, err)
		}
		for j := 0; j < 8; j++ {
			resp := statelessPost(t, cl, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"failed"}`, j), nil)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !strings.Contains(string(got), fmt.Sprintf(`"id":%d,"error"`, j)) {
				t.Fatalf("request %d while %d streams are held: %s %v", j, i+1, got, err)
			}
		}
	}
	close(h.release)
	for i, r := range streams {
		rest, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		body := string(rest)
		if !strings.Contains(body, `"n":2`) || !strings.Contains(body, fmt.Sprintf(`"id":"l-%d","result":{"done":true}`, i)) ||
			strings.Count(body, `"done":true`) != 1 {
			t.Errorf("stream %d after the hold: %s", i, body)
		}
	}
}

// TestStatelessHeldAbandon: what was registered with OnAbandon before Hold still runs
// when the client closes the held stream.
func TestStatelessHeldAbandon(t *testing.T) {
	abandonAfterFirst(t, "listen", "acknowledged")
}

// BenchmarkHeldStream: the transport's heap per acknowledged stateless stream held
// idle, its request kept (keep: the Exchange, its copy of the request and headers)
// against given back (listen: Exchange.Hold). The server is built as the router's edge
// builds it (loopback TCP, hijacked streams kept, reduced memory), so that streams are
// driven without a goroutine each. It reports heap-B/stream, the growth of the live
// heap (after a collection) over heldStreams streams divided by them; client and server
// share the process, so the figure includes the client's side of each connection, the
// same in both. Run with -benchtime=1x.
func BenchmarkHeldStream(b *testing.B) {
	const heldStreams = 5000
	for _, method := range []string{"keep", "listen"} {
		b.Run(method, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.ReportMetric(heldHeapPerStream(b, method, heldStreams), "heap-B/stream")
			}
		})
	}
}

// heldHeapPerStream opens n streams of method on a fresh server, each read up to its
// acknowledgement, and returns the heap in use per stream; it then ends them (the
// handler's reply) and closes their connections.
func heldHeapPerStream(b *testing.B, method string, n int) float64 {
	h := &statelessHandler{abandoned: make(chan string, 4), gate: make(chan struct{}), release: make(chan struct{})}
	cfg := HTTPConfig{Rules: DefaultHTTPRules("127.0.0.1:0", testRevisions, "2025-03-26"),
		StatelessStreamAfter: -1, KeepsHijackedConns: true}
	reg := NewRegistry(RegistryConfig{}, h)
	hs := NewHTTPServer(cfg, reg, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: hs.ServeStreamable, Logger: quietLogger{}, NoDefaultContentType: true,
		ReduceMemoryUsage: true, KeepHijackedConns: true}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	defer func() {
		close(h.gate)
		hs.Shutdown()
		reg.Close()
		srv.Shutdown()
		<-served
	}()

	before := testsize.LiveHeap()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns[i] = c
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"notifications":{"toolsListChanged":true}}}`, i, method)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: stateless-1\r\n"+
			"Mcp-Method: %s\r\nContent-Length: %d\r\n\r\n%s", method, len(body), body)
		if _, err := bufio.NewReader(c).ReadString('}'); err != nil { // the acknowledgement
			b.Fatal(err)
		}
	}
	after := testsize.LiveHeap()
	close(h.release)
	for _, c := range conns {
		c.Close()
	}
	return float64(after-before) / float64(n)
}
