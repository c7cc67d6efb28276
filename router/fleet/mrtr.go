package fleet

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
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
// is opened in routing (resume), the answers go to the backend under its own ids, and
// the retry's exchange takes the entry over: it gets the result, or the next
// input_required. A parked request no retry claims within its TTL is cancelled
// upstream; a principal has at most max of them parked.
//
// Several asks for one call: a backend may ask more than one thing, in parallel (the Go
// SDK's 2025 compatibility sends every entry of its inputRequests at once) or one after
// the other. The first ask parks the call and opens a round; asks that arrive within
// gatherWindow join it, so that parallel asks reach the client in one input_required,
// as a 2026-07-28 server would have asked them. An ask that arrives after the round was
// shown waits for the next one: the retry answering the round is then answered at once
// with a new input_required (a new round, a new state) instead of taking the call over.
// The retry must answer every ask of its round.
//
// A retry that lands on another router process: the state names its owner in the
// clear. When the instances share the sealing key (Config.StateKey), this one verifies
// the state and sends the retry to the owner over the cluster's NATS bus, which answers
// it as its own (mrtr_owner.go). Without a shared key it cannot tell a good state from
// a forged one, and refuses it with invalid params, saying where it belongs.

// gatherWindow is how long a round stays open for more asks after the first: long
// enough for a backend's parallel asks (written by goroutines of the same process, a
// few microseconds apart) to join, short beside the human or model round trip that
// answers them.
const gatherWindow = 20 * time.Millisecond

// maxAsks bounds the asks one call may have waiting; a backend asking more is refused.
const maxAsks = 16

// parking is the book of parked requests. Who calls it: park and more from
// serverRequests on an upstream connection's reader goroutine, resume from routing
// (Prepare, the retry's order), show and expire on timers' goroutines, cancelResumed
// from CancelRequest. Its lock is held for no I/O; it is taken before a shard lock of
// the table, never after.
type parking struct {
	srv      *serverRequests // answers backends
	life     *lifecycle
	table    *table
	fwd      *forwarder
	stats    *Stats
	sealer   *modern.Sealer
	shared   bool        // sealer's key is the cluster's (Config.StateKey)
	relay    *ownerRelay // retries of states other instances own (nil: no bus)
	instance [8]byte     // random: this process, in every state it seals
	max      int         // per principal (Config.MaxServerRequests)
	gather   time.Duration

	mu      sync.Mutex
	seq     uint64
	m       map[uint64]*parked // by entry id
	byPrinc map[string]int
	closing bool // endAll ran: the router is closing, and nothing parks now
}

// parked is one call waiting for its client's retry.
type parked struct {
	entryID   uint64
	seq       uint64 // the round shown: a state of an earlier round no longer claims it
	conn      *upConn
	principal string
	digest    modern.Digest // of the original request, sealed in every round's state
	caps      []byte        // the client's capabilities, for the asks that follow
	shown     []ask         // the round the client was shown (or is gathering)
	next      []ask         // asks that came after it was shown
	x         *transport.Exchange
	done      entry // what the Observer is told when x is answered
	ttl       time.Duration
	timer     *time.Timer
}

// ask is one backend request waiting for the client's answer.
type ask struct {
	key       string
	method    string
	backendID []byte
	params    []byte
}

// payloadSize is the sealed payload: instance | entry id | round.
const payloadSize = 8 + 8 + 8

// statePrefix starts every requestState the router seals (the sealed part is base64url,
// which has no colon): a retry carrying any other state answers a 2026-07-28 backend's
// own input_required and goes to that backend untouched. The owner follows in the
// clear (16 hex digits of its instance id, then a colon), so that a process that does
// not own a state says so instead of calling it tampered, and knows where it belongs;
// the sealed payload names the owner again, and that is the one trusted.
const statePrefix = "mcprouter:"

// ownerSize is the clear owner part after statePrefix: hex instance id and a colon.
const ownerSize = 16 + 1

