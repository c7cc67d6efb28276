package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// fakeBackend counts the upstream sessions open at once, like child processes.
type fakeBackend struct {
	open, peak atomic.Int64
}

func (fb *fakeBackend) dialer() Dialer {
	return Dialer{Addr: "fake", Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
		n := fb.open.Add(1)
		for p := fb.peak.Load(); n > p && !fb.peak.CompareAndSwap(p, n); p = fb.peak.Load() {
		}
		return &fakeConn{fb: fb, sink: sink, done: make(chan struct{})}, nil
	}}
}

// fakeConn answers every request at once, in Send (as an HTTP backend does).
type fakeConn struct {
	fb   *fakeBackend
	sink upstream.Sink
	once sync.Once
	done chan struct{}
}

func (c *fakeConn) Send(ctx context.Context, msg []byte) error {
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil || m.Kind != codec.KindRequest {
		return err
	}
	res := []byte(`{}`)
	if string(m.Method) == "initialize" {
		res = []byte(`{"protocolVersion":"2025-06-18","capabilities":{}}`)
	}
	c.sink.Message(codec.AppendResult(nil, m.ID, res))
	return nil
}

func (c *fakeConn) SetProtocolVersion(string) {}
func (c *fakeConn) Done() <-chan struct{}     { return c.done }
func (c *fakeConn) Err() error                { return nil }
func (c *fakeConn) Close() error {
	c.once.Do(func() { c.fb.open.Add(-1); close(c.done) })
	return nil
}

// perClientFleet is a fleet with one per-client backend on a fakeBackend, not started:
// its instance is marked healthy by hand.
func perClientFleet(t *testing.T, max int, wait time.Duration) (*Fleet, *fakeBackend) {
	fb := &fakeBackend{}
	f := New(Config{MaxUpstreamSessions: max, UpstreamSessionWait: wait, Backends: []BackendConfig{
		{Name: "pc", PerClient: true, Timeout: time.Minute, Dialers: []Dialer{fb.dialer()}},
	}})
	t.Cleanup(f.life.cancel)
	f.set.all()[0].instances[0].healthy.Store(true)
	return f, fb
}

// testSessions is the sessions part of a perClientFleet, tested on its own: the
// fleet only wires it (its connector's handshake answers go through the in-flight
// table).
func testSessions(t *testing.T, max int, wait time.Duration) (*sessions, *backend, *fakeBackend) {
	f, fb := perClientFleet(t, max, wait)
	return f.sessions, f.set.all()[0], fb
}

// openFor opens (or finds) sess's upstream session with b as a forwarded request would.
func openFor(ss *sessions, b *backend, sess *router.Session) (*upConn, error) {
	return ss.upstreamFor(&entry{sess: sess, backend: b, deadline: deadlineIn(time.Minute)})
}

// TestUpstreamSessionCap checks the cap on per-client upstream sessions: beyond it a
// session waits, proceeds once another session ended and its upstream session was
// closed, and is refused with errUpstreamFull when none ends in time; never are more
// open than the cap. Each upstream session speaks for its own client.
func TestUpstreamSessionCap(t *testing.T) {
	ss, b, fb := testSessions(t, 2, time.Minute)
	sess := make([]*router.Session, 6)
	for i := range sess {
		sess[i] = new(router.Session)
		ss.open(sess[i])
	}
	first := make([]*upConn, 2)
	for i := range first {
		c, err := openFor(ss, b, sess[i])
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		first[i] = c
		if c.owner != sess[i] || c.slots == nil {
			t.Fatalf("session %d: its upstream session speaks for %p (slot %v), want its own client", i, c.owner, c.slots != nil)
		}
	}
	if c, err := openFor(ss, b, sess[0]); err != nil || c != first[0] || ss.inUse() != 2 {
		t.Fatalf("a session's second request did not reuse its upstream session: %v (%d open)", err, ss.inUse())
	}
	// Four more wait their turn; each one that gets a session ends, freeing a slot.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 2; i < 6; i++ {
		wg.Go(func() {
			if _, err := openFor(ss, b, sess[i]); err != nil {
				errs <- err
				return
			}
			ss.end(sess[i])
		})
	}
	testwait.For(t, "two requests queued", 20*time.Second, func() bool { return ss.stats.UpstreamQueued.Load() >= 2 || len(errs) > 0 })
	ss.end(sess[0])
	ss.end(sess[1])
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if p := fb.peak.Load(); p > 2 {
		t.Errorf("%d upstream sessions open at once, want at most 2", p)
	}
	testwait.For(t, "every upstream session closed", 20*time.Second, func() bool { return fb.open.Load() == 0 && ss.inUse() == 0 })
}

