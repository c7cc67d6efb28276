package fleet

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// request returns an entry for a client request with the given id in sess, as track
// makes it.
func request(sess *router.Session, id string) *entry {
	x := &transport.Exchange{}
	x.Msg.ID = []byte(id)
	return &entry{kind: clientRequest, sess: sess, x: x}
}

// fill puts perSession requests of each of sessions in flight (added and bound) and
// returns them by session.
func fill(t *table, c *upConn, sessions, perSession int) ([]*router.Session, [][]*entry) {
	ss := make([]*router.Session, sessions)
	es := make([][]*entry, sessions)
	for i := range ss {
		ss[i] = new(router.Session)
		for k := 0; k < perSession; k++ {
			e := request(ss[i], strconv.Itoa(k))
			t.add(e)
			t.bind(e, c)
			es[i] = append(es[i], e)
		}
	}
	return ss, es
}

func testConn() *upConn { return &upConn{inst: &instance{}} }

// BenchmarkTakeClient measures a cancellation's lookup with many requests in flight:
// take one by (session, client id) and put it back.
func BenchmarkTakeClient(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			t, c := newTable(), testConn()
			ss, es := fill(t, c, 100, n/100)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := i % len(ss)
				e := es[s][(i/len(ss))%len(es[s])]
				if got := t.takeClient(ss[s], e.x.Msg.ID); got != e {
					b.Fatalf("takeClient found %p, want %p", got, e)
				}
				t.add(e)
				t.bind(e, c)
			}
		})
	}
}

// BenchmarkTableRoundTrip measures the table's part of forwarding one request: add
// (track), bind (forward) and take (the backend's response), from several sessions at
// once, with 1000 other requests in flight. As a real call's, each entry has a backend
// and the table a shutdown's signal, so that settle's pokes (nobody waiting) count.
func BenchmarkTableRoundTrip(b *testing.B) {
	t, c := newTable(), testConn()
	t.signalDrains(new(drainSignal))
	be := &backend{}
	fill(t, c, 10, 100)
	var mu sync.Mutex
	next := 0
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		sess := new(router.Session)
		mu.Unlock()
		e := request(sess, "7")
		e.backend = be
		for pb.Next() {
			t.add(e)
			t.bind(e, c)
			if t.take(e.id, stateAnswered) != e {
				b.Fatal("take lost the entry")
			}
		}
	})
}