// ours reports whether state (a retry's requestState) is one the router sealed.
func ours(state []byte) bool {
	return len(state) > len(statePrefix) && string(state[:len(statePrefix)]) == statePrefix
}

// newParking makes the book of parked requests, sealing with key (Config.StateKey; nil:
// a random key of this process).
func newParking(srv *serverRequests, fwd *forwarder, key []byte) *parking {
	shared := key != nil
	if !shared {
		key = make([]byte, 32)
		rand.Read(key)
	}
	sealer, err := modern.NewSealer(key)
	if err != nil {
		panic("fleet: Config.StateKey must be 32 bytes: " + err.Error())
	}
	p := &parking{srv: srv, life: srv.life, table: srv.table, fwd: fwd, stats: srv.stats, sealer: sealer, shared: shared, max: srv.max,
		gather: gatherWindow, m: map[uint64]*parked{}, byPrinc: map[string]int{}}
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

// newAsk copies backend request m into an ask with a fresh key; the caller holds p.mu.
func (p *parking) newAsk(m *codec.Message) ask {
	p.seq++
	return ask{key: "input-" + strconv.FormatUint(p.seq, 10), method: string(m.Method),
		backendID: append([]byte(nil), m.ID...), params: append([]byte(nil), m.Params...)}
}

// park turns backend request m on c, made while handling the stateless client request
// relID, into an input_required answer to that client: the first ask parks the call and
// opens a round, shown gatherWindow later; false when relID is not a stateless request
// in flight (the caller refuses the backend's request).
func (p *parking) park(c *upConn, relID uint64, m *codec.Message, ttl time.Duration) bool {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		p.srv.answer(c, codec.AppendError(nil, m.ID, codec.CodeInternalError, "mcprouter: "+shuttingDown+"; "+string(m.Method)+" refused", nil))
		return true
	}
	var pk *parked
	full := false
	x := p.table.park(relID, func(e *entry) bool {
		principal := principalKey(e.x.Principal)
		if p.byPrinc[principal] >= p.max {
			full = true
			return false
		}
		p.byPrinc[principal]++
		pk = &parked{entryID: relID, conn: c, principal: principal, digest: modern.RequestDigest(&e.x.Msg), ttl: ttl,
			done: entry{kind: clientRequest, backend: e.backend, start: e.start, sent: e.sent}}
		if e.sess != nil {
			pk.caps = append([]byte(nil), e.sess.ClientCapabilities()...)
		}
		return true
	})
	if x == nil {
		p.mu.Unlock()
		if full {
			p.srv.answer(c, codec.AppendError(nil, m.ID, codec.CodeSessionLimit, "mcprouter: the client already has "+strconv.Itoa(p.max)+" requests waiting for its input; "+string(m.Method)+" refused", nil))
			return true
		}
		return false
	}
	x.Tag = nil
	pk.x = x
	pk.shown = append(pk.shown, p.newAsk(m))
	p.m[relID] = pk
	pk.timer = time.AfterFunc(ttl, func() { p.expire(relID, pk) })
	p.mu.Unlock()
	p.life.drained.poke() // a parked call is not waited for (InFlight)
	time.AfterFunc(p.gather, func() { p.show(pk) })
	return true
}

// more adds backend request m on c to call relID when that call is parked (its client
// has not retried yet): to the round being gathered, or to the next one. false when
// relID is not parked here.
func (p *parking) more(c *upConn, relID uint64, m *codec.Message) bool {
	p.mu.Lock()
	pk := p.m[relID]
	if pk == nil || pk.conn != c {
		p.mu.Unlock()
		return false
	}
	var refuse []byte
	switch missing := missingCapability(pk.caps, string(m.Method), m.Params); {
	case missing != "":
		refuse = codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "client does not support "+string(m.Method)+" (no "+missing+" capability)", nil)
	case len(pk.shown)+len(pk.next) >= maxAsks:
		refuse = codec.AppendError(nil, m.ID, codec.CodeSessionLimit, "mcprouter: the call already has "+strconv.Itoa(maxAsks)+" requests waiting for its client's input; "+string(m.Method)+" refused", nil)
	case pk.x != nil:
		pk.shown = append(pk.shown, p.newAsk(m))
	default:
		pk.next = append(pk.next, p.newAsk(m))
	}
	p.mu.Unlock()
	if refuse != nil {
		p.srv.answer(c, refuse)
	}
	return true
}

