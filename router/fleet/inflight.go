package fleet

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// entry is one request forwarded to a backend and not yet answered: either a client's
// request (x set) or one of the router's own (catalog fetches, handshakes, pings: wait set).
//
// Whoever removes an entry from the table completes it, exactly once: the backend's
// response, a timeout, a cancellation, or the loss of the connection.
type entry struct {
	id       uint64 // the id the backend sees; also the progress token it sees
	sess     *router.Session
	x        *transport.Exchange
	backend  *backend
	conn     *upConn
	deadline int64 // unix nanoseconds

	// progress is true when the client asked for progress: the request's progressToken
	// was rewritten to id, and progress notifications go back to x.
	progress bool
	// origToken is the client's progress token, raw (quotes included for strings).
	origToken []byte

	// strip is the length of the prefix to remove from params.name.
	strip int
	// holdsSlot and counted say what release must give back.
	holdsSlot, counted bool

	// bound is set (under the shard lock, by table.bind) once forward has built the
	// bytes it sends. Until then the request's Run owns the exchange, which the
	// transport recycles once finished: a cancellation only sets cancelled and forward
	// finishes the exchange, and the sweeper leaves the entry to forward, whose send
	// fails on the passed deadline. Entries of the router's own requests (wait) are
	// never bound and never wait for forward.
	bound, cancelled bool

	// wait receives the raw response for the router's own requests.
	wait chan []byte

	// Timings for the Observer (router.Now clock), taken only when there is one: when
	// the router received the request, when it was sent to the backend (atomic: a
	// timeout may complete the entry while forward is still writing), and when the
	// backend's answer was taken.
	start int64
	sent  atomic.Int64
	recv  int64
}

// table holds the entries in flight, sharded to keep lock hold times short.
type table struct {
	next   atomic.Uint64
	shards [64]tableShard
}

type tableShard struct {
	mu sync.Mutex
	m  map[uint64]*entry
}

func newTable() *table {
	t := &table{}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]*entry)
	}
	return t
}

// add gives e a fresh id and records it.
func (t *table) add(e *entry) {
	e.id = t.next.Add(1)
	sh := &t.shards[e.id%uint64(len(t.shards))]
	sh.mu.Lock()
	sh.m[e.id] = e
	sh.mu.Unlock()
}

// take removes and returns the entry with the given id; nil when someone else took it.
func (t *table) take(id uint64) *entry {
	sh := &t.shards[id%uint64(len(t.shards))]
	sh.mu.Lock()
	e := sh.m[id]
	if e != nil {
		delete(sh.m, id)
	}
	sh.mu.Unlock()
	return e
}

// peek returns the entry without removing it.
func (t *table) peek(id uint64) *entry {
	sh := &t.shards[id%uint64(len(t.shards))]
	sh.mu.Lock()
	e := sh.m[id]
	sh.mu.Unlock()
	return e
}

// expired removes and returns the entries whose deadline is before now.
func (t *table) expired(now int64, out []*entry) []*entry {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if e.deadline != 0 && e.deadline < now && (e.bound || e.x == nil) {
				delete(sh.m, id)
				out = append(out, e)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// takeConn removes and returns every entry sent on conn (it died).
func (t *table) takeConn(c *upConn, out []*entry) []*entry {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if e.conn == c {
				delete(sh.m, id)
				out = append(out, e)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// takeClient removes and returns the session's request whose client id is clientID
// (cancellation). A request not sent yet is only marked cancelled, for forward to finish
// (see entry.bound), and nil is returned.
func (t *table) takeClient(sess *router.Session, clientID []byte) *entry {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if e.sess == sess && e.x != nil && string(e.x.Msg.ID) == string(clientID) {
				if !e.bound {
					e.cancelled = true
					sh.mu.Unlock()
					return nil
				}
				delete(sh.m, id)
				sh.mu.Unlock()
				return e
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// bind moves e from routed to sent, under its shard's lock, unless it was cancelled or
// taken meanwhile: it records the upstream session and the slot e holds (read by the
// table's scans and by whoever takes e) and calls build, which may still read e and its
// exchange, since nobody can take e while the lock is held. A cancelled entry is removed
// and reported so: the caller finishes it.
func (t *table) bind(e *entry, c *upConn, build func()) (bound, cancelled bool) {
	sh := &t.shards[e.id%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[e.id] != e {
		return false, false
	}
	if e.cancelled {
		delete(sh.m, e.id)
		return false, true
	}
	e.conn, e.holdsSlot, e.counted, e.bound = c, true, true, true
	c.inst.outstanding.Add(1)
	build()
	return true, false
}

// rebind moves a sent request from conn from to conn to (a failover to another replica);
// false when the entry was completed meanwhile.
func (t *table) rebind(id uint64, from, to *upConn) bool {
	sh := &t.shards[id%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.conn != from {
		return false
	}
	e.conn = to
	from.inst.outstanding.Add(-1)
	to.inst.outstanding.Add(1)
	return true
}

// with calls fn with the entry while it cannot be completed (its shard is locked), so
// that fn may use the entry's exchange safely. fn must not block.
func (t *table) with(id uint64, fn func(e *entry)) bool {
	sh := &t.shards[id%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil {
		return false
	}
	fn(e)
	return true
}

// onConn returns the only client request in flight on c, or nil if there are none or
// several.
func (t *table) onConn(c *upConn) uint64 {
	var found uint64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if e.conn == c && e.x != nil {
				if found != 0 {
					sh.mu.Unlock()
					return 0
				}
				found = id
			}
		}
		sh.mu.Unlock()
	}
	return found
}

// len counts entries in flight.
func (t *table) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// parseID reads one of our numeric ids from a raw JSON id token.
func parseID(raw []byte) (uint64, bool) {
	if len(raw) > 1 && raw[0] == '"' { // a backend that stringified our id
		raw = raw[1 : len(raw)-1]
	}
	n, err := strconv.ParseUint(string(raw), 10, 64) // no allocation: the compiler avoids the copy
	return n, err == nil
}

func deadlineIn(d time.Duration) int64 { return time.Now().Add(d).UnixNano() }
