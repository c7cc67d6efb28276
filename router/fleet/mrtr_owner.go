package fleet

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// A 2026-07-28 client's retry whose requestState another router instance owns (issue
// 12: "the retry may land on another router instance: route it to the owner over
// NATS"). The backend request the retry answers waits on the owner's upstream
// connection, so the owner must answer it; the instance the retry landed on (here
// "the receiver") has verified the state with the cluster's shared key (mrtr.go, open)
// and sends the retry to the owner, as a NATS request on the owner's own subject
// (P.mrtr.<instance>, like the presence subject of subscriptions_presence.go):
//
//   - the request's data is the retry as the client sent it, its header
//     Mcp-Relay-Principal the principal the receiver authenticated (JSON, without its
//     token), its reply subject an inbox of the receiver's;
//   - the owner hands the retry to its router as a stateless request of its own
//     (transport.ServeRelayed): the router checks it, the fleet opens the state,
//     answers the waiting backend request and takes the call over, exactly as for a
//     retry that landed on the owner;
//   - what the owner's router sends on it comes back to the inbox, in order: related
//     messages (progress, logging) as they are, then the reply with header
//     Mcp-Relay-Final (its value the HTTP status the owner set, 0 for none). The
//     receiver passes the related messages to its client (its own exchange screens them
//     and turns the reply into an SSE stream as for any request) and answers the client
//     with the reply: the result, the next round's input_required, or an error;
//   - a client that closes its stream on the receiver cancels on the owner (header
//     Mcp-Relay-Op: cancel, the inbox as data). A cancellation that reaches the owner
//     before its router has taken the retry in (its dispatcher registers the
//     cancellation first) finds nothing to cancel: the call then completes there, and
//     its answer goes to an inbox nobody reads.
//
// Nothing waits forever. NATS answers "no responders" at once when the owner is gone
// (its connection and subscriptions go with its process): the client is told that the
// state's call is lost with its owner. While the owner is silent the receiver asks it,
// every relayProbe, whether it is there (Mcp-Relay-Op: ping), and gives up after the
// longest backend timeout and a margin, cancelling on the owner. Retries in flight are
// bounded on both sides (maxRelays).
//
// Trust: the owner takes the receiver's word for the principal. The bus is the
// cluster's own (an embedded server that listens requires credentials, natsbus); who
// may publish on it may act as any instance already. The owner still checks the state
// against that principal and the retry (modern.Sealer).

// NATS headers of the relay.
const (
	relayOpHeader        = "Mcp-Relay-Op"
	relayPrincipalHeader = "Mcp-Relay-Principal"
	relayFinalHeader     = "Mcp-Relay-Final"
	relayCancel          = "cancel"
	relayPing            = "ping"
)

const (
	// maxRelays bounds the retries this instance has sent to their owners and waits
	// for, and, apart, those it serves for other instances.
	maxRelays = 1024
	// relayProbe is the owner's silence after which the receiver asks whether it is
	// there.
	relayProbe = time.Second
	// relayMargin is added to the longest backend timeout to bound a relayed retry:
	// the owner answers a call its backend did not answer in time itself.
	relayMargin = 5 * time.Second
	// relayPending is how many of the owner's messages one relayed retry buffers.
	relayPending = 256
	// relayOverhead is room for a relayed retry's headers and subjects besides the
	// retry and the principal, within the bus's largest message.
	relayOverhead = 1024
)

// ownerRelay sends retries to the instances that own their states, and serves those
// other instances send here. forward runs in Prepare and hands the wait to a goroutine
// of its own (one per retry, bounded); serve runs on the NATS client's handler
// goroutine and never blocks; cancel runs from CancelRequest. Its lock guards the two
// tables and is held for no I/O.
type ownerRelay struct {
	nc      *nats.Conn
	subject func(owner [8]byte) string
	life    *lifecycle
	log     *slog.Logger
	rep     *reporter
	timeout func() time.Duration // the longest backend timeout
	handler atomic.Pointer[transport.Handler]
	sub     *nats.Subscription
	waiting atomic.Int64 // retries sent, not answered yet

	mu  sync.Mutex
	out map[relayKey]chan struct{} // sent retries by their stateless session and id; closed: cancel
	in  map[string]*relayed        // retries served here, by the sender's inbox
}