// TestTakeClient checks the cancellation index against the table: a cancel finds the
// request of its own session only, an unsent request is only marked, whatever leaves
// the table by another way leaves the index too, and a reused id does not strand the
// index.
func TestTakeClient(t *testing.T) {
	tb, c := newTable(), testConn()
	ss, es := fill(tb, c, 3, 5)
	if got := tb.takeClient(ss[0], []byte("9")); got != nil {
		t.Fatalf("takeClient of an unknown id = %p, want nil", got)
	}
	if got := tb.takeClient(new(router.Session), []byte("1")); got != nil {
		t.Fatal("takeClient found a request of another session")
	}
	if got := tb.takeClient(ss[1], []byte("3")); got != es[1][3] {
		t.Fatalf("takeClient = %p, want %p", got, es[1][3])
	}
	if got := tb.takeClient(ss[1], []byte("3")); got != nil {
		t.Fatal("a request was taken twice")
	}

	// Taken by its response, expired, or lost with its connection: gone from the index.
	if tb.take(es[0][1].id, stateAnswered) != es[0][1] || tb.takeClient(ss[0], []byte("1")) != nil {
		t.Fatal("a request answered by the backend is still found by its client id")
	}
	es[2][0].deadline = 1
	if got := tb.expired(2, nil); len(got) != 1 || got[0] != es[2][0] || tb.takeClient(ss[2], []byte("0")) != nil {
		t.Fatalf("an expired request is still found by its client id (expired %v)", got)
	}
	if got := tb.takeConn(c, nil); len(got) != 12 {
		t.Fatalf("takeConn took %d entries, want 12", len(got))
	}
	for i := range tb.shards {
		if sh := &tb.shards[i]; len(sh.m) != 0 || len(sh.byClient) != 0 {
			t.Fatalf("after takeConn: %d entries, %d index keys left", len(sh.m), len(sh.byClient))
		}
	}

	// Routed, not sent yet: settled as cancelled (out of the index too) but left to
	// forward, whose bind reports it.
	sess := new(router.Session)
	e := request(sess, `"a"`)
	tb.add(e)
	if tb.takeClient(sess, []byte(`"a"`)) != nil || e.state != stateCancelled {
		t.Fatalf("an unsent request was returned or not cancelled (state %v)", e.state)
	}
	if tb.bind(e, c) {
		t.Fatal("bind of a cancelled request succeeded")
	}
	if tb.len() != 0 || len(tb.shards[sessionShard(sess)].byClient) != 0 {
		t.Fatal("a request cancelled before it was sent stayed in the table")
	}

	// The same id twice in flight (a faulty client) share one index key, chained:
	// whichever of the two leaves first, the other is still found by its id.
	for _, newerLeaves := range []bool{false, true} {
		older, newer := request(sess, "5"), request(sess, "5")
		for _, e := range []*entry{older, newer} {
			tb.add(e)
			tb.bind(e, c)
		}
		left, stays := older, newer
		if newerLeaves {
			left, stays = newer, older
		}
		tb.take(left.id, stateAnswered)
		if got := tb.takeClient(sess, []byte("5")); got != stays {
			t.Fatalf("reused id, newer left first %v: takeClient = %p, want %p", newerLeaves, got, stays)
		}
	}
	if sh := &tb.shards[sessionShard(sess)]; len(sh.byClient) != 0 {
		t.Fatalf("%d index keys left", len(sh.byClient))
	}

	// The router's own requests are not indexed.
	own := &entry{kind: ownRequest, wait: make(chan []byte, 1)}
	tb.add(own)
	if own.clientID != "" || tb.take(own.id, stateAnswered) != own {
		t.Fatal("a router request was indexed or lost")
	}
}

// TestTableShards checks that a client's requests share their session's shard and that
// ids stay unique.
func TestTableShards(t *testing.T) {
	tb, c := newTable(), testConn()
	ss, es := fill(tb, c, 50, 4)
	seen := map[uint64]bool{}
	for i, s := range ss {
		for _, e := range es[i] {
			if tb.shard(e.id) != &tb.shards[sessionShard(s)] {
				t.Fatalf("entry %d is not in its session's shard", e.id)
			}
			if seen[e.id] {
				t.Fatalf("id %d given twice", e.id)
			}
			seen[e.id] = true
		}
	}
}

// TestTableTakeOnce checks that a sent entry is taken exactly once, and how backends'
// ids are read.
func TestTableTakeOnce(t *testing.T) {
	tb := newTable()
	e := &entry{kind: ownRequest}
	tb.add(e)
	if tb.take(e.id, stateAnswered) != e || tb.take(e.id, stateAnswered) != nil {
		t.Fatal("an entry must be taken exactly once")
	}
	for _, raw := range []string{"12", `"12"`} {
		if id, ok := parseID([]byte(raw)); !ok || id != 12 {
			t.Errorf("parseID(%s) = %d %v", raw, id, ok)
		}
	}
	if _, ok := parseID([]byte(`"x"`)); ok {
		t.Error("a foreign id parsed as ours")
	}
}

// settled reports whether e left tb for good: in no shard's map nor index, in state want.
func settled(t *testing.T, tb *table, e *entry, want entryState) {
	t.Helper()
	if e.state != want {
		t.Fatalf("state %v, want %v", e.state, want)
	}
	for i := range tb.shards {
		sh := &tb.shards[i]
		if sh.m[e.id] == e {
			t.Fatalf("a %v entry is still in the table", e.state)
		}
		for _, head := range sh.byClient {
			for p := head; p != nil; p = p.sameHash {
				if p == e {
					t.Fatalf("a %v entry is still in the cancellation index", e.state)
				}
			}
		}
	}
}

