package fleet

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// The in-flight table: every request sent to a backend and not yet settled, keyed by
// the id the backend sees, with the cancellation index of client requests.
//
// Design. An entry moves through named states, each transition made under its shard's
// lock by one method of table, so that exactly one party settles it:
//
//	routed ──bind──▶ sent ──take (an answer)──────────▶ answered
//	  │                ├──takeClient, takeSession────▶ cancelled
//	  │                ├──expired, take (send timeout)─▶ expired
//	  │                ├──takeConn, takeAll, take─────▶ failed
//	  │                └──park──▶ parked ──claim (the client's retry)──▶ sent
//	  │                             └──takeParked (its TTL, the router's close)──▶ expired
//	  ├──takeClient, takeSession──▶ cancelled (out of the table; forward finishes it)
//	  └──abandon─────▶ failed
//
// A parked entry (a stateless client's request answered with input_required, its
// backend waiting for the client's retry: mrtr.go, mrtr_table.go) has no exchange and
// no client index; only claim and takeParked move it (TestParkedEntry).
//
// While an entry is routed, the request's Run (forward) owns its exchange and builds the
// bytes to send from it, outside the lock; nobody else may complete it. Once sent,
// whoever moves it to a terminal state (and only they) completes it: answers the client,
// releases the slot, recycles the entry. Until they have (handedOver, from the
// forwarder's release), a client's settled request still counts as in flight: a
// shutdown that waits for the fleet's calls then closes the clients' streams only once
// every answer is in them. The router's own requests (catalog fetches,
// handshakes, pings) enter as sent (table.call). The table is written by the forwarder
// (track, forward, backend responses, cancellation, the sweeper goroutine, lost
// connections) and by table.call, read by serverRequests and notices to find the request
// a backend's message belongs to; it never blocks and does no I/O.

// entryKind says whose request an entry is.
type entryKind uint8

const (
	// clientRequest is a client's request forwarded to a backend: x is its exchange.
	clientRequest entryKind = iota + 1
	// ownRequest is one of the router's own requests: wait receives the raw answer.
	ownRequest
)

// entryState is where an entry is in its life; see the table's design above.
type entryState uint8

const (
	stateFree      entryState = iota // not in a table (pooled or being built)
	stateRouted                      // in the table, not sent: forward owns the exchange
	stateSent                        // in the table, handed to an upstream session
	stateAnswered                    // left: the backend answered
	stateCancelled                   // left: the client cancelled
	stateExpired                     // left: its deadline passed
	stateFailed                      // left: not sent, send failed or connection lost
	// stateParked: in the table, sent, its exchange answered with input_required while
	// the backend waits for the client's retry (mrtr.go); no exchange, no client index.
	stateParked
)

var stateNames = [...]string{"free", "routed", "sent", "answered", "cancelled", "expired", "failed", "parked"}

func (s entryState) String() string { return stateNames[s] }

// entry is one request forwarded to a backend and not yet settled.
type entry struct {
	id       uint64 // the id the backend sees; also the progress token it sees
	kind     entryKind
	state    entryState // read and written under the shard lock while in the table
	sess     *router.Session
	x        *transport.Exchange // clientRequest: the client's exchange
	backend  *backend
	conn     *upConn // set when sent
	deadline int64   // unix nanoseconds

	// progress is true when the client asked for progress: the request's progressToken
	// was rewritten to id, and progress notifications go back to x.
	progress bool
	// handing: settled, and counted in its shard's handing until handedOver (settle).
	handing bool
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

	// heard: a message of the backend's about this request reached it (progress,
	// logging, a request to the client, through with): the backend has the request, and
	// its client may have heard of it, so it is never sent again (forward_retry.go).
	heard bool

	// stop, for a request sent to a 2026-07-28 backend, cancels its Send: closing the
	// request's stream is how that revision cancels a request (era.go).
	stop func()

	// inline: forward runs on the client request's own goroutine (Fleet.RunsOnCaller).
	inline bool

	// wait receives the raw response of an ownRequest; closed when none will come.
	wait chan []byte

	// Timings for the Observer (router.Now clock), taken only when there is one: when
	// the router received the request, when forward handed it to the upstream session,
	// and when the backend's answer was taken.
	start, sent, recv int64
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
	next    atomic.Uint64
	shards  [numShards]tableShard
	drained *drainSignal // what the shards poke, poked again by handedOver
}

const (
	shardBits = 6
	numShards = 1 << shardBits
)

