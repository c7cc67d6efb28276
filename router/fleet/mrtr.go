package fleet

import (
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// A 2026-07-28 client in front of a 2025 backend (issue 12's translation): the backend
// asks the client something (sampling, elicitation, roots) while handling the client's
// request, but the revision has no server-to-client requests. The router parks the
// request instead: it stays in flight upstream, its entry keeps no exchange, and the
// client is answered an input_required result whose requestState (sealed by
// modern.Sealer: bound to the principal, the original request's digest and a TTL)
// names this process, the entry and the round. The client's retry with inputResponses
// is opened in routing (resume), the answer goes to the backend under its own id, and
// the retry's exchange takes the entry over: it gets the result, or the next
// input_required. A parked request no retry claims within its TTL is cancelled
// upstream; a principal has at most max of them parked.
//
// One backend request at a time: a second one while the request is parked is refused
// to the backend (a client answers one round before the next). A retry that lands on
// another router process fails to open (each process seals with its own key) and is
// refused with invalid params; forwarding it to the owner is not built.

// parking is the book of parked requests. Who calls it: park from serverRequests on an
// upstream connection's reader goroutine, resume from routing (Prepare, the retry's
// order), expire on a timer's goroutine, cancelResumed from CancelRequest. Its lock is
// held for no I/O; the table's shard lock decides who owns an entry.
type parking struct {
	srv      *serverRequests // answers backends
	life     *lifecycle
	table    *table
	fwd      *forwarder
	stats    *Stats
	sealer   *modern.Sealer
	instance [8]byte // random: this process, in every state it seals
	max      int     // per principal (Config.MaxServerRequests)

	mu      sync.Mutex
	seq     uint64
	m       map[uint64]*parked // by entry id
	byPrinc map[string]int
}

// parked is one request waiting for its client's retry.
type parked struct {
	entryID   uint64
	seq       uint64 // the round: a state of an earlier round no longer claims it
	conn      *upConn
	backendID []byte // the backend's request the retry answers
	key       string // its key in inputRequests
	method    string
	principal string
	timer     *time.Timer
}

// payloadSize is the sealed payload: instance | entry id | round.
const payloadSize = 8 + 8 + 8

// statePrefix starts every requestState the router seals (the sealed part is base64url,
// which has no colon): a retry carrying any other state answers a 2026-07-28 backend's
// own input_required and goes to that backend untouched.
const statePrefix = "mcprouter:"

// ours reports whether state (a retry's requestState) is one the router sealed.
func ours(state []byte) bool {
	return len(state) > len(statePrefix) && string(state[:len(statePrefix)]) == statePrefix
}

func newParking(srv *serverRequests, fwd *forwarder) *parking {
	key := make([]byte, 32)
	rand.Read(key)
	sealer, err := modern.NewSealer(key)
	if err != nil {
		panic(err) // 32 bytes: cannot fail
	}
	p := &parking{srv: srv, life: srv.life, table: srv.table, fwd: fwd, stats: srv.stats, sealer: sealer, max: srv.max,
		m: map[uint64]*parked{}, byPrinc: map[string]int{}}
	rand.Read(p.instance[:])
	return p
}

// principalKey names the principal a state is bound to ("" when anonymous).
func principalKey(p *auth.Principal) string {
	if p == nil {
		return ""
	}
	return p.Issuer + "\x00" + p.Subject
}

// park turns backend request m (raw msg) on c, made while handling the stateless
// client request relID, into an input_required answer to that client; false when relID
// is not a stateless request in flight (the caller refuses the backend's request).
func (p *parking) park(c *upConn, relID uint64, m *codec.Message, ttl time.Duration) bool {
	var principal string
	var done entry // what the Observer is told of the answered round
	full := false
	x := p.table.park(relID, func(e *entry) bool {
		done = entry{kind: clientRequest, backend: e.backend, start: e.start, sent: e.sent}
		principal = principalKey(e.x.Principal)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.byPrinc[principal] >= p.max {
			full = true
			return false
		}
		p.byPrinc[principal]++
		return true
	})
	if x == nil {
		if full {
			p.srv.answer(c, codec.AppendError(nil, m.ID, CodeSessionLimit, "mcprouter: the client already has "+strconv.Itoa(p.max)+" requests waiting for its input; "+string(m.Method)+" refused", nil))
			return true
		}
		return false
	}
	p.mu.Lock()
	p.seq++
	pk := &parked{entryID: relID, seq: p.seq, conn: c, backendID: append([]byte(nil), m.ID...),
		key: "input-" + strconv.FormatUint(p.seq, 10), method: string(m.Method), principal: principal}
	p.m[relID] = pk
	pk.timer = time.AfterFunc(ttl, func() { p.expire(relID, pk) })
	p.mu.Unlock()

	var payload [payloadSize]byte
	copy(payload[:8], p.instance[:])
	binary.BigEndian.PutUint64(payload[8:16], relID)
	binary.BigEndian.PutUint64(payload[16:], pk.seq)
	state := statePrefix + p.sealer.Seal(payload[:], principal, modern.RequestDigest(&x.Msg), ttl)
	res := modern.AppendInputRequired(nil, []modern.InputRequest{{Key: pk.key, Method: pk.method, Params: m.Params}}, state)
	if p.fwd.rep.on() {
		done.x, done.recv = x, router.Now()
		p.fwd.rep.done(&done, router.OutcomeOK)
	}
	x.Tag = nil
	x.Reply(codec.AppendResult(nil, x.Msg.ID, res))
	return true
}

// resume takes a stateless client's retry carrying a requestState of the router's
// (ours), in Prepare: the state is opened, the answer goes to the waiting backend
// request and x takes the parked request over. Always false: x is answered here or by the request's settlement.
func (p *parking) resume(s *router.Session, x *transport.Exchange, state []byte, rep *reporter) bool {
	payload, err := p.sealer.Open(state[len(statePrefix):], principalKey(x.Principal), modern.RequestDigest(&x.Msg))
	if err != nil {
		rej := modern.RejectState(err)
		x.SetStatus(rej.Status)
		return rep.replyErr(x, rej.Code, rej.Message)
	}
	if len(payload) != payloadSize || [8]byte(payload[:8]) != p.instance {
		x.SetStatus(http.StatusBadRequest)
		return rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: requestState belongs to another router instance (forwarding retries between instances is not supported)")
	}
	id, seq := binary.BigEndian.Uint64(payload[8:16]), binary.BigEndian.Uint64(payload[16:])
	p.mu.Lock()
	pk := p.m[id]
	if pk == nil || pk.seq != seq {
		p.mu.Unlock()
		x.SetStatus(http.StatusBadRequest)
		return rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: requestState was answered already or its request ended: send the original request again, without requestState")
	}
	answer := modern.InputResponse(x.Msg.Params, pk.key)
	if answer == nil {
		p.mu.Unlock()
		x.SetStatus(http.StatusBadRequest)
		return rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: inputResponses has no answer for "+strconv.Quote(pk.key)+" ("+pk.method+")")
	}
	p.dropLocked(pk)
	p.mu.Unlock()
	var start int64
	if rep.on() {
		start = router.Started(x) // before x.Tag changes hands
	}
	if !p.table.claim(id, s, x, start) {
		// Settled meanwhile (its connection was lost, the router is closing).
		return rep.replyErr(x, CodeBackendUnavailable, "backend request ended while waiting for input")
	}
	p.srv.answer(pk.conn, codec.AppendResult(nil, pk.backendID, answer))
	return false
}

// dropLocked forgets pk; the caller holds p.mu.
func (p *parking) dropLocked(pk *parked) {
	delete(p.m, pk.entryID)
	pk.timer.Stop()
	if p.byPrinc[pk.principal]--; p.byPrinc[pk.principal] <= 0 {
		delete(p.byPrinc, pk.principal)
	}
}

// expire ends pk when no retry claimed it in time: the backend's request is refused,
// the client's request cancelled upstream, and the entry released.
func (p *parking) expire(id uint64, pk *parked) {
	p.mu.Lock()
	if p.m[id] != pk {
		p.mu.Unlock()
		return
	}
	p.dropLocked(pk)
	p.mu.Unlock()
	e := p.table.takeParked(id)
	if e == nil {
		return
	}
	p.stats.ServerRequestsExpired.Add(1)
	if !p.life.ended() {
		p.srv.answer(pk.conn, codec.AppendError(nil, pk.backendID, CodeClientTimeout, "mcprouter: the client did not retry with an answer to "+pk.method+" in time", nil))
		p.fwd.tellCancelled(e.conn, e.id)
	}
	p.fwd.release(e)
}

// cancelResumed cancels the resumed request whose retry was x's request id of
// stateless session s: its index lives in the shard of the first request's session,
// so the forwarder's lookup (the retry's session's shard) may miss it.
func (p *parking) cancelResumed(s *router.Session, clientID []byte) {
	for i := range p.table.shards {
		sh := &p.table.shards[i]
		sh.mu.Lock()
		e := sh.byClientID(s, clientID)
		if e != nil && e.state == stateSent {
			sh.settle(e, stateCancelled)
		} else {
			e = nil
		}
		sh.mu.Unlock()
		if e != nil {
			p.fwd.tellCancelled(e.conn, e.id)
			p.fwd.finishCancelled(e)
			return
		}
	}
}

// park moves the sent stateless client request id to parked when may (called under the
// shard lock) allows it, and returns its exchange, which the caller answers; nil when
// id is not such a request.
func (t *table) park(id uint64, may func(e *entry) bool) *transport.Exchange {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateSent || e.kind != clientRequest || e.x == nil || !e.x.Stateless || !may(e) {
		return nil
	}
	sh.unindex(e)
	x := e.x
	e.state, e.x, e.sess = stateParked, nil, nil
	e.clientID, e.clientHash = "", 0
	e.progress, e.origToken = false, nil // views into x's bytes
	return x
}

// claim gives parked request id to the retry x of stateless session s, which the router
// received at start (0: no Observer): it is sent again, with a fresh deadline, indexed
// under the retry's id. false when it is no
// longer parked.
func (t *table) claim(id uint64, s *router.Session, x *transport.Exchange, start int64) bool {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateParked {
		return false
	}
	e.x, e.sess, e.state = x, s, stateSent
	e.deadline = deadlineIn(e.backend.cfg.Timeout)
	e.start, e.sent, e.recv = start, 0, 0 // the retry's timings: the Observer sees router time
	if tok := x.Msg.ProgressToken; tok != nil {
		e.progress, e.origToken = true, tok
	}
	if len(x.Msg.ID) > 0 {
		e.clientID = string(x.Msg.ID)
		e.clientHash = clientHash(s, e.clientID)
		e.sameHash = sh.byClient[e.clientHash]
		sh.byClient[e.clientHash] = e
	}
	x.Tag = e
	return true
}

// takeParked settles parked request id as expired and returns it; nil when it is not
// parked.
func (t *table) takeParked(id uint64) *entry {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	if e == nil || e.state != stateParked {
		return nil
	}
	sh.settle(e, stateExpired)
	return e
}

// parked reports whether request id is parked.
func (t *table) parked(id uint64) bool {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.m[id]
	return e != nil && e.state == stateParked
}

// count is the number of parked requests.
func (p *parking) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