// TestTransitions drives every transition of the in-flight state machine, and checks
// that each method leaves entries in the states it does not handle alone.
func TestTransitions(t *testing.T) {
	past := int64(1) // a deadline already passed at now=2
	type step struct {
		name string
		from entryState // routed or sent
		// do makes the transition; it returns whether the method reported the entry
		// (returned it, or true).
		do   func(tb *table, e *entry, c *upConn) bool
		want entryState // the state after; routed or sent means "stayed"
		got  bool       // what do should report
	}
	sess := new(router.Session)
	cancel := func(tb *table, e *entry, c *upConn) bool { return tb.takeClient(sess, e.x.Msg.ID) == e }
	end := func(tb *table, e *entry, c *upConn) bool {
		out := tb.takeSession(sess, nil)
		return len(out) == 1 && out[0] == e
	}
	take := func(to entryState) func(tb *table, e *entry, c *upConn) bool {
		return func(tb *table, e *entry, c *upConn) bool { return tb.take(e.id, to) == e }
	}
	expire := func(tb *table, e *entry, c *upConn) bool { return len(tb.expired(2, nil)) == 1 }
	lose := func(tb *table, e *entry, c *upConn) bool { return len(tb.takeConn(c, nil)) == 1 }
	all := func(tb *table, e *entry, c *upConn) bool { return len(tb.takeAll(nil)) == 1 }
	bind := func(tb *table, e *entry, c *upConn) bool { return tb.bind(e, c) }
	abandon := func(tb *table, e *entry, c *upConn) bool { return tb.abandon(e) }
	with := func(tb *table, e *entry, c *upConn) bool { return tb.with(e.id, func(*entry) {}) }
	for _, s := range []step{
		{"bind", stateRouted, bind, stateSent, true},
		{"cancel routed", stateRouted, cancel, stateCancelled, false},
		{"session ends, routed", stateRouted, end, stateCancelled, false},
		{"abandon", stateRouted, abandon, stateFailed, true},
		{"answer routed", stateRouted, take(stateAnswered), stateRouted, false},
		{"expire routed", stateRouted, expire, stateRouted, false},
		{"lose routed", stateRouted, lose, stateRouted, false},
		{"with routed", stateRouted, with, stateRouted, false},
		{"answer", stateSent, take(stateAnswered), stateAnswered, true},
		{"send timed out", stateSent, take(stateExpired), stateExpired, true},
		{"cancel sent", stateSent, cancel, stateCancelled, true},
		{"session ends", stateSent, end, stateCancelled, true},
		{"expire", stateSent, expire, stateExpired, true},
		{"lose connection", stateSent, lose, stateFailed, true},
		{"shut down", stateSent, all, stateFailed, true},
		{"bind sent", stateSent, bind, stateSent, false},
		{"abandon sent", stateSent, abandon, stateSent, false},
		{"with sent", stateSent, with, stateSent, true},
	} {
		t.Run(s.name, func(t *testing.T) {
			tb, c := newTable(), testConn()
			e := request(sess, "1")
			e.deadline = past
			tb.add(e)
			if e.state != stateRouted {
				t.Fatalf("added as %v", e.state)
			}
			if s.from == stateSent && !tb.bind(e, c) {
				t.Fatal("bind failed")
			}
			if got := s.do(tb, e, c); got != s.got {
				t.Fatalf("reported %v, want %v", got, s.got)
			}
			if s.want == stateRouted || s.want == stateSent {
				if e.state != s.want || tb.len() != 1 {
					t.Fatalf("state %v, %d in flight; want %v, still in flight", e.state, tb.len(), s.want)
				}
				return
			}
			settled(t, tb, e, s.want)
			// A settled entry is out of reach of every method.
			for _, other := range []func(tb *table, e *entry, c *upConn) bool{bind, cancel, end, abandon, take(stateAnswered), expire, lose, all, with} {
				if other(tb, e, c) || e.state != s.want {
					t.Fatalf("a %v entry was reported again or changed to %v", s.want, e.state)
				}
			}
		})
	}
}

