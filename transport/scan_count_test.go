//go:build transport_scancount

package transport

import (
	"testing"
)

// TestScannedOnce proves that the inbound path scans each message exactly once, valid or
// not, single or in a batch, on every HTTP transport (a 2026-07-28 stateless POST too)
// and on stdio (NATS shares the unit path with legacy POSTs). .ci/test.sh runs it:
// go test -tags transport_scancount -run TestScannedOnce ./transport/
func TestScannedOnce(t *testing.T) {
	const (
		single  = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		invalid = `{"jsonrpc":"2.0","id":1}`
		batch   = `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"foo":1},{"jsonrpc":"2.0","method":"n"}]`
	)
	expect := func(t *testing.T, what string, n int64, do func()) {
		t.Helper()
		before := scans.Load()
		do()
		if got := scans.Load() - before; got != n {
			t.Errorf("%s: %d scans, want %d", what, got, n)
		}
	}
	t.Run("streamable", func(t *testing.T) {
		ts := newTestServer(t, serverOpts{})
		sid := ts.initialize("2025-03-26")
		for _, r := range []struct {
			body string
			n    int64
		}{{single, 1}, {invalid, 1}, {batch, 3}} {
			expect(t, r.body, r.n, func() { bodyOf(ts.do(req{body: r.body, headers: sessionHeaders(sid, "2025-03-26")})) })
		}
	})
	t.Run("legacy", func(t *testing.T) {
		ts := newTestServer(t, serverOpts{})
		stream, _, endpoint := ts.openLegacy()
		defer stream.Body.Close()
		for _, r := range []struct {
			body string
			n    int64
		}{{single, 1}, {invalid, 1}, {batch, 3}} {
			expect(t, r.body, r.n, func() { bodyOf(ts.do(req{path: endpoint, body: r.body})) })
		}
	})
	t.Run("stateless", func(t *testing.T) {
		_, cl := startStateless(t, -1)
		for _, r := range []struct {
			body string
			n    int64
		}{{`{"jsonrpc":"2.0","id":1,"method":"headers"}`, 1}, {invalid, 1}} {
			expect(t, r.body, r.n, func() { readAll(t, statelessPost(t, cl, r.body, nil)) })
		}
	})
	t.Run("stdio", func(t *testing.T) {
		c := newStdioClient(t, StdioConfig{})
		expect(t, "single", 1, func() { c.send(single); c.recv() })
		expect(t, "batch", 3, func() { c.send(batch); c.recv() })
		c.in.Close()
		c.wait()
	})
}