// show ends pk's gathering: the client is answered the round's input_required.
func (p *parking) show(pk *parked) {
	p.mu.Lock()
	x := pk.x
	if x == nil || p.m[pk.entryID] != pk {
		p.mu.Unlock()
		return // expired meanwhile: expire answered x
	}
	pk.x = nil
	res := p.roundLocked(pk)
	p.mu.Unlock()
	if p.fwd.rep.on() {
		pk.done.x, pk.done.recv = x, router.Now()
		p.fwd.rep.done(&pk.done, router.OutcomeOK)
	}
	x.Reply(codec.AppendResult(nil, x.Msg.ID, res))
}

// roundLocked starts a new round of pk with its shown asks and returns the
// input_required result showing them, with the round's sealed state; the caller holds
// p.mu.
func (p *parking) roundLocked(pk *parked) []byte {
	p.seq++
	pk.seq = p.seq
	var payload [payloadSize]byte
	copy(payload[:8], p.instance[:])
	binary.BigEndian.PutUint64(payload[8:16], pk.entryID)
	binary.BigEndian.PutUint64(payload[16:], pk.seq)
	state := statePrefix + hex.EncodeToString(p.instance[:]) + ":" + p.sealer.Seal(payload[:], pk.principal, pk.digest, pk.ttl)
	reqs := make([]modern.InputRequest, len(pk.shown))
	for i, a := range pk.shown {
		reqs[i] = modern.InputRequest{Key: a.key, Method: a.method, Params: a.params}
	}
	return modern.AppendInputRequired(nil, reqs, state)
}

// resume takes a stateless client's retry carrying a requestState of the router's
// (ours), in Prepare: the state is opened, the answers go to the waiting backend
// requests, and x takes the parked request over, or is answered the next round when
// the backend asked more meanwhile. The retry of a URL state (urlelicit.go) instead
// becomes the original request, to be routed again: again is then true. run is always
// false: x is answered here or by the request's settlement.
func (p *parking) resume(s *router.Session, x *transport.Exchange, state []byte, rep *reporter) (run, again bool) {
	owner, id, seq, urls, rej := p.open(state, x)
	if rej.OK() && urls > 0 {
		return false, p.urlRetry(x, urls, rep)
	}
	if rej.OK() && owner != p.instance {
		if p.relay == nil {
			rej = rejectUnreachable
		} else {
			return p.relay.forward(s, x, owner), false
		}
	}
	if !rej.OK() {
		x.SetStatus(rej.Status)
		return rep.replyErr(x, rej.Code, rej.Message), false
	}
	var start int64
	if rep.on() {
		start = router.Started(x) // before x.Tag changes hands
	}
	p.mu.Lock()
	pk := p.m[id]
	if pk == nil || pk.seq != seq || pk.x != nil {
		p.mu.Unlock()
		x.SetStatus(http.StatusBadRequest)
		return rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: requestState was answered already or its request ended: send the original request again, without requestState"), false
	}
	answers := make([][]byte, len(pk.shown))
	for i, a := range pk.shown {
		answers[i] = modern.InputResponse(x.Msg.Params, a.key)
		if answers[i] == nil {
			p.mu.Unlock()
			x.SetStatus(http.StatusBadRequest)
			return rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: inputResponses has no answer for "+strconv.Quote(a.key)+" ("+a.method+")"), false
		}
	}
	answered, conn := pk.shown, pk.conn
	var next []byte
	claimed := true
	if len(pk.next) > 0 {
		// The backend asked more after the round was shown: the retry is answered the
		// next round, and the call stays parked.
		pk.shown, pk.next = pk.next, nil
		next = p.roundLocked(pk)
		pk.timer.Reset(pk.ttl)
	} else {
		p.dropLocked(pk)
		claimed = p.table.claim(id, s, x, start)
	}
	p.mu.Unlock()
	if !claimed {
		// Settled meanwhile (its connection was lost, the router is closing).
		return rep.replyErr(x, codec.CodeBackendUnavailable, "backend request ended while waiting for input"), false
	}
	for i, a := range answered {
		p.srv.answer(conn, codec.AppendResult(nil, a.backendID, answers[i]))
	}
	if next != nil {
		return rep.reply(x, next), false
	}
	return false, false
}