// TestSettleRaces races the ways out of the table many times (bounded): for a sent
// request, its answer, its cancellation, its expiry and the loss of its connection;
// for a routed one, its cancellation against forward's bind (followed by the answer)
// or abandon. Exactly one party must win, the entry must end in the winner's state and
// leave the table exactly once.
func TestSettleRaces(t *testing.T) {
	const rounds = 300
	type racer struct {
		state entryState // the state a win leaves
		run   func(tb *table, sess *router.Session, e *entry, c *upConn) bool
	}
	answer := racer{stateAnswered, func(tb *table, _ *router.Session, e *entry, _ *upConn) bool {
		return tb.take(e.id, stateAnswered) == e
	}}
	cancel := racer{stateCancelled, func(tb *table, sess *router.Session, e *entry, _ *upConn) bool {
		return tb.takeClient(sess, e.x.Msg.ID) == e
	}}
	end := racer{stateCancelled, func(tb *table, sess *router.Session, e *entry, _ *upConn) bool {
		out := tb.takeSession(sess, nil)
		return len(out) == 1 && out[0] == e
	}}
	expire := racer{stateExpired, func(tb *table, _ *router.Session, e *entry, _ *upConn) bool {
		return len(tb.expired(2, nil)) == 1
	}}
	lose := racer{stateFailed, func(tb *table, _ *router.Session, e *entry, c *upConn) bool {
		return len(tb.takeConn(c, nil)) == 1
	}}
	// forward's part on a routed entry: a cancellation that wins against bind leaves
	// it to forward, which then finishes it as cancelled (a win for the cancellation).
	bindAnswer := racer{stateAnswered, func(tb *table, _ *router.Session, e *entry, c *upConn) bool {
		return tb.bind(e, c) && tb.take(e.id, stateAnswered) == e
	}}
	abandon := racer{stateFailed, func(tb *table, _ *router.Session, e *entry, _ *upConn) bool {
		return tb.abandon(e)
	}}
	for _, tc := range []struct {
		name   string
		sent   bool
		racers []racer
	}{
		{"answer-cancel-expire-lose", true, []racer{answer, cancel, expire, lose}},
		{"answer-cancel", true, []racer{answer, cancel}},
		{"cancel-expire", true, []racer{cancel, expire}},
		{"answer-expire", true, []racer{answer, expire}},
		{"cancel-bind-answer", false, []racer{cancel, bindAnswer}},
		{"cancel-abandon", false, []racer{cancel, abandon}},
		{"end-answer-cancel-expire", true, []racer{end, answer, cancel, expire}},
		{"end-bind-answer", false, []racer{end, bindAnswer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, c := newTable(), testConn()
			sess := new(router.Session)
			for r := 0; r < rounds; r++ {
				e := request(sess, strconv.Itoa(r))
				e.deadline = 1
				tb.add(e)
				if tc.sent {
					tb.bind(e, c)
				}
				start := make(chan struct{})
				wins := make([]bool, len(tc.racers))
				var wg sync.WaitGroup
				for i, rc := range tc.racers {
					wg.Go(func() {
						<-start
						wins[i] = rc.run(tb, sess, e, c)
					})
				}
				close(start)
				wg.Wait()
				winners := 0
				var want entryState
				for i, w := range wins {
					if w {
						winners++
						want = tc.racers[i].state
					}
				}
				if !tc.sent && winners == 0 && e.state == stateCancelled {
					// The cancellation came first while routed: it returns nil and
					// forward (bind or abandon) loses; forward finishes it.
					winners, want = 1, stateCancelled
				}
				if winners != 1 {
					t.Fatalf("round %d: %d winners (%v), state %v", r, winners, wins, e.state)
				}
				settled(t, tb, e, want)
				if tb.len() != 0 {
					t.Fatalf("round %d: %d entries left", r, tb.len())
				}
			}
		})
	}
}

