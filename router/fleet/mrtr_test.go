package fleet

import (
	"testing"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// TestParkedEntry follows a stateless request through the table's parked state: parked,
// it is out of the client index (a cancellation of the answered request finds
// nothing), neither a backend's answer nor the sweeps take it, and only a stateless
// request that was sent can be parked; claimed by a retry, it is sent again under the
// retry's id and a backend's answer takes it; an unclaimed one leaves through
// takeParked alone.
func TestParkedEntry(t *testing.T) {
	tb, c := newTable(), testConn()
	s := new(router.Session)
	stateless := func(id string) *entry {
		e := request(s, id)
		e.x.Stateless = true
		e.backend = &backend{}
		tb.add(e)
		return e
	}
	yes := func(*entry) bool { return true }

	e := stateless("1")
	if tb.park(e.id, yes) != nil {
		t.Fatal("a routed request was parked")
	}
	tb.bind(e, c)
	if tb.park(e.id, func(*entry) bool { return false }) != nil || e.state != stateSent {
		t.Fatal("parked although may refused")
	}
	x := e.x
	if got := tb.park(e.id, yes); got != x || e.state != stateParked || e.x != nil || e.sess != nil || !tb.parked(e.id) {
		t.Fatalf("park: exchange %p (want %p), state %v", got, x, e.state)
	}
	if tb.takeClient(s, []byte("1")) != nil || tb.take(e.id, stateAnswered) != nil ||
		len(tb.takeConn(c, nil)) != 0 || len(tb.expired(1<<62, nil)) != 0 {
		t.Fatal("a parked request was taken by the in-flight paths")
	}
	if tb.len() != 1 {
		t.Fatalf("table holds %d, want the parked one", tb.len())
	}

	retry := &transport.Exchange{}
	retry.Msg.ID = []byte(`"r"`)
	s2 := new(router.Session)
	if !tb.claim(e.id, s2, retry, 0) || e.state != stateSent || e.x != retry || e.sess != s2 || retry.Tag != e || tb.parked(e.id) {
		t.Fatalf("claim: state %v", e.state)
	}
	if tb.claim(e.id, s2, retry, 0) {
		t.Fatal("claimed twice")
	}
	if got := tb.take(e.id, stateAnswered); got != e || tb.len() != 0 {
		t.Fatal("the backend's answer did not take the claimed request")
	}

	plain := request(s, "2")
	plain.backend = &backend{}
	tb.add(plain)
	tb.bind(plain, c)
	if tb.park(plain.id, yes) != nil {
		t.Fatal("a session's request was parked")
	}

	e = stateless("3")
	tb.bind(e, c)
	tb.park(e.id, yes)
	if tb.takeParked(plain.id) != nil {
		t.Fatal("takeParked took a request that is not parked")
	}
	if got := tb.takeParked(e.id); got != e || e.state != stateExpired || tb.claim(e.id, s2, retry, 0) {
		t.Fatal("takeParked")
	}
}
