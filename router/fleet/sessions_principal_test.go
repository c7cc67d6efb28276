package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
)

// openForPrincipal opens (or finds) principal id's upstream session with b as a
// stateless request of owner would (sessions.upstreamFor's 2026-07-28 branch).
func openForPrincipal(ss *sessions, b *backend, id string, owner *router.Session) (*upConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return ss.principalConn(ctx, id, owner, b.pick())
}

// TestPrincipalSessions: a principal's requests share one upstream session, opened by
// the first and speaking for it; another principal gets its own; every anonymous
// client is one principal.
func TestPrincipalSessions(t *testing.T) {
	ss, b, fb := testSessions(t, 8, time.Minute)
	first, second := new(router.Session), new(router.Session)
	alice, err := openForPrincipal(ss, b, "alice", first)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := openForPrincipal(ss, b, "alice", second); err != nil || again != alice {
		t.Fatalf("alice's second request: %v, same upstream session %v", err, again == alice)
	}
	if alice.owner != first || alice.slots == nil {
		t.Fatalf("alice's upstream session speaks for %p (slot %v), want her first request", alice.owner, alice.slots != nil)
	}
	bob, err := openForPrincipal(ss, b, "bob", second)
	if err != nil || bob == alice {
		t.Fatalf("bob: %v, shares alice's upstream session %v", err, bob == alice)
	}
	anon1, err1 := openForPrincipal(ss, b, "", new(router.Session))
	anon2, err2 := openForPrincipal(ss, b, "", new(router.Session))
	if err1 != nil || err2 != nil || anon1 != anon2 {
		t.Fatalf("anonymous clients: %v %v, one upstream session %v", err1, err2, anon1 == anon2)
	}
	if n, u, p := fb.open.Load(), ss.inUse(), ss.principalCount(); n != 3 || u != 3 || p != 3 {
		t.Fatalf("%d upstream sessions open, %d slots, %d principals; want 3 each", n, u, p)
	}
}

// TestPrincipalSessionIdle: a principal's upstream session is closed once unused for
// the idle period, its slot given back; one with a request in flight is kept; the
// principal's next request opens a new one.
func TestPrincipalSessionIdle(t *testing.T) {
	ss, b, fb := testSessions(t, 8, time.Minute)
	b.cfg.SessionIdle = 20 * time.Millisecond
	busy, err := openForPrincipal(ss, b, "busy", new(router.Session))
	if err != nil {
		t.Fatal(err)
	}
	inFlight := &entry{kind: ownRequest, backend: b, conn: busy, deadline: deadlineIn(time.Minute)}
	ss.conns.table.add(inFlight)
	idle, err := openForPrincipal(ss, b, "idle", new(router.Session))
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the idle principal's upstream session closed", 20*time.Second, func() bool { return idle.dead() && ss.principalCount() == 1 })
	testwait.For(t, "its slot given back", 20*time.Second, func() bool { return ss.inUse() == 1 && fb.open.Load() == 1 })
	if busy.dead() {
		t.Fatal("the upstream session with a request in flight was closed")
	}
	again, err := openForPrincipal(ss, b, "idle", new(router.Session))
	if err != nil || again == idle || again.dead() {
		t.Fatalf("the idle principal's next request: %v, a fresh upstream session %v", err, again != idle)
	}
	ss.conns.table.take(inFlight.id, stateFailed)
	testwait.For(t, "every principal reaped once idle", 20*time.Second, func() bool { return ss.principalCount() == 0 && fb.open.Load() == 0 && ss.inUse() == 0 })
}

// TestPrincipalSessionCap: with as many principals as the cap, a new one is refused as
// overloaded while all were used recently or have requests in flight, and takes the
// place of the least recently used idle one otherwise; never are more upstream
// sessions open than the cap.
func TestPrincipalSessionCap(t *testing.T) {
	ss, b, fb := testSessions(t, 2, 20*time.Millisecond)
	conns := map[string]*upConn{}
	for _, id := range []string{"alice", "bob"} {
		c, err := openForPrincipal(ss, b, id, new(router.Session))
		if err != nil {
			t.Fatal(err)
		}
		conns[id] = c
	}
	if _, err := openForPrincipal(ss, b, "carol", new(router.Session)); !errors.Is(err, errUpstreamFull) {
		t.Fatalf("a third principal while two are in use: %v, want errUpstreamFull", err)
	}
	past := func(id string, ago time.Duration) {
		ss.principals.mu.Lock()
		ss.principals.m[id].last.Store(time.Now().Add(-ago).UnixNano())
		ss.principals.mu.Unlock()
	}
	// Both idle long enough, but bob has a request in flight: alice, the older, goes.
	past("alice", time.Hour)
	past("bob", 2*time.Hour)
	inFlight := &entry{kind: ownRequest, backend: b, conn: conns["bob"], deadline: deadlineIn(time.Minute)}
	ss.conns.table.add(inFlight)
	defer ss.conns.table.take(inFlight.id, stateFailed)
	carol, err := openForPrincipal(ss, b, "carol", new(router.Session))
	if err != nil {
		t.Fatalf("carol in place of idle alice: %v", err)
	}
	if !conns["alice"].dead() || conns["bob"].dead() || carol.dead() {
		t.Fatalf("closed: alice %v, bob %v, carol %v; want alice's alone", conns["alice"].dead(), conns["bob"].dead(), carol.dead())
	}
	if p := fb.peak.Load(); p > 2 {
		t.Errorf("%d upstream sessions open at once, cap 2", p)
	}
	testwait.For(t, "alice's slot given to carol", 20*time.Second, func() bool { return ss.inUse() == 2 && fb.open.Load() == 2 })
}

// TestClosePrincipalSessions: the fleet's Close closes the principals' upstream
// sessions too, and opens none after.
func TestClosePrincipalSessions(t *testing.T) {
	f, fb := perClientFleet(t, 8, time.Minute)
	b := f.set.all()[0]
	for _, id := range []string{"alice", "bob"} {
		if _, err := openForPrincipal(f.sessions, b, id, new(router.Session)); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if n, u := fb.open.Load(), f.UpstreamSessions(); n != 0 || u != 0 {
		t.Fatalf("after Close: %d upstream sessions open, %d slots held", n, u)
	}
	if _, err := openForPrincipal(f.sessions, b, "carol", new(router.Session)); !errors.Is(err, errShuttingDown) {
		t.Fatalf("a principal after Close: %v, want errShuttingDown", err)
	}
}