// TestTakeSession ends one session of several: its requests, sent and routed, leave the
// table as cancelled (the sent ones returned), and every other session's requests and the
// router's own requests stay.
func TestTakeSession(t *testing.T) {
	tb, c := newTable(), testConn()
	ss, es := fill(tb, c, 3, 4)
	routed := request(ss[1], "routed")
	tb.add(routed)
	own := &entry{kind: ownRequest, sess: ss[1]}
	tb.add(own)
	tb.bind(own, c)
	got := tb.takeSession(ss[1], nil)
	if len(got) != len(es[1]) {
		t.Fatalf("takeSession returned %d entries, want the session's %d sent ones", len(got), len(es[1]))
	}
	for _, e := range append(es[1], routed) {
		settled(t, tb, e, stateCancelled)
	}
	if want := 2*4 + 1; tb.len() != want {
		t.Fatalf("%d entries left, want %d (the other sessions' and the router's own)", tb.len(), want)
	}
	if own.state != stateSent {
		t.Fatalf("the router's own request is %v, want still sent", own.state)
	}
	if got := tb.takeSession(ss[1], nil); len(got) != 0 {
		t.Fatalf("a second takeSession returned %d entries", len(got))
	}
}

// TestRebind checks a failover's move of a sent request to another replica: only from
// the connection it is on, only while in flight, only when may allows it, with the
// outstanding counts moved.
func TestRebind(t *testing.T) {
	tb, from, to := newTable(), testConn(), testConn()
	yes := func(*entry) bool { return true }
	e := request(new(router.Session), "1")
	tb.add(e)
	if tb.rebind(e.id, from, to, yes) {
		t.Fatal("a routed request was rebound")
	}
	tb.bind(e, from)
	if tb.rebind(e.id, to, from, yes) {
		t.Fatal("a request was rebound from a connection it is not on")
	}
	if tb.rebind(e.id, from, to, func(*entry) bool { return false }) || e.conn != from {
		t.Fatal("a request was rebound though may said no")
	}
	if !tb.rebind(e.id, from, to, yes) || e.conn != to || from.inst.outstanding.Load() != 0 || to.inst.outstanding.Load() != 1 {
		t.Fatalf("rebind: conn moved %v, outstanding %d -> %d", e.conn == to, from.inst.outstanding.Load(), to.inst.outstanding.Load())
	}
	tb.take(e.id, stateAnswered)
	if tb.rebind(e.id, to, from, yes) {
		t.Fatal("a settled request was rebound")
	}
}

// len counts every entry in the table, in any state, the router's own requests too.
func (t *table) len() int { return t.count(func(*entry) bool { return true }) }

// TestClientsLeavesOwnRequestsOut: what a shutdown waits for (Fleet.InFlight) counts
// the clients' requests only, not a long-lived own request such as a 2026-07-28
// backend's subscriptions/listen stream.
func TestClientsLeavesOwnRequestsOut(t *testing.T) {
	tb := newTable()
	own := &entry{kind: ownRequest, wait: make(chan []byte, 1)}
	tb.add(own)
	sess := new(router.Session)
	e := request(sess, "1")
	e.backend = &backend{}
	tb.add(e)
	if n := tb.clients(); n != 1 {
		t.Fatalf("clients() = %d with one client request and one own, want 1", n)
	}
	tb.take(own.id, stateAnswered)
	if n := tb.clients(); n != 1 {
		t.Fatalf("clients() = %d after the own request ended, want 1", n)
	}
	tb.takeClient(sess, []byte("1")) // cancelled while routed: no answer to wait for (TestHandedOver)
	if n, all := tb.clients(), tb.len(); n != 0 || all != 0 {
		t.Fatalf("clients() = %d, %d entries left, want none", n, all)
	}
}