type tableShard struct {
	mu       sync.Mutex
	m        map[uint64]*entry
	byClient map[uint64]*entry
	clients  int // entries of m that are clients' requests
	// drained is poked when clients goes down (nil in a table made without one):
	// what Fleet.WaitIdle waits on.
	drained *drainSignal
	// handing counts the shard's clients' requests settled and not yet handed over
	// (handedOver): their answers are on the way to their clients. clients() counts
	// them, so that a shutdown (Fleet.WaitIdle) does not close the clients' streams
	// between a request's settle and its answer's delivery: that answer would be lost.
	// Raised under mu with clients' fall, lowered without it (one atomic a call, in
	// the request's own shard: no line shared by every call).
	handing atomic.Int64
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

// signalDrains makes every shard poke d when a client request leaves it (WaitIdle). New
// calls it before the table is used.
func (t *table) signalDrains(d *drainSignal) {
	t.drained = d
	for i := range t.shards {
		t.shards[i].drained = d
	}
}

// sessionShard spreads sessions over the shards by their address (Go never moves heap
// objects, so it is stable for the session's life).
func sessionShard(s *router.Session) uint64 {
	p := uint64(uintptr(unsafe.Pointer(s)))
	return (p>>4 ^ p>>10 ^ p>>16) & (numShards - 1)
}

func (t *table) shard(id uint64) *tableShard { return &t.shards[id&(numShards-1)] }

// add gives e a fresh id, in its session's shard for a client's request, and records
// it: a clientRequest as routed, an ownRequest (whose conn the caller set) as sent.
func (t *table) add(e *entry) {
	n := t.next.Add(1)
	sh := n & (numShards - 1)
	e.state = stateSent
	if e.kind == clientRequest {
		e.state = stateRouted
		if e.sess != nil && len(e.x.Msg.ID) > 0 {
			sh = sessionShard(e.sess)
			// The id's bytes stay valid while the entry is in the table: the exchange
			// is finished only by whoever took the entry out.
			e.clientID = unsafe.String(&e.x.Msg.ID[0], len(e.x.Msg.ID))
			e.clientHash = clientHash(e.sess, e.clientID)
		}
	}
	e.id = n<<shardBits | sh
	s := &t.shards[sh]
	s.mu.Lock()
	s.m[e.id] = e
	if e.kind == clientRequest {
		s.clients++
	}
	if e.clientID != "" {
		// Newest first: a client reusing the id of a request still in flight (which
		// breaks JSON-RPC) cancels the newer one.
		e.sameHash = s.byClient[e.clientHash]
		s.byClient[e.clientHash] = e
	}
	s.mu.Unlock()
}

// settle takes e out of the shard and its index into the terminal state to; the caller
// holds sh.mu. It is the only way out of the table, so it is where the waits for
// clients' calls to end are woken: a shutdown's (sh.drained) and a retired backend's
// (its drained). The router's own requests wake neither: nobody waits for them, they
// fail when their connection closes. A client's request counts as handing until whoever
// took it has delivered its answer (handedOver), except one cancelled while routed: it
// gets no answer, and its forward, which finishes it, may never run (a job that failed
// between Prepare and Run: workers.Job), so nothing would ever hand it over.
func (sh *tableShard) settle(e *entry, to entryState) {
	from := e.state
	e.state = to
	delete(sh.m, e.id)
	if e.kind == clientRequest {
		if from != stateRouted || to != stateCancelled {
			e.handing = true
			sh.handing.Add(1) // with clients' fall, under mu: a count never misses e
		}
		sh.clients--
		sh.drained.poke()
		if b := e.backend; b != nil {
			b.drained.poke()
		}
	}
	sh.unindex(e)
}

// unindex takes e out of the shard's client index; the caller holds sh.mu.
func (sh *tableShard) unindex(e *entry) {
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

// take settles the sent entry with the given id into state to (answered for a backend's
// response; expired or failed for a send that failed) and returns it; nil when it is
// not in flight or not sent yet (a routed entry belongs to forward).
func (t *table) take(id uint64, to entryState) *entry {
	sh := t.shard(id)
	sh.mu.Lock()
	e := sh.m[id]
	if e != nil && e.state == stateSent {
		sh.settle(e, to)
	} else {
		e = nil
	}
	sh.mu.Unlock()
	return e
}

// expired settles and returns the sent entries whose deadline is before now. Routed ones
// are left to forward, whose send fails on the passed deadline.
func (t *table) expired(now int64, out []*entry) []*entry {
	return t.sweep(out, stateExpired, func(e *entry) bool { return e.deadline != 0 && e.deadline < now })
}

// takeAll settles as failed and returns every sent entry (shutdown).
func (t *table) takeAll(out []*entry) []*entry {
	return t.sweep(out, stateFailed, func(*entry) bool { return true })
}

// takeConn settles as failed and returns every entry sent on c (it died).
func (t *table) takeConn(c *upConn, out []*entry) []*entry {
	return t.sweep(out, stateFailed, func(e *entry) bool { return e.conn == c })
}

// sweep settles into state to, and appends to out, every sent entry that match selects.
func (t *table) sweep(out []*entry, to entryState, match func(*entry) bool) []*entry {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if e.state == stateSent && match(e) {
				sh.settle(e, to)
				out = append(out, e)
			}
		}
		sh.mu.Unlock()
	}
	return out
}

