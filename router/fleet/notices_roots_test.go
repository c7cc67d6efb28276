package fleet

import (
	"context"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/router"
)

// sentConn is an upstream.Conn that keeps what it is sent.
type sentConn struct {
	mu   sync.Mutex
	sent []string
}

func (c *sentConn) Send(_ context.Context, msg []byte) error {
	c.mu.Lock()
	c.sent = append(c.sent, string(msg))
	c.mu.Unlock()
	return nil
}
func (*sentConn) SetProtocolVersion(string) {}
func (*sentConn) Close() error              { return nil }
func (*sentConn) Done() <-chan struct{}     { return nil }
func (*sentConn) Err() error                { return nil }

// TestRootsListChangedAbsorbed: a 2025 client's notifications/roots/list_changed goes
// to its own upstream sessions with 2025 backends, and is absorbed for its 2026-07-28
// ones (modern.Mappings: 2026-07-28 asks for roots again each time).
func TestRootsListChangedAbsorbed(t *testing.T) {
	life := newLifecycle()
	ss := newSessions(life, nil, &Stats{}, 1, 0)
	n := &notices{life: life, sessions: ss}
	s := &router.Session{}
	legacy, modern := &sentConn{}, &sentConn{}
	ss.m[s] = &sessionState{sess: s, conns: map[*instance]*upConn{
		{}: {conn: legacy},
		{}: {conn: modern, modern: true},
	}}
	n.rootsChanged(s) // fromClient's for notifications/roots/list_changed
	life.stop()       // waits for the sends spawned
	if len(legacy.sent) != 1 || len(modern.sent) != 0 {
		t.Fatalf("sent to the 2025 backend %q, to the 2026-07-28 one %q; want one and none", legacy.sent, modern.sent)
	}
}
