//go:build linux

package closewatch

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// waitLimit bounds every wait on an event; none is a sleep.
const waitLimit = 10 * time.Second

// closer counts its Close calls and signals the first.
type closer struct {
	n  atomic.Int32
	ch chan struct{}
}

func newCloser() *closer { return &closer{ch: make(chan struct{})} }

func (c *closer) Close() {
	if c.n.Add(1) == 1 {
		close(c.ch)
	}
}

func (c *closer) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-c.ch:
	case <-time.After(waitLimit):
		t.Fatalf("%s: not closed within %v", what, waitLimit)
	}
}

// loopback accepts connections on a real loopback listener.
type loopback struct {
	t  testing.TB
	ln net.Listener
}

func newLoopback(t testing.TB) *loopback {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &loopback{t: t, ln: ln}
}

// pair returns the server's side of a new connection, its RawConn, and the client's side.
func (l *loopback) pair() (*net.TCPConn, syscall.RawConn, *net.TCPConn) {
	l.t.Helper()
	cl, err := net.Dial("tcp", l.ln.Addr().String())
	if err != nil {
		l.t.Fatal(err)
	}
	sc, err := l.ln.Accept()
	if err != nil {
		l.t.Fatal(err)
	}
	srv := sc.(*net.TCPConn)
	rc, err := srv.SyscallConn()
	if err != nil {
		l.t.Fatal(err)
	}
	return srv, rc, cl.(*net.TCPConn)
}

func newWatcher(t testing.TB) *Watcher {
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestPeerClose: the peer's close, its reset, and a close that came before the
// registration each close the registration's Closer once; Remove then leaves nothing
// registered.
func TestPeerClose(t *testing.T) {
	w := newWatcher(t)
	lb := newLoopback(t)
	for _, c := range []struct {
		name  string
		end   func(srv, cl *net.TCPConn) // before or after Add (early)
		early bool
	}{
		{"close", func(_, cl *net.TCPConn) { cl.Close() }, false},
		{"half-close", func(_, cl *net.TCPConn) { cl.CloseWrite() }, false},
		{"reset", func(_, cl *net.TCPConn) { cl.SetLinger(0); cl.Close() }, false},
		{"closed before Add", func(_, cl *net.TCPConn) { cl.Close() }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, rc, cl := lb.pair()
			defer srv.Close()
			defer cl.Close()
			if c.early {
				c.end(srv, cl)
			}
			cs := newCloser()
			r, err := w.Add(rc, cs)
			if err != nil {
				t.Fatal(err)
			}
			if w.Len() != 1 {
				t.Errorf("Len %d after Add, want 1", w.Len())
			}
			if !c.early {
				c.end(srv, cl)
			}
			cs.wait(t, c.name)
			w.Remove(rc, r)
			w.Remove(rc, r) // a second Remove is ignored
			if w.Len() != 0 {
				t.Errorf("Len %d after Remove, want 0", w.Len())
			}
			if n := cs.n.Load(); n != 1 {
				t.Errorf("closed %d times, want once", n)
			}
		})
	}
}

// TestDataDoesNotWake: bytes from the client (which it should not send) wake nothing;
// the watcher takes one event per connection, at its close. The event of a second
// connection's close, queued after the data, shows the data was taken no notice of.
func TestDataDoesNotWake(t *testing.T) {
	w := newWatcher(t)
	lb := newLoopback(t)
	srvA, rcA, clA := lb.pair()
	defer srvA.Close()
	srvB, rcB, clB := lb.pair()
	defer srvB.Close()
	a, b := newCloser(), newCloser()
	ra, err := w.Add(rcA, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := w.Add(rcB, b)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := clA.Write([]byte("unexpected bytes")); err != nil {
			t.Fatal(err)
		}
	}
	clB.Close()
	b.wait(t, "B")
	if a.n.Load() != 0 || w.events.Load() != 1 {
		t.Fatalf("after data on A and B's close: A closed %d times, %d events, want 0 and 1", a.n.Load(), w.events.Load())
	}
	clA.Close()
	a.wait(t, "A")
	if got := w.events.Load(); got != 2 {
		t.Errorf("%d events for two closes, want 2", got)
	}
	w.Remove(rcA, ra)
	w.Remove(rcB, rb)
}