// relayKey names a stateless request: its session (one per request) and its id.
type relayKey struct {
	s  *router.Session
	id string
}

// newOwnerRelay serves this instance's subject (instance) on bus; nil without a bus.
func newOwnerRelay(bus *natsbus.Bus, instance [8]byte, life *lifecycle, log *slog.Logger, rep *reporter, timeout func() time.Duration) *ownerRelay {
	if bus == nil || bus.NC == nil {
		return nil
	}
	o := &ownerRelay{nc: bus.NC, life: life, log: log, rep: rep, timeout: timeout,
		subject: func(owner [8]byte) string { return bus.Subject("mrtr", hex.EncodeToString(owner[:])) },
		out:     map[relayKey]chan struct{}{}, in: map[string]*relayed{}}
	sub, err := o.nc.Subscribe(o.subject(instance), o.serve)
	if err != nil {
		log.Warn("cannot serve retries other router instances route here over NATS", "err", err)
		return o // still sends: the states this instance owns stay local
	}
	o.sub = sub
	go func() { <-life.ctx.Done(); sub.Unsubscribe() }()
	return o
}

// setHandler sets what relayed retries are handed to: the router.
func (o *ownerRelay) setHandler(h transport.Handler) { o.handler.Store(&h) }

// forward sends the retry x of stateless session s to owner, whose state it carries
// (verified), and answers x with what comes back. Always false: x is answered by the
// goroutine that waits.
func (o *ownerRelay) forward(s *router.Session, x *transport.Exchange, owner [8]byte) bool {
	var principal []byte
	if x.Principal != nil {
		principal, _ = json.Marshal(x.Principal) // a struct of strings, times and JSON claims: cannot fail
	}
	if len(x.Raw)+len(principal)+relayOverhead > int(o.nc.MaxPayload()) {
		return o.rep.replyErr(x, codec.CodeBackendUnavailable, "mcprouter: the retry is too large to send to the router instance that owns its requestState over NATS")
	}
	if o.waiting.Add(1) > maxRelays {
		o.waiting.Add(-1)
		o.life.drained.poke()
		return o.rep.replyErr(x, codec.CodeBackendBusy, "mcprouter: too many retries waiting for other router instances; retry later")
	}
	// The key outlives x's answer (await's caller deletes it after): s is kept, so that
	// it is not the next stateless call's meanwhile (router.Session.Keep).
	key := relayKey{s.Keep(), string(x.Msg.ID)}
	cancel := make(chan struct{})
	o.mu.Lock()
	o.out[key] = cancel
	o.mu.Unlock()
	// x outlives Prepare on the goroutine below, and the router's job in x.Tag goes
	// back to its pool when Prepare returns: read its start now, and let go of it.
	start := router.Started(x)
	x.Tag = nil
	o.life.spawn(func() {
		o.await(x, owner, principal, cancel, start)
		o.mu.Lock()
		delete(o.out, key)
		o.mu.Unlock()
		o.waiting.Add(-1)
		o.life.drained.poke()
	})
	return false
}

// sent is the number of retries sent to their owners and not answered yet (0 on a
// nil relay: no bus).
func (o *ownerRelay) sent() int {
	if o == nil {
		return 0
	}
	return int(o.waiting.Load())
}

// cancel cancels the retry id of stateless session s if it was sent to its owner.
func (o *ownerRelay) cancel(s *router.Session, id []byte) bool {
	o.mu.Lock()
	ch := o.out[relayKey{s, string(id)}]
	delete(o.out, relayKey{s, string(id)})
	o.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	return ch != nil
}

// ownerGone is the answer to a retry whose owner is no longer there.
const ownerGone = "mcprouter: the router instance that owns this requestState is gone, and the call waiting there with it: send the original request again, without requestState"

