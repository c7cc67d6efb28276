package fleet

import (
	"testing"
	"time"
)

// testBackend is a backend of n instances, each with a live shared session on a
// scriptedConn, healthy unless told otherwise.
func testBackend(n, maxConcurrency int) *backend {
	b := &backend{cfg: BackendConfig{Name: "b"}, sem: make(chan struct{}, maxConcurrency), listed: make(chan struct{})}
	for i := 0; i < n; i++ {
		in := &instance{b: b, n: i}
		in.conn.Store(&upConn{b: b, inst: in, conn: &scriptedConn{done: make(chan struct{})}})
		in.healthy.Store(true)
		b.instances = append(b.instances, in)
	}
	return b
}

// TestPick checks the instance choice: never an unhealthy or dead one, the less loaded
// of the two drawn, and none when none is usable.
func TestPick(t *testing.T) {
	b := testBackend(3, 1)
	b.instances[0].healthy.Store(false)
	b.instances[1].conn.Load().conn.Close() // dead shared session
	for i := 0; i < 100; i++ {
		if in := b.pick(); in != b.instances[2] {
			t.Fatalf("picked instance %v, want the only usable one (2)", in)
		}
	}

	b = testBackend(2, 1)
	b.instances[0].outstanding.Store(5)
	for i := 0; i < 100; i++ {
		if in := b.pick(); in != b.instances[1] {
			t.Fatal("picked the more loaded of two instances")
		}
	}

	b = testBackend(2, 1)
	for _, in := range b.instances {
		in.healthy.Store(false)
	}
	if in := b.pick(); in != nil {
		t.Fatal("picked an instance with none usable")
	}
}

// TestAcquire checks the backend's concurrency slots: taken up to the limit, refused
// beyond it after the wait, available again once released.
func TestAcquire(t *testing.T) {
	b := testBackend(1, 2)
	if !b.acquire(time.Second) || !b.acquire(time.Second) {
		t.Fatal("a free slot was refused")
	}
	if b.acquire(time.Millisecond) {
		t.Fatal("a slot beyond the limit was given")
	}
	b.release()
	if !b.acquire(time.Second) {
		t.Fatal("a released slot was refused")
	}
}

// TestMarkListedOnce checks that the first-catalog signal may be given more than once
// (every refresh gives it) and closes once.
func TestMarkListedOnce(t *testing.T) {
	b := testBackend(1, 1)
	b.markListed()
	b.markListed()
	select {
	case <-b.listed:
	default:
		t.Fatal("listed not closed")
	}
}
