package app

// The whole HTTP side of a router (fasthttp server with the configured limits, the
// transports, the router) on an in-memory listener: limits and their messages, and a
// fuzz target that throws random requests at it.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// waitLimit bounds every wait of these tests.
const waitLimit = 20 * time.Second

// testConfig is a small router: no JetStream, no admin listener, no persistence.
func testConfig() Config {
	var c Config
	c.Listen = "127.0.0.1:0"
	c.Admin.Listen = "off"
	c.NATS.NoJetStream = true
	c.Sessions.NoPersist = true
	c.ShutdownGrace = 5 * time.Second
	return c
}

type memApp struct {
	*App
	ln *fasthttputil.InmemoryListener
}

func startMemApp(t testing.TB, cfg Config) *memApp {
	t.Helper()
	return startMemAppLog(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// startMemAppLog is startMemApp logging to log. The app serves with its own Serve (the
// production server, its limits and its answers to refused requests, which these tests
// are about) rather than memhttp's bare fasthttp.Server; the app is shut down when the
// test ends.
func startMemAppLog(t testing.TB, cfg Config, log *slog.Logger) *memApp {
	t.Helper()
	a, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	a.Serve(ln)
	testwait.Cleanup(t, waitLimit, a.Shutdown)
	return &memApp{App: a, ln: ln}
}

// roundTrip writes raw HTTP/1.1 bytes on a fresh connection and reads the response
// head and, unless it is an event stream, the body.
func (m *memApp) roundTrip(t testing.TB, raw []byte) (*fasthttp.Response, error) {
	c, err := m.ln.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(waitLimit))
	go func() { c.Write(raw) }() // the server may answer before reading it all
	resp := new(fasthttp.Response)
	br := bufio.NewReader(c)
	if err := resp.Header.Read(br); err != nil {
		return nil, err
	}
	if bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) {
		return resp, nil
	}
	resp.SkipBody = false
	if n := resp.Header.ContentLength(); n > 0 {
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return nil, err
		}
		resp.SetBody(body)
	}
	return resp, nil
}

func post(path, body string, headers ...string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", path, len(body))
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return []byte(b.String())
}

// TestLimits: each limit answers with its status and a JSON-RPC error naming it.
func TestLimits(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.MaxBodyBytes = 1 << 10
	cfg.Limits.MaxHeaderBytes = 2 << 10
	cfg.Limits.MaxBatch = 2
	m := startMemApp(t, cfg)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	resp, err := m.roundTrip(t, post("/mcp", init))
	if err != nil || resp.StatusCode() != 200 {
		t.Fatalf("initialize: %v %v", err, resp)
	}
	sid := "Mcp-Session-Id: " + string(resp.Header.Peek("Mcp-Session-Id"))
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, c := range []struct {
		name   string
		raw    []byte
		status int
		body   string
	}{
		{"body at the limit", post("/mcp", ping+strings.Repeat(" ", 1<<10-len(ping)), sid), 200, `"result":{}`},
		{"body past the limit", post("/mcp", ping+strings.Repeat(" ", 1<<10), sid), 413, "limits.max_body_bytes"},
		{"headers past the limit", post("/mcp", ping, sid, "X-Big: "+strings.Repeat("a", 4<<10)), 431, "limits.max_header_bytes"},
		{"batch at the limit", post("/mcp", "["+ping+","+ping+"]", sid), 200, `[{"jsonrpc"`},
		{"batch past the limit", post("/mcp", "["+ping+","+ping+","+ping+"]", sid), 400, "at most 2"},
		{"broken HTTP", []byte("POST /mcp HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400, "-32600"},
		{"unknown path", post("/nope", ping), 404, "/mcp"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := m.roundTrip(t, c.raw)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode() != c.status || !strings.Contains(string(resp.Body()), c.body) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode(), resp.Body(), c.status, c.body)
			}
		})
	}
}