// await sends x to owner and relays what comes back, until the reply, the client's
// cancellation, the owner's absence, the deadline or the fleet's end.
func (o *ownerRelay) await(x *transport.Exchange, owner [8]byte, principal []byte, cancel <-chan struct{}, start int64) {
	inbox := o.nc.NewInbox()
	ch := make(chan *nats.Msg, relayPending)
	sub, err := o.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		o.rep.replyErrFrom(x, start, codec.CodeBackendUnavailable, "mcprouter: cannot reach the router instance that owns this requestState: "+err.Error())
		return
	}
	defer sub.Unsubscribe()
	m := nats.NewMsg(o.subject(owner))
	m.Reply = inbox
	if principal != nil {
		m.Header.Set(relayPrincipalHeader, string(principal))
	}
	m.Data = x.Raw
	if err := o.nc.PublishMsg(m); err != nil {
		o.rep.replyErrFrom(x, start, codec.CodeBackendUnavailable, "mcprouter: cannot reach the router instance that owns this requestState: "+err.Error())
		return
	}
	deadline := time.NewTimer(o.timeout() + relayMargin)
	defer deadline.Stop()
	probe := time.NewTicker(relayProbe)
	defer probe.Stop()
	quiet := true // nothing came since the last tick
	for {
		select {
		case msg := <-ch:
			quiet = false
			if msg.Header.Get("Status") == "503" {
				o.rep.replyErrFrom(x, start, codec.CodeBackendUnavailable, ownerGone) // no responders
				return
			}
			if st := msg.Header.Get(relayFinalHeader); st != "" {
				o.answer(x, msg.Data, st, start)
				return
			}
			x.Send(msg.Data)
		case <-probe.C:
			if quiet && !o.present(owner) {
				o.rep.replyErrFrom(x, start, codec.CodeBackendUnavailable, ownerGone)
				return
			}
			quiet = true
		case <-deadline.C:
			o.tell(owner, inbox)
			o.rep.replyErrFrom(x, start, codec.CodeBackendTimeout, "mcprouter: the router instance that owns this requestState did not answer in time")
			return
		case <-cancel:
			o.tell(owner, inbox)
			x.Done() // as a cancelled request: no answer
			return
		case <-o.life.ctx.Done():
			o.tell(owner, inbox)
			o.rep.replyErrFrom(x, start, codec.CodeBackendUnavailable, "router shutting down")
			return
		}
	}
}

// answer answers x with the owner's reply msg and its HTTP status st; an empty reply
// is a request the owner ended without one (cancelled there).
func (o *ownerRelay) answer(x *transport.Exchange, msg []byte, st string, start int64) {
	if len(msg) == 0 {
		x.Done()
		return
	}
	if n, _ := strconv.Atoi(st); n > 0 {
		x.SetStatus(n)
	}
	outcome := router.OutcomeOK
	var m codec.Message
	if codec.Scan(msg, &m) != nil || m.Kind == codec.KindError {
		outcome = router.OutcomeError
	}
	o.rep.localFrom(x, outcome, start)
	x.Reply(msg)
}

// present reports whether owner answers, or might (only "no responders" says it is
// gone).
func (o *ownerRelay) present(owner [8]byte) bool {
	m := nats.NewMsg(o.subject(owner))
	m.Header.Set(relayOpHeader, relayPing)
	_, err := o.nc.RequestMsg(m, relayProbe)
	return !errors.Is(err, nats.ErrNoResponders)
}

// tell cancels on owner the retry whose answers go to inbox.
func (o *ownerRelay) tell(owner [8]byte, inbox string) {
	m := nats.NewMsg(o.subject(owner))
	m.Header.Set(relayOpHeader, relayCancel)
	m.Data = []byte(inbox)
	o.nc.PublishMsg(m)
}

