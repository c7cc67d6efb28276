package transport

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestMaxSessions: past MaxSessions with every session busy (its client holding a
// stream open), initialize is refused with a clear error (the handler sees
// ErrTooManySessions from Bind) and so is a legacy stream (503); ending a session makes
// room again.
func TestMaxSessions(t *testing.T) {
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{MaxSessions: 2}})
	a := ts.initialize("2025-06-18")
	b := ts.initialize("2025-06-18")
	for _, sid := range []string{a, b} {
		get := ts.do(req{method: "GET", headers: sessionHeaders(sid, "2025-06-18")})
		defer get.Body.Close()
	}

	resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`})
	body := bodyOf(resp)
	if resp.Header.Get(HeaderSessionID) != "" || !strings.Contains(body, "too many sessions") {
		t.Fatalf("third initialize: %d session %q body %s, want a too-many-sessions error", resp.StatusCode, resp.Header.Get(HeaderSessionID), body)
	}
	ts.h.mu.Lock()
	bindErr := ts.h.bindErr
	ts.h.mu.Unlock()
	if !errors.Is(bindErr, ErrTooManySessions) {
		t.Errorf("Bind error %v, want ErrTooManySessions", bindErr)
	}
	legacy := ts.do(req{method: "GET", path: "/sse"})
	if legacy.StatusCode != 503 || !strings.Contains(bodyOf(legacy), "too many sessions") {
		t.Errorf("legacy stream past the limit: %d %s, want 503", legacy.StatusCode, bodyOf(legacy))
	}
	legacy.Body.Close()

	if resp := ts.do(req{method: "DELETE", headers: sessionHeaders(a, "2025-06-18")}); resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	ts.initialize("2025-06-18") // room again
}

// TestIdleExpiry: a session with no activity ends after IdleTimeout (404 afterwards,
// counted, handler told); one holding its GET stream open does not.
func TestIdleExpiry(t *testing.T) {
	const idle = 30 * time.Millisecond
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{IdleTimeout: idle}})
	busy := ts.initialize("2025-06-18")
	get := ts.do(req{method: "GET", headers: sessionHeaders(busy, "2025-06-18")})
	defer get.Body.Close()
	idleID := ts.initialize("2025-06-18")

	waitFor(t, "the idle session to expire", func() bool {
		_, ok := ts.Reg.Get([]byte(idleID))
		return !ok
	})
	if n := ts.Reg.Expired.Load(); n < 1 {
		t.Errorf("Expired = %d, want at least 1", n)
	}
	resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: sessionHeaders(idleID, "2025-06-18")})
	if resp.StatusCode != 404 {
		t.Errorf("request on an expired session: %d, want 404", resp.StatusCode)
	}
	ts.h.mu.Lock()
	closed := strings.Join(ts.h.closed, ",")
	ts.h.mu.Unlock()
	if !strings.Contains(closed, idleID) {
		t.Errorf("handler not told of the expiry: closed %q", closed)
	}
	// The session with an open stream outlives several idle periods. (Waiting longer can
	// only make this check stricter, never flaky.)
	time.Sleep(10 * idle)
	if _, ok := ts.Reg.Get([]byte(busy)); !ok {
		t.Errorf("a session holding its stream open expired")
	}
}