// count counts the entries in the table, in any state, that match selects, under each
// shard's lock in turn (so not at one instant); match must not block.
func (t *table) count(match func(*entry) bool) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if match(e) {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// takeClient cancels the session's request whose client id is clientID, found through
// the shard's index. A sent request is settled and returned for the caller to finish; a
// routed one leaves the table too, but nil is returned: forward owns it and finishes it
// when bind or abandon reports the cancellation.
func (t *table) takeClient(sess *router.Session, clientID []byte) *entry {
	sh := &t.shards[sessionShard(sess)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.byClientID(sess, clientID)
	if e == nil {
		return nil
	}
	routed := e.state == stateRouted
	sh.settle(e, stateCancelled)
	if routed {
		return nil
	}
	return e
}

// takeSession cancels every request of session sess still in the table (its client
// session ended: nobody is left to take the answers). They all live in the session's
// shard, so only that one is searched. Sent ones are settled and appended to out for the
// caller to finish; routed ones leave the table too and forward finishes them, as after
// takeClient.
func (t *table) takeSession(sess *router.Session, out []*entry) []*entry {
	sh := &t.shards[sessionShard(sess)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.clients == 0 {
		return out
	}
	for _, e := range sh.m {
		if e.kind != clientRequest || e.sess != sess || (e.state != stateSent && e.state != stateRouted) {
			continue
		}
		sent := e.state == stateSent
		sh.settle(e, stateCancelled)
		if sent {
			out = append(out, e)
		}
	}
	return out
}

// bind moves routed e to sent on c, recording the backend slot and the instance's
// outstanding count that e now holds. false when e was cancelled meanwhile: the caller,
// which still owns it, finishes it. From true on, e belongs to whoever settles it.
func (t *table) bind(e *entry, c *upConn) bool {
	sh := t.shard(e.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e.state != stateRouted {
		return false
	}
	e.conn, e.state = c, stateSent
	c.inst.outstanding.Add(1)
	return true
}

// abandon settles routed e as failed: forward could not send it. false when it was
// cancelled meanwhile (the caller finishes it as cancelled).
func (t *table) abandon(e *entry) bool {
	sh := t.shard(e.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e.state != stateRouted {
		return false
	}
	sh.settle(e, stateFailed)
	return true
}

// rebind moves a sent client request from conn from to conn to (a failover to another
// replica, forward_retry.go) if may, called with the entry under its shard's lock,
// allows it; false when the entry was settled or moved meanwhile, or may said no.
func (t *table) rebind(id uint64, from, to *upConn, may func(e *entry) bool) bool {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateSent || e.kind != clientRequest || e.conn != from || !may(e) {
		return false
	}
	e.conn = to
	from.inst.outstanding.Add(-1)
	to.inst.outstanding.Add(1)
	return true
}

// with calls fn with the sent client request id while it cannot be settled (its shard is
// locked), so that fn may use the entry's exchange safely. fn must not block. It is how
// a backend's message about the request reaches it, so the entry is marked heard.
func (t *table) with(id uint64, fn func(e *entry)) bool {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateSent || e.kind != clientRequest {
		return false
	}
	e.heard = true
	fn(e)
	return true
}

// onConn returns the id of the only client request sent on c, or 0 if there are none or
// several.
func (t *table) onConn(c *upConn) uint64 {
	var found uint64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for id, e := range sh.m {
			if e.conn == c && e.kind == clientRequest && e.state == stateSent {
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

// busyConns is the set of upstream sessions some request (a client's or the router's
// own) is in flight on.
func (t *table) busyConns() map[*upConn]bool {
	busy := map[*upConn]bool{}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if e.conn != nil {
				busy[e.conn] = true
			}
		}
		sh.mu.Unlock()
	}
	return busy
}

// clients counts the clients' requests in flight: in the table, or settled with their
// answers not yet delivered (handing). The router's own requests are left out: a
// 2026-07-28 backend's subscriptions/listen stream stays in the table for the
// connection's life, and a shutdown that waited for it waited out its whole grace.
func (t *table) clients() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += sh.clients + int(sh.handing.Load())
		sh.mu.Unlock()
	}
	return n
}

// handedOver tells the table that whoever took e out (settle) is done with it: its
// client has its answer, or never gets one (a cancellation). The taker calls it after
// the delivery (forwarder.release); it wakes the shutdown's wait. An entry settle did not
// count, or one handed over already, changes nothing.
func (t *table) handedOver(e *entry) {
	if !e.handing {
		return
	}
	e.handing = false
	t.shard(e.id).handing.Add(-1)
	t.drained.poke()
}

// parseID reads one of our numeric ids from a raw JSON id token.
func parseID(raw []byte) (uint64, bool) {
	if len(raw) > 1 && raw[0] == '"' { // a backend that stringified our id
		raw = raw[1 : len(raw)-1]
	}
	return codec.ParseUintID(raw)
}

func deadlineIn(d time.Duration) int64 { return time.Now().Add(d).UnixNano() }

// related finds the in-flight request a backend message belongs to: the request on
// whose reply stream it came (reqID, as the backend saw it), else the only request in
// flight on the connection; 0 when neither tells.
func (t *table) related(c *upConn, reqID []byte) uint64 {
	if reqID != nil {
		if id, ok := parseID(reqID); ok {
			return id
		}
	}
	return t.onConn(c)
}