// serve takes what another instance sends to this one's subject: a retry to serve, its
// cancellation, or a ping.
func (o *ownerRelay) serve(m *nats.Msg) {
	switch m.Header.Get(relayOpHeader) {
	case relayPing:
		m.Respond(nil)
	case relayCancel:
		o.mu.Lock()
		var r *transport.Relay
		if rb := o.in[string(m.Data)]; rb != nil {
			r, rb.cancelled = rb.r, true
		}
		o.mu.Unlock()
		if r != nil {
			r.Abandon()
		}
	case "":
		if m.Reply != "" {
			o.serveRetry(m)
		}
	}
}

// serveRetry hands the retry m to the router, its answers going to m's inbox.
func (o *ownerRelay) serveRetry(m *nats.Msg) {
	rb := &relayed{o: o, inbox: m.Reply}
	hp := o.handler.Load()
	if hp == nil {
		rb.refuse(m.Data, codec.CodeBackendUnavailable, "mcprouter: the router instance that owns this requestState is not serving yet")
		return
	}
	var principal *auth.Principal
	if v := m.Header.Get(relayPrincipalHeader); v != "" {
		principal = new(auth.Principal)
		if err := json.Unmarshal([]byte(v), principal); err != nil {
			rb.refuse(m.Data, codec.CodeInvalidRequest, "mcprouter: a relayed retry's principal is not valid JSON")
			return
		}
	}
	o.mu.Lock()
	if len(o.in) >= maxRelays || o.in[m.Reply] != nil {
		o.mu.Unlock()
		rb.refuse(m.Data, codec.CodeBackendBusy, "mcprouter: the router instance that owns this requestState serves too many retries of other instances; retry later")
		return
	}
	o.in[m.Reply] = rb
	o.mu.Unlock()
	r, err := transport.ServeRelayed(*hp, m.Data, principal, rb)
	o.mu.Lock()
	cancelled := false
	if err == nil && o.in[m.Reply] == rb {
		rb.r, cancelled = r, rb.cancelled // still being served: a cancellation finds it
	}
	o.mu.Unlock()
	if cancelled {
		r.Abandon() // the cancellation came while it was being handed over
	}
	if err != nil {
		o.drop(rb)
		rb.refuse(m.Data, codec.CodeInvalidRequest, "mcprouter: a relayed retry must be one JSON-RPC request")
	}
}

// drop forgets rb, answered.
func (o *ownerRelay) drop(rb *relayed) {
	o.mu.Lock()
	if o.in[rb.inbox] == rb {
		delete(o.in, rb.inbox)
	}
	o.mu.Unlock()
}

// relayed is one retry served for another instance: what the router sends on it goes
// to the sender's inbox (transport.RelayOutput).
type relayed struct {
	o     *ownerRelay
	inbox string
	r     *transport.Relay // set once handed over; under o.mu
	// cancelled: the sender cancelled (under o.mu), maybe before r was set.
	cancelled bool
}

// Related publishes a message that precedes the reply.
func (rb *relayed) Related(msg []byte) error { return rb.o.nc.Publish(rb.inbox, msg) }

// Reply publishes the reply, marked final with its HTTP status.
func (rb *relayed) Reply(msg []byte, status int) {
	rb.o.drop(rb)
	m := nats.NewMsg(rb.inbox)
	m.Header.Set(relayFinalHeader, strconv.Itoa(status))
	m.Data = msg
	rb.o.nc.PublishMsg(m)
}

// refuse answers the retry req, not handed over, with an error.
func (rb *relayed) refuse(req []byte, code int, msg string) {
	var m codec.Message
	codec.Scan(req, &m) // its id, when it has one
	rb.Reply(codec.AppendError(nil, m.ID, code, msg, nil), 0)
}

// SetRelayHandler sets what the retries other router instances send to this one (the
// owner of their states) are handed to: the router, which serves them as its own
// stateless requests. Until it is set they are refused.
func (f *Fleet) SetRelayHandler(h transport.Handler) {
	if r := f.srv.park.relay; r != nil {
		r.setHandler(h)
	}
}

// longestTimeout is the longest backend timeout: no call relayed to another instance
// lasts longer there.
func (f *Fleet) longestTimeout() time.Duration {
	var d time.Duration
	for _, b := range f.set.all() {
		d = max(d, b.cfg.Timeout)
	}
	return d
}