// TestStreamEndsFirst: registrations removed while their connections are open (the
// stream ended for another reason) leave nothing registered, and their Closers are never
// called, not even when the peers close afterwards.
func TestStreamEndsFirst(t *testing.T) {
	w := newWatcher(t)
	lb := newLoopback(t)
	const n = 200
	type held struct {
		srv, cl *net.TCPConn
		rc      syscall.RawConn
		r       Reg
		c       *closer
	}
	hs := make([]held, n)
	for i := range hs {
		h := &hs[i]
		h.srv, h.rc, h.cl = lb.pair()
		h.c = newCloser()
		var err error
		if h.r, err = w.Add(h.rc, h.c); err != nil {
			t.Fatal(err)
		}
	}
	if w.Len() != n {
		t.Fatalf("Len %d, want %d", w.Len(), n)
	}
	// Half end first (Remove, then close both sides); the other half by the peer.
	for i := range hs {
		h := &hs[i]
		if i%2 == 0 {
			w.Remove(h.rc, h.r)
			h.srv.Close()
			h.cl.Close()
		} else {
			h.cl.Close()
		}
	}
	for i := 1; i < n; i += 2 {
		h := &hs[i]
		h.c.wait(t, "a peer's close")
		w.Remove(h.rc, h.r)
		h.srv.Close()
	}
	if w.Len() != 0 {
		t.Errorf("Len %d after every stream ended, want 0", w.Len())
	}
	for i := 0; i < n; i += 2 {
		if hs[i].c.n.Load() != 0 {
			t.Fatalf("connection %d, removed before its peer closed, was closed", i)
		}
	}
}

// TestDescriptorReuse: connections opened and closed in a loop, each new one mostly on
// the descriptor number the last one had, even when the last one was closed before its
// registration was removed: a stale Remove never takes the new registration away, and
// each peer's close reaches its own Closer only.
func TestDescriptorReuse(t *testing.T) {
	w := newWatcher(t)
	lb := newLoopback(t)
	var prev struct {
		rc syscall.RawConn
		r  Reg
		fd uintptr
	}
	reused := 0
	for i := range 100 {
		srv, rc, cl := lb.pair()
		var fd uintptr
		rc.Control(func(d uintptr) { fd = d })
		if prev.rc != nil && fd == prev.fd {
			reused++
		}
		c := newCloser()
		r, err := w.Add(rc, c)
		if err != nil {
			t.Fatal(err)
		}
		if prev.rc != nil {
			w.Remove(prev.rc, prev.r) // late, after its connection was closed
		}
		cl.Close()
		c.wait(t, "the new connection's peer close")
		if i%2 == 0 {
			w.Remove(rc, r)
			srv.Close()
			prev.rc = nil
		} else {
			srv.Close() // before Remove: the next round removes it
			prev.rc, prev.r, prev.fd = rc, r, fd
		}
		if got := c.n.Load(); got != 1 {
			t.Fatalf("round %d: closed %d times, want once", i, got)
		}
	}
	if prev.rc != nil {
		w.Remove(prev.rc, prev.r)
	}
	if reused == 0 {
		t.Error("no connection had its predecessor's descriptor: the test did not test reuse")
	}
	if w.Len() != 0 {
		t.Errorf("Len %d, want 0", w.Len())
	}
}

// TestClose: a closed Watcher refuses registrations and forgets the ones it held.
func TestClose(t *testing.T) {
	w := newWatcher(t)
	lb := newLoopback(t)
	srv, rc, cl := lb.pair()
	defer srv.Close()
	defer cl.Close()
	r, err := w.Add(rc, newCloser())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	w.Close()
	if _, err := w.Add(rc, newCloser()); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v, want ErrClosed", err)
	}
	w.Remove(rc, r)
	if w.Len() != 0 {
		t.Errorf("Len %d, want 0", w.Len())
	}
}

// TestDefault: the process's Watcher is one.
func TestDefault(t *testing.T) {
	a, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Default(); a != b {
		t.Error("two Default Watchers")
	}
}

// BenchmarkAddRemove: what a watched stream pays, a registration and its removal (two
// epoll_ctl calls through RawConn.Control), on one open loopback connection.
func BenchmarkAddRemove(b *testing.B) {
	w := newWatcher(b)
	srv, rc, cl := newLoopback(b).pair()
	defer srv.Close()
	defer cl.Close()
	c := newCloser()
	b.ReportAllocs()
	for b.Loop() {
		r, err := w.Add(rc, c)
		if err != nil {
			b.Fatal(err)
		}
		w.Remove(rc, r)
	}
}
