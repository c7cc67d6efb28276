package transport

import (
	"io"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// TestStreamEndsWithItsToken: an event stream opened with an access token ends when the
// token expires (the client reconnects with a fresh one and resumes): it must not keep
// delivering a session's messages to a caller whose authorization ran out.
func TestStreamEndsWithItsToken(t *testing.T) {
	op := authtest.Start(t, authtest.Options{})
	cfg := auth.Config{Mode: auth.ModeJWT, Resource: "http://127.0.0.1/mcp", Issuer: op.Issuer, ClockSkew: time.Millisecond}
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{Auth: newAuth(t, cfg)}})
	exp := time.Now().Add(3 * time.Second)
	tok := op.Token(authtest.Claims{Subject: "alice", Audience: []string{cfg.Resource}, Expiry: exp})
	sid := ts.initializeAs(tok, "2025-06-18")
	ended := map[string]chan struct{}{}
	for _, path := range []string{"/sse", "/mcp"} {
		h := map[string]string{"Accept": "text/event-stream", "Authorization": "Bearer " + tok}
		if path == "/mcp" {
			h = as(tok, merge(sessionHeaders(sid, "2025-06-18"), "Accept", "text/event-stream"))
		}
		stream := ts.do(req{method: "GET", path: path, headers: h})
		if stream.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, stream.StatusCode)
		}
		t.Cleanup(func() { stream.Body.Close() })
		done := make(chan struct{})
		go func() { io.Copy(io.Discard, stream.Body); close(done) }()
		ended[path] = done
	}
	deadline := exp.Add(waitLimit) // a bound on "never", not a timing target
	for path, done := range ended {
		select {
		case <-done:
		case <-time.After(time.Until(deadline)):
			t.Errorf("GET %s: the stream is still open %v after its token expired", path, waitLimit)
		}
	}
}