// FuzzHTTPHandler throws random methods, paths, headers and bodies at the whole HTTP
// side: the answer is never a 5xx and nothing panics (a panic would kill the test
// binary). Sessions are opened by the seeds so that session ids are in play.
func FuzzHTTPHandler(f *testing.F) {
	seeds := []struct {
		method, path, headers, body string
	}{
		{"POST", "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`},
		{"POST", "/mcp", "MCP-Protocol-Version: 2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"POST", "/mcp", "", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}},{"jsonrpc":"2.0","method":"n"}]`},
		{"POST", "/mcp", "", `[]`},
		{"POST", "/mcp", "", `[1,{"a":`},
		{"POST", "/mcp", "Origin: http://evil.example", `{}`},
		{"POST", "/mcp", "MCP-Protocol-Version: 2026-07-28", `{"jsonrpc":"2.0","id":"d","method":"server/discover"}`},
		{"GET", "/mcp", "Last-Event-ID: 0-0", ``},
		{"GET", "/mcp", "Accept: text/event-stream\nMcp-Session-Id: 00", ``},
		{"GET", "/mcp", "Accept: text/event-stream\nMcp-Session-Id: $SID\nLast-Event-ID: 0-1", ``},
		{"POST", "/mcp", "Mcp-Session-Id: $SID", `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`},
		{"POST", "/mcp", "Mcp-Session-Id: $SID\nMCP-Protocol-Version: 2025-11-25", `[{"jsonrpc":"2.0","id":2,"method":"ping"}]`},
		{"POST", "/mcp", "Mcp-Session-Id: $SID", `{"jsonrpc":"2.0","id":"x","result":{}}`},
		{"DELETE", "/mcp", "Mcp-Session-Id: abc", ``},
		{"GET", "/sse", "Accept: text/event-stream", ``},
		{"POST", "/message?sessionId=x", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{"OPTIONS", "/mcp", "", ``},
		{"POST", "/mcp", "Content-Type: text/plain", `x`},
		{"POST", "/mcp", "Accept: text/html", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.headers, []byte(s.body))
	}
	cfg := testConfig()
	cfg.Limits.MaxBodyBytes = 64 << 10
	cfg.Streams.KeepAlive = 10 * time.Millisecond // streams opened by the fuzzer notice their client left
	cfg.Sessions.Max = 1 << 20
	m := startMemApp(f, cfg)
	// A live session whose id the fuzzer can hit.
	resp, err := m.roundTrip(f, post("/mcp", seeds[0].body))
	if err != nil {
		f.Fatal(err)
	}
	sid := string(resp.Header.Peek("Mcp-Session-Id"))

	f.Fuzz(func(t *testing.T, method, path, headers string, body []byte) {
		if !validToken(method) || !validPath(path) {
			return // not an HTTP request line fasthttp would parse as one; covered by "broken HTTP"
		}
		headers = strings.ReplaceAll(headers, "$SID", sid)
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, path)
		if !strings.Contains(strings.ToLower(headers), "content-type") {
			b.WriteString("Content-Type: application/json\r\n")
		}
		for _, h := range strings.Split(headers, "\n") {
			if h = strings.TrimRight(h, "\r"); h != "" {
				b.WriteString(h + "\r\n")
			}
		}
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body)
		resp, err := m.roundTrip(t, b.Bytes())
		if err != nil {
			return // the server may close a connection it cannot parse
		}
		if resp.StatusCode() >= 500 {
			t.Fatalf("status %d for %q: %s", resp.StatusCode(), b.Bytes(), resp.Body())
		}
	})
}

func validToken(s string) bool { return s != "" && len(s) <= 16 && printable(s) }

func validPath(s string) bool { return strings.HasPrefix(s, "/") && len(s) <= 64 && printable(s) }

// printable reports whether s is visible ASCII only: no space, control or non-ASCII
// byte.
func printable(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// TestShutdownRightAfterServe: a shutdown that comes before Serve's goroutine has
// started serving (a SIGTERM right after "mcprouter listening") still ends it; the
// server's own shutdown closes only the listeners it has seen.
func TestShutdownRightAfterServe(t *testing.T) {
	for i := range 20 {
		a, err := New(testConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		a.Serve(fasthttputil.NewInmemoryListener())
		done := make(chan error, 1)
		go func() { done <- a.Shutdown(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Shutdown: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Shutdown right after Serve did not return in 5 s", i)
		}
	}
}