// TestUpstreamSessionRefused: with every slot held and none freed within the wait, the
// request is refused as overloaded; a session that ended gets nothing opened.
func TestUpstreamSessionRefused(t *testing.T) {
	ss, be, fb := testSessions(t, 1, 20*time.Millisecond)
	a, b := new(router.Session), new(router.Session)
	ss.open(a)
	ss.open(b)
	if _, err := openFor(ss, be, a); err != nil {
		t.Fatal(err)
	}
	if _, err := openFor(ss, be, b); !errors.Is(err, errUpstreamFull) {
		t.Fatalf("beyond the cap: err = %v, want errUpstreamFull", err)
	}
	if got := ss.stats.UpstreamRefused.Load(); got != 1 {
		t.Errorf("UpstreamRefused = %d, want 1", got)
	}
	ss.end(b)
	if _, err := openFor(ss, be, b); !errors.Is(err, errSessionEnded) {
		t.Fatalf("for an ended session: err = %v, want errSessionEnded", err)
	}
	ss.end(a)
	testwait.For(t, "every upstream session closed", 20*time.Second, func() bool { return fb.open.Load() == 0 && ss.inUse() == 0 })
}

// TestUpstreamWaitEndsWithSession: a request waiting for a slot gives up when its
// client session ends, without opening anything.
func TestUpstreamWaitEndsWithSession(t *testing.T) {
	ss, b, fb := testSessions(t, 1, time.Hour)
	a, c := new(router.Session), new(router.Session)
	ss.open(a)
	ss.open(c)
	if _, err := openFor(ss, b, a); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := openFor(ss, b, c); done <- err }()
	testwait.For(t, "the request queued", 20*time.Second, func() bool { return ss.stats.UpstreamQueued.Load() == 1 })
	ss.end(c)
	if err := <-done; !errors.Is(err, errSessionEnded) {
		t.Fatalf("queued request of an ended session: err = %v, want errSessionEnded", err)
	}
	if n := fb.open.Load(); n != 1 {
		t.Errorf("%d upstream sessions open, want only the first session's", n)
	}
	ss.end(a)
	testwait.For(t, "every upstream session closed", 20*time.Second, func() bool { return fb.open.Load() == 0 && ss.inUse() == 0 })
}

// TestUpstreamOpenedOnce: a session's concurrent first requests open one upstream
// session between them, taking one slot, not one each.
func TestUpstreamOpenedOnce(t *testing.T) {
	ss, b, fb := testSessions(t, 4, time.Hour)
	sess := new(router.Session)
	ss.open(sess)
	const n = 8
	conns := make(chan *upConn, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			c, err := openFor(ss, b, sess)
			if err != nil {
				t.Error(err)
			}
			conns <- c
		})
	}
	wg.Wait()
	close(conns)
	first := <-conns
	for c := range conns {
		if c != first {
			t.Fatal("concurrent requests of one session got different upstream sessions")
		}
	}
	if p, u := fb.peak.Load(), ss.inUse(); p != 1 || u != 1 {
		t.Errorf("%d upstream sessions opened at once, %d slots held; want 1 and 1", p, u)
	}
	ss.end(sess)
	testwait.For(t, "every upstream session closed", 20*time.Second, func() bool { return fb.open.Load() == 0 && ss.inUse() == 0 })
}

// TestCloseWaitsForUpstreamSessions checks that Close returns only once every
// per-client upstream session is closed (for a stdio backend: its child stopped).
func TestCloseWaitsForUpstreamSessions(t *testing.T) {
	f, fb := perClientFleet(t, 8, time.Minute)
	for i := 0; i < 3; i++ {
		sess := new(router.Session)
		f.SessionOpened(sess)
		if _, err := openFor(f.sessions, f.set.all()[0], sess); err != nil {
			t.Fatal(err)
		}
	}
	if n := fb.open.Load(); n != 3 {
		t.Fatalf("%d upstream sessions open, want 3", n)
	}
	f.Close()
	if n := fb.open.Load(); n != 0 {
		t.Fatalf("%d upstream sessions still open after Close", n)
	}
	if n := f.UpstreamSessions(); n != 0 {
		t.Fatalf("%d upstream session slots still held after Close", n)
	}
}
