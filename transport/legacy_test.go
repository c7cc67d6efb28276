package transport

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLegacySSE: GET /sse announces the POST endpoint carrying the session; POSTs get
// 202 and their replies, progress included, travel on the stream as "message" events.
func TestLegacySSE(t *testing.T) {
	// Short keep-alives: a server notices a client gone only when a write fails.
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{KeepAlive: 5 * time.Millisecond}})
	stream, rd, endpoint := ts.openLegacy()
	defer stream.Body.Close()
	if got := stream.Header.Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering = %q", got)
	}
	post := func(body string) *http.Response { return ts.do(req{path: endpoint, body: body}) }

	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"progress","params":{"count":2}}`,
	} {
		if resp := post(body); resp.StatusCode != http.StatusAccepted || bodyOf(resp) != "" {
			t.Fatalf("POST %s: %d %q, want 202 and no body", body, resp.StatusCode, bodyOf(resp))
		}
	}
	evs := readEvents(t, rd, 5)
	want := []string{`"id":1,"result":{"protocolVersion":"2024-11-05"`, `"id":2,"result":{}`, `"progress":0`, `"progress":1`, `"id":3,"result":{"sent":2}`}
	for i, e := range evs {
		if e.Event != "message" {
			t.Errorf("event %d type %q, want message", i, e.Event)
		}
		if !strings.Contains(e.Data, want[i]) {
			t.Errorf("event %d data %q, want %q", i, e.Data, want[i])
		}
	}

	// Errors of the endpoint itself are answered on the POST.
	for _, c := range []struct {
		r      req
		status int
	}{
		{req{path: endpoint, body: `{"jsonrpc":`}, 400},
		{req{path: "/message", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, 400},
		{req{path: "/message?sessionId=nope", body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`}, 404},
		{req{path: endpoint, body: `{}`, headers: map[string]string{"Content-Type": "text/plain"}}, 415},
		{req{path: endpoint, method: "GET"}, 405},
		{req{path: "/sse", method: "POST", body: `{}`}, 405},
		{req{path: "/sse", method: "GET", headers: map[string]string{"Accept": "application/json"}}, 406},
		{req{path: endpoint, body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{"Origin": "http://evil.example"}}, 403},
	} {
		resp := ts.do(c.r)
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d: %s", c.r.method, c.r.path, resp.StatusCode, c.status, bodyOf(resp))
		}
		if resp.Body != nil {
			resp.Body.Close()
		}
	}

	// A legacy session id means nothing to the Streamable HTTP endpoint.
	sid := strings.TrimPrefix(endpoint, "/message?sessionId=")
	if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: map[string]string{HeaderSessionID: sid}}); resp.StatusCode != 404 {
		t.Errorf("legacy session on /mcp: %d, want 404", resp.StatusCode)
	}

	// Closing the stream ends the session.
	stream.Body.Close()
	waitFor(t, "the legacy session to end", func() bool { return ts.Reg.Len() == 0 })
	if resp := post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); resp.StatusCode != 404 {
		t.Errorf("POST after the stream closed: %d, want 404", resp.StatusCode)
	}
}

// TestShutdownRetry: at shutdown every open stream ends with a retry hint, whatever its
// revision and transport, after the events sent before.
func TestShutdownRetry(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{RetryMs: 4321}})
	type open struct {
		name string
		body io.ReadCloser
	}
	var streams []open
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		sid := ts.initialize(v)
		get := ts.do(req{method: "GET", headers: sessionHeaders(sid, v)})
		if get.StatusCode != 200 {
			t.Fatalf("GET %s: %d", v, get.StatusCode)
		}
		streams = append(streams, open{v, get.Body})
		ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"broadcast","params":{"count":1}}`, headers: sessionHeaders(sid, v)})
	}
	legacy, _, _ := ts.openLegacy()
	streams = append(streams, open{"legacy", legacy.Body})

	ts.HTTP.Shutdown()
	for _, s := range streams {
		raw, _ := io.ReadAll(s.body) // the stream ends
		s.body.Close()
		if !strings.HasSuffix(string(raw), "retry: 4321\n\n") {
			t.Errorf("%s: stream did not end with the retry hint: %q", s.name, raw)
		}
		if s.name != "legacy" && strings.Count(string(raw), `"progress":0`) != 1 {
			t.Errorf("%s: the event sent before shutdown did not arrive exactly once: %q", s.name, raw)
		}
	}
	// Streams opened after shutdown are refused.
	if resp := ts.do(req{method: "GET", path: "/sse"}); resp.StatusCode != 503 {
		t.Errorf("GET /sse after shutdown: %d, want 503", resp.StatusCode)
	}
	if ts.Reg.Len() != 0 {
		t.Errorf("%d sessions left after shutdown", ts.Reg.Len())
	}
}