// rejectOtherInstance refuses a state another router process owns when this one cannot
// verify it (each process seals with a key of its own): see the package comment.
var rejectOtherInstance = modern.Reject{Code: codec.CodeInvalidParams, Status: http.StatusBadRequest,
	Message: "Invalid params: requestState belongs to another router instance, which this one cannot verify: give every instance the same request_state key to route retries between them"}

// rejectUnreachable refuses a verified state another router process owns when there is
// no NATS bus to reach it by.
var rejectUnreachable = modern.Reject{Code: codec.CodeInvalidParams, Status: http.StatusBadRequest,
	Message: "Invalid params: requestState belongs to another router instance, and this one has no NATS bus to reach it"}

// open opens state, a retry's requestState of the router's (ours), for the retry x:
// the instance that owns it and the entry and round it names there (or, for a URL
// state, the count of its elicitations, urlelicit.go), or why it is
// refused (modern.Open's checks: integrity, the request's digest, the principal, the
// expiry). A state of another instance is opened only with the cluster's shared key;
// the owner sealed inside is the one trusted.
func (p *parking) open(state []byte, x *transport.Exchange) (owner [8]byte, id, seq uint64, urls int, rej modern.Reject) {
	rest := state[len(statePrefix):]
	if len(rest) < ownerSize || rest[ownerSize-1] != ':' {
		return owner, 0, 0, 0, modern.RejectState(modern.ErrStateTampered)
	}
	if _, err := hex.Decode(owner[:], rest[:ownerSize-1]); err != nil {
		return owner, 0, 0, 0, modern.RejectState(modern.ErrStateTampered)
	}
	if owner != p.instance && !p.shared {
		return owner, 0, 0, 0, rejectOtherInstance
	}
	payload, err := p.sealer.Open(rest[ownerSize:], principalKey(x.Principal), modern.RequestDigest(&x.Msg))
	if err != nil {
		return owner, 0, 0, 0, modern.RejectState(err)
	}
	if urls = urlStateCount(payload); urls > 0 {
		return [8]byte(payload[:8]), 0, 0, urls, modern.Reject{}
	}
	if len(payload) != payloadSize {
		return owner, 0, 0, 0, modern.RejectState(modern.ErrStateTampered)
	}
	owner = [8]byte(payload[:8])
	if owner != p.instance && !p.shared {
		return owner, 0, 0, 0, rejectOtherInstance
	}
	return owner, binary.BigEndian.Uint64(payload[8:16]), binary.BigEndian.Uint64(payload[16:]), 0, modern.Reject{}
}

// dropLocked forgets pk; the caller holds p.mu.
func (p *parking) dropLocked(pk *parked) {
	delete(p.m, pk.entryID)
	pk.timer.Stop()
	if p.byPrinc[pk.principal]--; p.byPrinc[pk.principal] <= 0 {
		delete(p.byPrinc, pk.principal)
	}
}

// expire ends pk when no retry claimed it in time.
func (p *parking) expire(id uint64, pk *parked) {
	p.end(id, pk, codec.CodeClientTimeout, "mcprouter: the client did not retry with an answer to %s in time", false)
}

// shuttingDown is what the backend and the client are told of a call that the router's
// shutdown ended.
const shuttingDown = "the router is shutting down"

