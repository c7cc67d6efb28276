package fleet

import (
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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

	// clientID is the client's request id (x.Msg.ID, borrowed as a string); "" for the
	// router's own requests. clientHash (of the session and clientID) is the entry's key
	// in its shard's byClient index, and sameHash the next entry under the same key.
	clientID   string
	clientHash uint64
	sameHash   *entry

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
//
// A client's requests all live in the shard of their session (the shard is the low bits
// of the id), so that each shard can also index its entries by (session, client id) under
// the same lock: a cancellation finds its request at once, whatever is in flight. The
// index is keyed by a hash of both (a uint64 key is the map's fast path); entries whose
// hashes collide are chained through sameHash, newest first. Invariants, kept by add and
// remove alone: an entry is in the index's chains exactly while m[e.id] == e; it leaves
// both under one lock hold.
type table struct {
	next   atomic.Uint64
	shards [numShards]tableShard
}

const (
	shardBits = 6
	numShards = 1 << shardBits
)

type tableShard struct {
	mu       sync.Mutex
	m        map[uint64]*entry
	byClient map[uint64]*entry
}

// clientSeed keys clientHash; it only needs to be fixed for the process's life.
var clientSeed = maphash.MakeSeed()

// clientHash hashes a client's request name: its session and its id as written.
func clientHash(s *router.Session, id string) uint64 {
	return maphash.String(clientSeed, id) ^ uint64(uintptr(unsafe.Pointer(s)))*0x9e3779b97f4a7c15
}

func newTable() *table {
	t := &table{}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]*entry)
		t.shards[i].byClient = make(map[uint64]*entry)
	}
	return t
}

// sessionShard spreads sessions over the shards by their address (Go never moves heap
// objects, so it is stable for the session's life).
func sessionShard(s *router.Session) uint64 {
	p := uint64(uintptr(unsafe.Pointer(s)))
	return (p>>4 ^ p>>10 ^ p>>16) & (numShards - 1)
}

func (t *table) shard(id uint64) *tableShard { return &t.shards[id&(numShards-1)] }

// add gives e a fresh id, in its session's shard for a client's request, and records it.
func (t *table) add(e *entry) {
	n := t.next.Add(1)
	sh := n & (numShards - 1)
	if e.x != nil && e.sess != nil && len(e.x.Msg.ID) > 0 {
		sh = sessionShard(e.sess)
		// The id's bytes stay valid while the entry is in the table: the exchange is
		// finished only by whoever took the entry out.
		e.clientID = unsafe.String(&e.x.Msg.ID[0], len(e.x.Msg.ID))
		e.clientHash = clientHash(e.sess, e.clientID)
	}
	e.id = n<<shardBits | sh
	s := &t.shards[sh]
	s.mu.Lock()
	s.m[e.id] = e
	if e.clientID != "" {
		// Newest first: a client reusing the id of a request still in flight (which
		// breaks JSON-RPC) cancels the newer one.
		e.sameHash = s.byClient[e.clientHash]
		s.byClient[e.clientHash] = e
	}
	s.mu.Unlock()
}

// remove deletes e from the shard and its index; the caller holds sh.mu.
func (sh *tableShard) remove(e *entry) {
	delete(sh.m, e.id)
	if e.clientID == "" {
		return
	}
	head := sh.byClient[e.clientHash]
	switch {
	case head == e && e.sameHash == nil:
		delete(sh.byClient, e.clientHash)
	case head == e:
		sh.byClient[e.clientHash] = e.sameHash
	default:
		for p := head; p != nil; p = p.sameHash {
			if p.sameHash == e {
				p.sameHash = e.sameHash
				break
			}
		}
	}
	e.sameHash = nil
}

// byClientID finds the session's request with the client id; the caller holds sh.mu.
func (sh *tableShard) byClientID(sess *router.Session, id []byte) *entry {
	for e := sh.byClient[clientHash(sess, string(id))]; e != nil; e = e.sameHash {
		if e.sess == sess && e.clientID == string(id) {
			return e
		}
	}
	return nil
}

// take removes and returns the entry with the given id; nil when someone else took it.
func (t *table) take(id uint64) *entry {
	sh := t.shard(id)
	sh.mu.Lock()
	e := sh.m[id]
	if e != nil {
		sh.remove(e)
	}
	sh.mu.Unlock()
	return e
}

// peek returns the entry without removing it.
func (t *table) peek(id uint64) *entry {
	sh := t.shard(id)
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
		for _, e := range sh.m {
			if e.deadline != 0 && e.deadline < now && (e.bound || e.x == nil) {
				sh.remove(e)
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
		for _, e := range sh.m {
			if e.conn == c {
				sh.remove(e)
				out = append(out, e)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// takeClient removes and returns the session's request whose client id is clientID
// (cancellation), found through the shard's index. A request not sent yet is only
// marked cancelled, for forward to finish (see entry.bound), and nil is returned.
func (t *table) takeClient(sess *router.Session, clientID []byte) *entry {
	sh := &t.shards[sessionShard(sess)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.byClientID(sess, clientID)
	if e == nil {
		return nil
	}
	if !e.bound {
		e.cancelled = true
		return nil
	}
	sh.remove(e)
	return e
}

// bind moves e from routed to sent, under its shard's lock, unless it was cancelled or
// taken meanwhile: it records the upstream session and the slot e holds (read by the
// table's scans and by whoever takes e) and calls build, which may still read e and its
// exchange, since nobody can take e while the lock is held. A cancelled entry is removed
// and reported so: the caller finishes it.
func (t *table) bind(e *entry, c *upConn, build func()) (bound, cancelled bool) {
	sh := t.shard(e.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[e.id] != e {
		return false, false
	}
	if e.cancelled {
		sh.remove(e)
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
	sh := t.shard(id)
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
	sh := t.shard(id)
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
