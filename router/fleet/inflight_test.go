package fleet

import (
	"strconv"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// request returns an entry for a client request with the given id in sess, as track
// makes it.
func request(sess *router.Session, id string) *entry {
	x := &transport.Exchange{}
	x.Msg.ID = []byte(id)
	return &entry{sess: sess, x: x}
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
			t.bind(e, c, func() {})
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
				t.bind(e, c, func() {})
			}
		})
	}
}

// BenchmarkTableRoundTrip measures the table's part of forwarding one request: add
// (track), bind (forward) and take (the backend's response), from several sessions at
// once, with 1000 other requests in flight.
func BenchmarkTableRoundTrip(b *testing.B) {
	t, c := newTable(), testConn()
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
		for pb.Next() {
			t.add(e)
			t.bind(e, c, func() {})
			if t.take(e.id) != e {
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
	if tb.take(es[0][1].id) != es[0][1] || tb.takeClient(ss[0], []byte("1")) != nil {
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

	// Routed, not sent yet: marked cancelled, and bind removes it (from the index too).
	sess := new(router.Session)
	e := request(sess, `"a"`)
	tb.add(e)
	if tb.takeClient(sess, []byte(`"a"`)) != nil || !e.cancelled {
		t.Fatal("an unsent request was taken instead of marked cancelled")
	}
	if bound, cancelled := tb.bind(e, c, func() {}); bound || !cancelled {
		t.Fatalf("bind of a cancelled request = %v, %v; want false, true", bound, cancelled)
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
			tb.bind(e, c, func() {})
		}
		left, stays := older, newer
		if newerLeaves {
			left, stays = newer, older
		}
		tb.take(left.id)
		if got := tb.takeClient(sess, []byte("5")); got != stays {
			t.Fatalf("reused id, newer left first %v: takeClient = %p, want %p", newerLeaves, got, stays)
		}
	}
	if sh := &tb.shards[sessionShard(sess)]; len(sh.byClient) != 0 {
		t.Fatalf("%d index keys left", len(sh.byClient))
	}

	// The router's own requests are not indexed.
	own := &entry{wait: make(chan []byte, 1)}
	tb.add(own)
	if own.clientID != "" || tb.take(own.id) != own {
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