// endAll ends every parked call at once, and from now on park refuses the backends'
// requests: the router is closing. Who calls it: EndParked, from the router's Close,
// before it waits for the calls in flight. Why: a parked call's backend is still
// inside the call, waiting for an answer that only a retry to this process could
// bring (its requests live on this process's upstream connections), and the worker or
// reader that forwarded the call waits for the backend: left alone, each parked call
// would hold the shutdown for the whole grace period.
func (p *parking) endAll() {
	p.mu.Lock()
	p.closing = true
	all := make(map[uint64]*parked, len(p.m))
	maps.Copy(all, p.m)
	p.mu.Unlock()
	for id, pk := range all {
		p.end(id, pk, codec.CodeInternalError, "mcprouter: "+shuttingDown+"; %s was not answered", false) // as park refuses
	}
}

// endOn ends the calls parked on c, an upstream session that is gone (its connection
// lost, its backend removed): the backend's requests they wait to answer went with it,
// so no retry can finish them. Without it a retry would claim the call and send its
// answers into the dead session, and its client would wait for the call's deadline;
// now the retry is refused at once (its request ended: send it again), and a client
// still waiting for its round hears that the backend's connection was lost. Who calls
// it: the forwarder's connLost, on whatever goroutine saw the session end.
func (p *parking) endOn(c *upConn) {
	p.mu.Lock()
	var gone map[uint64]*parked
	for id, pk := range p.m {
		if pk.conn == c {
			if gone == nil {
				gone = map[uint64]*parked{}
			}
			gone[id] = pk
		}
	}
	p.mu.Unlock()
	for id, pk := range gone {
		p.end(id, pk, codec.CodeBackendUnavailable, "", true)
	}
}

// end ends parked call pk (id) unless a retry claimed it: the backend's requests are
// refused with code and why (a format naming the request's method), the client's request
// cancelled upstream, and the entry released. When the upstream session is gone, the
// backend is told nothing: there is no one left to tell.
func (p *parking) end(id uint64, pk *parked, code int, why string, gone bool) {
	p.mu.Lock()
	if p.m[id] != pk {
		p.mu.Unlock()
		return
	}
	p.dropLocked(pk)
	x, asks := pk.x, append(pk.shown, pk.next...)
	pk.x = nil
	closing := p.closing
	p.mu.Unlock()
	if x != nil {
		switch {
		case closing:
			p.fwd.rep.replyErr(x, codec.CodeBackendUnavailable, "mcprouter: "+shuttingDown)
		case gone:
			p.fwd.rep.replyErr(x, codec.CodeBackendUnavailable, "mcprouter: backend "+pk.conn.b.cfg.Name+" connection lost while its requests for input waited")
		default:
			p.fwd.rep.replyErr(x, codec.CodeClientTimeout, "mcprouter: the backend's requests for input were not shown in time")
		}
	}
	e := p.table.takeParked(id)
	if e == nil {
		return
	}
	p.stats.ServerRequestsExpired.Add(1)
	if !gone && !p.life.ended() {
		for _, a := range asks {
			p.srv.answer(pk.conn, codec.AppendError(nil, a.backendID, code, fmt.Sprintf(why, a.method), nil))
		}
		p.fwd.tellCancelled(e.conn, e.id)
	}
	p.fwd.release(e)
}

// cancelResumed cancels the resumed request whose retry was x's request id of
// stateless session s: its index lives in the shard of the first request's session,
// so the forwarder's lookup (the retry's session's shard) may miss it. A retry sent to
// the instance that owns its state is cancelled there.
func (p *parking) cancelResumed(s *router.Session, clientID []byte) {
	if p.relay != nil && p.relay.cancel(s, clientID) {
		return // a retry sent to its owner (mrtr_owner.go)
	}
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

// count is the number of parked requests.
func (p *parking) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// EndParked implements router.StatelessFleet: every call parked for its client's retry
// ends now, and none parks after (parking.endAll says why).
func (f *Fleet) EndParked() { f.srv.park.endAll() }
