package transport

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// gatedResolver knows every session id; ResolveSession counts its calls and waits for
// gate, so that a test can have requests arrive while an adoption is in progress.
type gatedResolver struct {
	gate     chan struct{}
	resolves atomic.Int32
	adopted  atomic.Int32
}

func (r *gatedResolver) ResolveSession(string, *auth.Principal) (string, SessionState, error) {
	r.resolves.Add(1)
	select {
	case <-r.gate:
	case <-time.After(waitLimit):
	}
	return "2025-03-26", struct{}{}, nil
}

func (r *gatedResolver) SessionAdopted(*Session) { r.adopted.Add(1) }

// TestConcurrentAdoptionOnce: two requests naming the same moved session at once adopt
// it once: one ResolveSession (which builds the handler's state, upstream subscriptions
// included), the other request waits for its result and is served by the same session;
// after DELETE nothing of it is left.
func TestConcurrentAdoptionOnce(t *testing.T) {
	res := &gatedResolver{gate: make(chan struct{})}
	ts := newTestServer(t, serverOpts{cfg: HTTPConfig{Resolver: res}})
	const sid = "moved-session-1"
	h := sessionHeaders(sid, "")

	var wg sync.WaitGroup
	status := make([]int, 2)
	for i := range status {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status[i] = ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: h}).StatusCode
		}()
	}
	waitFor(t, "both requests at the adoption", func() bool {
		return res.resolves.Load()+int32(ts.HTTP.Stats.AdoptionWaits.Load()) >= 2
	})
	close(res.gate)
	wg.Wait()
	for i, st := range status {
		if st != 200 {
			t.Errorf("request %d: status %d", i, st)
		}
	}
	if n := res.resolves.Load(); n != 1 {
		t.Errorf("ResolveSession called %d times, want 1", n)
	}
	if n, m := res.adopted.Load(), ts.HTTP.Stats.Adopted.Load(); n != 1 || m != 1 {
		t.Errorf("SessionAdopted %d times, Stats.Adopted %d, want 1 and 1", n, m)
	}
	if n := ts.Reg.Len(); n != 1 {
		t.Errorf("%d sessions registered, want 1", n)
	}

	if resp := ts.do(req{method: "DELETE", headers: h}); resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, bodyOf(resp))
	}
	if n := ts.Reg.Len(); n != 0 {
		t.Errorf("%d sessions left after DELETE", n)
	}
	ts.h.checkClosedOnly(t, sid)

	// The store may still hold the session's record for a moment after DELETE (its
	// delete is written after the answer): a request naming it is 404, not adopted back.
	if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, headers: h}); resp.StatusCode != 404 {
		t.Fatalf("request after DELETE: %d %s, want 404", resp.StatusCode, bodyOf(resp))
	}
	if n := res.resolves.Load(); n != 1 {
		t.Errorf("ResolveSession called %d times after DELETE, want still 1", n)
	}
}

// TestEndedHereBounded: the set of sessions ended here keeps the newest endedHereMax ids.
func TestEndedHereBounded(t *testing.T) {
	var e endedHere
	for i := 0; i < endedHereMax+10; i++ {
		e.add(strconv.Itoa(i))
	}
	if len(e.ids) != endedHereMax {
		t.Fatalf("%d ids kept, want %d", len(e.ids), endedHereMax)
	}
	if e.has([]byte("0")) || e.has([]byte("9")) || !e.has([]byte("10")) || !e.has([]byte(strconv.Itoa(endedHereMax+9))) {
		t.Fatal("the oldest ids must go first, the newest stay")
	}
}

// TestRefusedAdoptionReleased: a moved session that finds no room here (the table is
// full of busy sessions) is answered 404, and the handler state its resolution built
// is closed as handed over (its record stays for another try), not left behind.
func TestRefusedAdoptionReleased(t *testing.T) {
	res := &gatedResolver{gate: make(chan struct{})}
	close(res.gate)
	ts := newTestServer(t, serverOpts{reg: RegistryConfig{MaxSessions: 1}, cfg: HTTPConfig{Resolver: res}})
	busy := ts.initialize("2025-03-26")
	go ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"hold"}`, headers: sessionHeaders(busy, "")})
	waitFor(t, "the held call", func() bool { return ts.h.holdingCount() == 1 })

	const sid = "moved-session-2"
	if resp := ts.do(req{body: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, headers: sessionHeaders(sid, "")}); resp.StatusCode != 404 {
		t.Fatalf("adoption with no room: %d %s, want 404", resp.StatusCode, bodyOf(resp))
	}
	if n := res.adopted.Load(); n != 0 {
		t.Errorf("SessionAdopted called %d times for a refused adoption", n)
	}
	ts.h.checkClosedOnly(t, sid)
}