// TestHandedOver: a settled client request counts until its taker hands it over, once;
// the router's own requests and entries that never left a table count for nothing.
func TestHandedOver(t *testing.T) {
	tb := newTable()
	tb.signalDrains(new(drainSignal))
	e := request(new(router.Session), "1")
	tb.handedOver(e) // never added: nothing to give back
	if n := tb.clients(); n != 0 {
		t.Fatalf("clients() = %d after handing over a request never added, want 0", n)
	}
	tb.add(e)
	tb.handedOver(e) // still in the table: not settled
	if n := tb.clients(); n != 1 {
		t.Fatalf("clients() = %d after handing over a request in the table, want 1", n)
	}
	for _, to := range []entryState{stateAnswered, stateCancelled, stateExpired, stateFailed} {
		e.state = stateSent
		tb.take(e.id, to)
		if n := tb.clients(); n != 1 {
			t.Fatalf("clients() = %d once settled %v, want 1 (its answer is on the way)", n, to)
		}
		tb.handedOver(e)
		if n := tb.clients(); n != 0 {
			t.Fatalf("clients() = %d once handed over from %v, want 0", n, to)
		}
		e.state = stateFree
		tb.add(e)
	}
	// Cancelled while routed: no answer to wait for, and its forward may never run.
	routed := request(new(router.Session), "2")
	tb.add(routed)
	tb.takeClient(routed.sess, []byte("2"))
	if n := tb.clients(); n != 1 {
		t.Fatalf("clients() = %d after a routed request was cancelled, want 1 (only the first)", n)
	}
	tb.handedOver(routed)
	tb.handedOver(e) // a second hand-over of e is nothing
	if n := tb.clients(); n != 1 {
		t.Fatalf("clients() = %d after handing over entries counted for nothing, want 1", n)
	}
	own := &entry{kind: ownRequest, wait: make(chan []byte, 1)}
	tb.add(own)
	tb.take(own.id, stateAnswered)
	tb.handedOver(own)
	if n := tb.clients(); n != 1 {
		t.Fatalf("clients() = %d after an own request was handed over, want 1 (the client request left in the table)", n)
	}
}

// TestWaitIdle: the shutdown's wait for the fleet's calls wakes when the last client
// request's answer is handed over (each settle and handedOver pokes it), not when it
// leaves the table (the answer would then be lost to a shutdown closing its stream), not
// by polling; the router's own
// requests are not waited for; and the wait gives up when its context ends first.
func TestWaitIdle(t *testing.T) {
	f := New(Config{})
	t.Cleanup(f.Close)
	c := testConn()
	sess := new(router.Session)
	var es []*entry
	for i := range 3 {
		e := request(sess, strconv.Itoa(i+1))
		f.table.add(e)
		f.table.bind(e, c)
		es = append(es, e)
	}
	own := &entry{kind: ownRequest, conn: c} // the router's own: never waited for
	f.table.add(own)
	t.Cleanup(func() { f.table.take(own.id, stateAnswered) }) // before Close answers it

	// busy: WaitIdle, given 20ms, finds the fleet not idle. A bounded call rather than a
	// look at a waiting goroutine, which may not have looked at the count yet.
	busy := func(why string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if f.WaitIdle(ctx) {
			t.Fatal("WaitIdle returned true " + why)
		}
	}
	busy("with requests in flight")

	done := make(chan bool, 1)
	go func() { done <- f.WaitIdle(context.Background()) }()
	f.table.take(es[0].id, stateAnswered)
	f.table.takeClient(sess, es[1].x.Msg.ID)
	busy("with a request still in flight")
	f.table.take(es[2].id, stateFailed)
	busy("with answers taken out of the table and not yet delivered")
	select {
	case <-done:
		t.Fatal("the waiting WaitIdle returned before the answers were handed over")
	default:
	}
	for _, e := range es {
		f.table.handedOver(e)
	}
	if !testwait.Recv(t, "WaitIdle once the last answer was handed over", 20*time.Second, done) {
		t.Fatal("WaitIdle returned false")
	}
}
