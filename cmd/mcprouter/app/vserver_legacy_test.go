package app_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// legacyClient speaks legacy HTTP+SSE (2024-11-05) by hand: its stream, and the POST
// endpoint the stream announced.
type legacyClient struct {
	t        *testing.T
	base     string // scheme and host
	endpoint string // path and query of the POST endpoint
	stream   *sse.Reader
	body     io.Closer
}

// openLegacy opens the stream at base+path and reads its endpoint event.
func openLegacy(t *testing.T, ctx context.Context, base, path string) *legacyClient {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", path, err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	c := &legacyClient{t: t, base: base, stream: sse.NewReader(resp.Body, 1<<20), body: resp.Body}
	ev, err := c.stream.Next()
	if err != nil || string(ev.Event) != "endpoint" {
		t.Fatalf("%s: first event %q %q: %v, want endpoint", path, ev.Event, ev.Data, err)
	}
	c.endpoint = string(ev.Data)
	return c
}

// post sends body with extra header pairs; it must be accepted (202).
func (c *legacyClient) post(body string, headers ...string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+c.endpoint, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("POST %s: %d, want 202", c.endpoint, resp.StatusCode)
	}
}

// call posts a request and returns its answer from the stream (messages before it,
// notifications, are skipped).
func (c *legacyClient) call(id int, body string, headers ...string) string {
	c.t.Helper()
	c.post(body, headers...)
	want := fmt.Sprintf(`"id":%d,`, id)
	for range 100 {
		ev, err := c.stream.Next()
		if err != nil {
			c.t.Fatalf("waiting for the answer to %d: %v", id, err)
		}
		if bytes.Contains(ev.Data, []byte(want)) {
			return string(ev.Data)
		}
	}
	c.t.Fatalf("no answer to %d in 100 events", id)
	return ""
}

// TestLegacyTraceHeaders: a legacy HTTP+SSE POST's traceparent header is continued as a
// Streamable HTTP POST's is, on the main endpoint's /message and on a virtual server's
// own message endpoint: the server span is the client span's child, and the backend
// sees the call span's context.
func TestLegacyTraceHeaders(t *testing.T) {
	clearOTelEnv(t)
	recv := startReceiver(t)
	backendURL, saw := startSeenBackend(t)
	cfg, err := app.ParseConfig([]byte(fmt.Sprintf(`listen: 127.0.0.1:0
tracing: {enabled: true, endpoint: %q, sample_ratio: 1}
backends:
  - {name: b, prefix: "", url: %q}
virtual_servers:
  - {name: v, auth: {mode: off}}
`, recv.url, backendURL)))
	if err != nil {
		t.Fatal(err)
	}
	a := startRouter(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "http://" + a.Addr()

	const parent = "00f067aa0ba902b7"
	traces := map[string]string{"/sse": "4bf92f3577b34da6a3ce929d0e0e4736", "/mcp/v/sse": "0af7651916cd43dd8448eb211c80319c"}
	for _, path := range []string{"/sse", "/mcp/v/sse"} {
		c := openLegacy(t, ctx, base, path)
		if want := strings.TrimSuffix(path, "/sse") + "/message?sessionId="; !strings.HasPrefix(c.endpoint, want) {
			t.Fatalf("%s announced %q, want %s...", path, c.endpoint, want)
		}
		c.call(1, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if r := c.call(2, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
			"traceparent", "00-"+traces[path]+"-"+parent+"-01", "tracestate", "congo=t61rcWkgMzE"); !strings.Contains(r, `"result"`) {
			t.Fatalf("%s: tools/call: %s", path, r)
		}
	}
	if err := a.Tracer.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	seen := saw.all()
	if len(seen) != 2 {
		t.Fatalf("the backend saw %d tools/call, want 2", len(seen))
	}
	for i, path := range []string{"/sse", "/mcp/v/sse"} {
		trace := traces[path]
		srv, call := serverAndCall(recv.trace(trace))
		if srv == nil || call == nil {
			t.Fatalf("%s: no server span and backend call in trace %s: the header was not continued", path, trace)
		}
		if hex.EncodeToString(srv.ParentSpanId) != parent || !bytes.Equal(call.ParentSpanId, srv.SpanId) {
			t.Errorf("%s: server span's parent %x, call's parent %x: want the client's %s, then the server span", path, srv.ParentSpanId, call.ParentSpanId, parent)
		}
		if want := "00-" + trace + "-" + hex.EncodeToString(call.SpanId) + "-01"; seen[i].header != want {
			t.Errorf("%s: the backend saw traceparent %q, want %q", path, seen[i].header, want)
		}
	}
}
