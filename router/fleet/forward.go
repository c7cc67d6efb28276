package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/tracing"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// forwarder is the part that forwards client requests and completes them: it records a
// routed request in the in-flight table (track, in Prepare), sends it (forward, Run's
// part on a dispatcher worker), hands the backend's answer back (backendResponse, on the
// connection's reader goroutine), and ends it every other way: a router-made error, the
// client's cancellation (cancel, in Prepare), the sweeper goroutine's expiry (sweep,
// started by Start), the loss of its connection (connLost). Whoever settles an entry in
// the in-flight table completes it here, exactly once. It owns no state beyond the
// table's entries; the upstream session a request goes on comes from sessions.
type forwarder struct {
	life     *lifecycle
	table    *table
	sessions *sessions
	rep      *reporter
	stats    *Stats
	catalog  *catalogBuilder // read when a request that may have run could be sent again
	rev      *reversals      // a 2026-07-28 backend's input_required for a 2025 client (reverse.go)
	park     *parking        // calls parked for a 2026-07-28 client's retry (mrtr.go), ended with their session
}

// sweep fails requests whose backend did not answer in time.
func (fw *forwarder) sweep() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var buf []*entry
	for {
		select {
		case <-fw.life.ctx.Done():
			return
		case now := <-t.C:
			buf = fw.table.expired(now.UnixNano(), buf[:0])
			for _, e := range buf {
				fw.stats.TimedOut.Add(1)
				// A client's request is cancelled upstream (e is recycled once completed);
				// the router's own may be an initialize, which is never cancelled.
				c, id, client := e.conn, e.id, e.kind == clientRequest
				fw.completeErrTaken(e, codec.CodeBackendTimeout, timeoutMessage(e.backend))
				if client {
					fw.gaveUp(c, id)
				}
			}
		}
	}
}

// connLost fails every request in flight on c: their answers will not come. Those
// another replica may take go there first (forward_failover.go); the calls parked on c
// for their clients' retries end (parking.endOn).
func (fw *forwarder) connLost(c *upConn, cause error) {
	fw.failover(c, cause)
	msg := "backend " + c.b.cfg.Name + " connection lost"
	if cause != nil {
		msg += ": " + cause.Error()
	}
	for _, e := range fw.table.takeConn(c, nil) {
		fw.completeErrTaken(e, codec.CodeBackendUnavailable, msg)
	}
	if fw.park != nil {
		fw.park.endOn(c)
	}
}

// bufPool holds the buffers that forwarded messages are rewritten into.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

// maxPooledBuf is the largest buffer kept for reuse; larger ones are left to the GC.
const maxPooledBuf = 64 << 10

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

var entryPool = sync.Pool{New: func() any { return new(entry) }}

// track records a request about to be forwarded to b.
func (fw *forwarder) track(s *router.Session, x *transport.Exchange, b *backend, strip int) *entry {
	e := entryPool.Get().(*entry)
	*e = entry{kind: clientRequest, sess: s, x: x, backend: b, deadline: deadlineIn(b.cfg.Timeout), strip: strip}
	if tok := x.Msg.ProgressToken; tok != nil {
		e.progress = true
		e.origToken = tok
	}
	if fw.rep.on() {
		e.start = router.Started(x) // before x.Tag changes hands
	}
	fw.table.add(e)
	x.Tag = e
	return e
}

// forward sends a routed request: it finds the upstream session and a concurrency slot,
// builds the bytes while it still owns the exchange (the entry is routed: nobody else
// may complete it), then binds the entry (routed → sent) and sends. From the bind on, e
// and its exchange belong to whoever settles it: only id, deadline and the buffer are
// used after.
func (fw *forwarder) forward(e *entry) {
	b := e.backend
	// The upstream session first: a request waiting for a per-client session (beyond
	// the cap) must not hold one of the backend's concurrency slots meanwhile.
	c, err := fw.sessions.upstreamFor(e)
	if err != nil {
		if errors.Is(err, errUpstreamFull) {
			fw.abandon(e, codec.CodeOverloaded, fw.sessions.fullMessage(b))
			return
		}
		if errors.Is(err, upstream.ErrUnauthorized) { // the client's own session was refused
			fw.abandon(e, codec.CodeBackendAuth, err.Error())
			return
		}
		fw.abandon(e, codec.CodeBackendUnavailable, "backend "+b.cfg.Name+" unavailable: "+err.Error())
		return
	}
	if !b.acquire(slotWait) {
		fw.abandon(e, codec.CodeBackendBusy, "backend "+b.cfg.Name+" is at its concurrency limit ("+strconv.Itoa(b.cfg.MaxConcurrency)+")")
		return
	}
	id, deadline := e.id, e.deadline
	s := sendingPool.Get().(*sending)
	wireInto(&s.wire, c, e)
	if fw.rep.on() {
		e.sent = router.Now()
	}
	// A 2026-07-28 request is cancelled by ending its context (e.stop); any other ends
	// only at its deadline, which needs no timer (upstream.Deadline).
	var ctx context.Context
	var dl *upstream.Deadline
	if c.modern {
		ctx, e.stop = context.WithDeadline(fw.life.ctx, time.Unix(0, deadline))
		ctx = upstream.WithParamHeaders(ctx, paramHeaders(e)) // modern_client.go
	} else {
		dl = &s.deadline
		dl.Reset(fw.life.ctx, time.Unix(0, deadline))
		ctx = dl
	}
	stop := e.stop // e is not ours once bound
	if c.owner != nil && e.x != nil && e.x.Principal != nil {
		// The client's newest token, so that a per-client backend's exchanged token
		// follows it when the one the session was opened with has expired.
		ctx = upstream.WithClient(ctx, e.x.Principal)
	}
	if tr, ok := e.x.Trace.(*tracing.Request); ok { // the backend continues the trace (tracing.go)
		ctx = traced(ctx, tr, c, &s.wire)
	}
	inline, stateless := e.inline, e.x != nil && e.x.Stateless
	if !fw.table.bind(e, c) { // cancelled before it left: nothing to tell the backend
		endCtx(stop, dl)
		s.recycle()
		b.release()
		fw.finishCancelled(e)
		return
	}
	fw.stats.Forwarded.Add(1)
	s.fw, s.b, s.c, s.id, s.ctx, s.stop, s.dl = fw, b, c, id, ctx, stop, dl
	switch {
	case !inline:
		s.send()
	case !answersOnCaller(c, stateless, true):
		// A backend whose Send would wait on what this goroutine must serve (its era
		// or connection changed since RunsOnCaller said yes): as on a worker.
		fw.life.spawn(s.send)
	default:
		// On the request's goroutine (RunsOnCaller): a reply that streams goes on on a
		// goroutine of its own, and this one back to serving the request's stream. The
		// Deadline carries the Detacher; a 2026-07-28 request's context is its own (the
		// closing of the client's connection cancels it), so it carries it instead.
		if dl != nil {
			dl.Detach(s)
		} else {
			s.ctx = upstream.WithDetach(ctx, s)
		}
		s.send()
	}
}

// sending is one forwarded request from its Send on, with what the end of the Send
// needs: on the goroutine that sent it, or on the one its reply's stream was handed to
// (upstream.Detacher). Pooled.
type sending struct {
	fw   *forwarder
	b    *backend
	c    *upConn
	id   uint64
	ctx  context.Context
	stop func()
	dl   *upstream.Deadline // &deadline, or nil for a 2026-07-28 backend's (stop)
	// wire is the request as the backend sees it (wireInto). The buffer stays with the
	// pooled sending: a buffer of its own from bufPool cost a pool get and put per call.
	wire   []byte
	resent bool // sent again to another replica already
	// deadline is the Send's context, kept here rather than allocated per request.
	deadline upstream.Deadline
}

var sendingPool = sync.Pool{New: func() any { return new(sending) }}

// send sends the request and ends it, unless its reply's stream went to a goroutine of
// its own, which ends it (Detached).
func (s *sending) send() {
	if err := s.c.conn.Send(s.ctx, s.wire); err != upstream.ErrDetached {
		s.Detached(err)
	}
}

// Detached ends the Send (upstream.Detacher): a failed one may go to another replica,
// once (forward_retry.go), and otherwise fails the request unless someone settled it
// first; then what the request's sending held is given back.
func (s *sending) Detached(err error) {
	if err != nil && !s.resent {
		s.resent = true
		// Another replica may take it, once, when that is safe (forward_retry.go).
		var c2 *upConn
		if c2, err = s.fw.resendBuilding(s.b, s.c, s.id, err, nil); c2 != nil {
			s.c = c2
			err = c2.conn.Send(s.ctx, s.wire)
			switch {
			case err == upstream.ErrDetached:
				return // this again, from the stream's goroutine
			case errors.Is(err, upstream.ErrNoResponse):
				err = mayHaveRun(err, true, "it was sent to a second replica already")
			}
		}
	}
	endCtx(s.stop, s.dl)
	if err != nil {
		s.fw.sendFailed(s.b, s.c, s.id, err)
	}
	s.recycle()
}

// recycle puts s back in the pool, once its Send's context was released.
func (s *sending) recycle() {
	s.fw, s.b, s.c, s.ctx, s.stop, s.dl, s.resent = nil, nil, nil, nil, nil, nil, false
	if cap(s.wire) > maxPooledBuf {
		s.wire = nil // oversized buffers are dropped, not pooled
	}
	s.wire = s.wire[:0]
	s.deadline.Reset(nil, time.Time{})
	sendingPool.Put(s)
}

// answersOnCaller reports whether c's Send, for a request of a session's client or of
// a stateless one, returns once the message is written and its answer read if the reply
// carries it whole, handing a streamed reply to a goroutine of its own
// (upstream.Detacher), and whether nothing of the request needs its goroutine before
// then. For a session's: a 2025 Streamable HTTP backend, a legacy HTTP+SSE one (its
// answers come on its stream), a child process; not a 2026-07-28 backend, whose
// input_required the fleet turns into requests to the client (translate.go), on the
// stream the request's goroutine serves. For a stateless one: a 2026-07-28 Streamable
// HTTP backend (its input_required is the reply), and a 2025 one only when nothing of
// its can ask the client (asksNothing): a 2025 backend's request to the client parks
// the call and answers the client's POST with input_required while the upstream call
// waits (mrtr.go), an answer that could not go out before a Send waiting for a JSON
// reply returned. A NATS service's Send waits for its reply while what it sends about
// the request comes another way.
func answersOnCaller(c *upConn, stateless, asksNothing bool) bool {
	switch c.conn.(type) {
	case *upstream.HTTPConn, *upstream.SSEConn, *upstream.Instance:
		return !c.modern && (!stateless || asksNothing)
	case *upstream.StatelessConn:
		return c.modern && stateless
	}
	return false
}

// asksNothing reports whether a stateless client with capabilities caps can be asked
// nothing by a 2025 backend that would park its call: it declared none of what such a
// backend can ask for (declaredCaps), so the fleet refuses such a request at once
// (serverreq.go clientCan), and answers a ping itself. (A backend asking a method of no
// capability would park the call, and the call then ends at its timeout, as with a
// backend that does not answer.) The capabilities-session key says it, from its cache
// of the objects met lately, without a walk per request.
func (cs *capsSessions) asksNothing(caps []byte) bool {
	return cs.declaredKey(caps) == "{}"
}

// slotWait bounds how long forward waits for one of a backend's concurrency slots.
const slotWait = time.Second

// RunsOnCaller implements router.CallerFleet: a client's request routed to a backend
// whose connections answer on the caller (answersOnCaller) and whose timeout, after the
// wait for a concurrency slot, ends the request within the transport's (within) may be
// forwarded on the request's goroutine. (Opening a client's own upstream session, for a
// PerClient backend, has bounds of its own, as on a worker.) A stateless client's
// request (s its Session) likewise, where answersOnCaller allows it for such a request.
// It marks the entry so, for forward.
func (f *Fleet) RunsOnCaller(s *router.Session, x *transport.Exchange, within time.Duration) bool {
	e, ok := x.Tag.(*entry)
	if !ok || e.kind != clientRequest || e.backend.cfg.Timeout+slotWait > within {
		return false
	}
	quiet := !x.Stateless || f.sessions.caps.asksNothing(s.ClientCapabilities())
	for _, in := range e.backend.instances {
		if c := in.conn.Load(); c != nil && !answersOnCaller(c, x.Stateless, quiet) {
			return false
		}
	}
	e.inline = true
	return true
}

// endCtx releases a forwarded request's context: its cancel function (2026-07-28) or
// its Deadline.
func endCtx(stop func(), dl *upstream.Deadline) {
	if stop != nil {
		stop()
		return
	}
	dl.Release()
}

// wireFor is routed or sent e as c's backend sees it, in a pooled buffer: the client's
// request rewritten (appendWire), in the form of c's era. A stateless client's request
// carries its own revision in its _meta (the router checked it), which a 2026-07-28
// backend takes as it is; any other gets the router's (withMeta).
func wireFor(c *upConn, e *entry) *[]byte {
	bp := getBuf()
	wireInto(bp, c, e)
	return bp
}

// wireInto is wireFor into *bp, which it overwrites (a sending's own buffer, or a
// pooled one).
func wireInto(bp *[]byte, c *upConn, e *entry) {
	*bp = appendWire((*bp)[:0], e, !c.modern)
	if c.modern && !e.x.Stateless {
		mp := getBuf()
		*mp = c.withMeta((*mp)[:0], *bp, e.sess)
		*bp, *mp = *mp, *bp // the pool takes back the buffer written first
		putBuf(mp)
	}
}

// appendWire appends the bytes the backend sees for routed e: the client's request with
// the id (and progress token) replaced by e.id and the name's prefix removed; for a 2025
// backend (legacy), a stateless client's request also loses the revision's _meta keys
// (appendMetaCuts), in the same pass.
func appendWire(dst []byte, e *entry, legacy bool) []byte {
	x := e.x
	var idb [20]byte
	wireID := strconv.AppendUint(idb[:0], e.id, 10)
	// Indexed, not appended: an append that may grow would send the splices, and the
	// id's stack array with them, to the heap.
	var sp [3 + metaCuts]codec.Splice // id, name, progress token, then _meta's cuts
	n := 0
	sp[n] = codec.Splice{Old: x.Msg.ID, New: wireID}
	n++
	if e.strip > 0 && x.Msg.Flags&codec.NameEscaped != 0 {
		// The raw prefix length differs from the decoded one: write the whole name anew.
		name, _ := codec.Unquote(nil, x.Msg.Name)
		if len(name) >= e.strip {
			enc := codec.AppendQuote(nil, name[e.strip:])
			sp[n] = codec.Splice{Old: x.Msg.Name, New: enc[1 : len(enc)-1]}
			n++
		}
	} else if e.strip > 0 && len(x.Msg.Name) >= e.strip {
		sp[n] = codec.Splice{Old: x.Msg.Name[:e.strip]}
		n++
	}
	if e.progress {
		sp[n] = codec.Splice{Old: x.Msg.ProgressToken, New: wireID}
		n++
	}
	if legacy && x.Stateless {
		if x.Msg.Flags&codec.MetaReserved != 0 && len(x.Msg.Meta) >= 2 {
			// Nothing but the revision's keys (the progress token is not one): all go.
			sp[n] = codec.Splice{Old: metaInside(x.Msg.Meta)}
			return codec.AppendSplices(dst, x.Raw, sp[:n+1])
		}
		cuts, all := appendMetaCuts(sp[:n], x.Msg.Meta) // modern_meta.go
		if !all {
			return stripModernMeta(dst, codec.AppendSplices(nil, x.Raw, cuts))
		}
		return codec.AppendSplices(dst, x.Raw, cuts)
	}
	return codec.AppendSplices(dst, x.Raw, sp[:n])
}

// sendFailed settles sent request id after its send failed, unless someone settled it
// first: a passed deadline is a timeout, counted like the sweeper's; anything else
// makes it unavailable.
func (fw *forwarder) sendFailed(b *backend, c *upConn, id uint64, err error) {
	if errors.Is(err, context.Canceled) {
		// Its client cancelled it (a 2026-07-28 backend's request stream closed) or the
		// fleet is closing: whoever did settled it already, or it fails now.
		if te := fw.table.take(id, stateFailed); te != nil {
			fw.completeErrTaken(te, codec.CodeBackendUnavailable, "backend "+b.cfg.Name+": "+err.Error())
		}
		return
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// The backend held the exchange past the deadline (HTTP answers within Send).
		if te := fw.table.take(id, stateExpired); te != nil {
			fw.stats.TimedOut.Add(1)
			fw.completeErrTaken(te, codec.CodeBackendTimeout, timeoutMessage(b))
			fw.gaveUp(c, id)
		}
		return
	}
	fw.stats.Failed.Add(1)
	if errors.Is(err, upstream.ErrUnauthorized) {
		// The backend refused the credentials the router presented for this call: the
		// instance is healthy, the client gets a code of its own (never a challenge of
		// the router's), and the error names the backend.
		if te := fw.table.take(id, stateFailed); te != nil {
			fw.completeErrTaken(te, codec.CodeBackendAuth, err.Error())
		}
		return
	}
	if errors.Is(err, upstream.ErrBackendDown) || errors.Is(err, upstream.ErrClosed) {
		c.inst.healthy.Store(false)
	}
	if te := fw.table.take(id, stateFailed); te != nil {
		fw.completeErrTaken(te, codec.CodeBackendUnavailable, "backend "+b.cfg.Name+": "+err.Error())
	}
}

// gaveUp tells the backend behind c that the router stopped waiting for request id (its
// timeout passed), as the specification asks of a sender that gives up, so that a
// backend that would never answer does not keep the request. A connection whose
// requests are cancelled by closing their stream (2026-07-28 over HTTP) was told when
// the request's context ended.
func (fw *forwarder) gaveUp(c *upConn, id uint64) {
	if c == nil {
		return
	}
	if !upstream.CancelsByClosing(c.conn) {
		fw.tellCancelled(c, id)
	}
}

// timeoutMessage is the error message of a request b did not answer in time.
func timeoutMessage(b *backend) string {
	return "backend " + b.cfg.Name + " did not answer within " + b.cfg.Timeout.String()
}

// abandon answers routed e with a router-made error: forward could not send it. A
// request cancelled meanwhile gets no answer, as cancellation asks.
func (fw *forwarder) abandon(e *entry, code int, msg string) {
	if !fw.table.abandon(e) {
		fw.finishCancelled(e)
		return
	}
	fw.completeErrTaken(e, code, msg)
}

// finishCancelled ends the exchange of a request settled as cancelled, without a
// response, and releases the entry.
func (fw *forwarder) finishCancelled(e *entry) {
	fw.stats.Cancelled.Add(1)
	fw.rep.done(e, router.OutcomeCancelled)
	x := e.x
	e.x, x.Tag = nil, nil
	x.Done()
	fw.release(e)
}

// backendResponse settles the request a backend answered and hands the answer over:
// to the client under its own id, or to the router's own call.
func (fw *forwarder) backendResponse(c *upConn, msg []byte, m *codec.Message) {
	id, ok := parseID(m.ID)
	if !ok {
		fw.stats.Unmatched.Add(1) // an id the router never sends
		return
	}
	e := fw.table.take(id, stateAnswered)
	if e == nil {
		fw.stats.Unmatched.Add(1) // settled already (answered, timed out, cancelled) or never sent
		return
	}
	if e.kind == ownRequest {
		e.wait <- append([]byte(nil), msg...)
		return
	}
	if fw.rep.on() {
		e.recv = router.Now()
	}
	if c.modern && legacyClient(e.sess) {
		if fw.rev.input(c, e, m) {
			return
		}
		if code, text, data, ok := toLegacyAnswer(c.b, m); ok {
			fw.completeErrData(e, code, text, data)
			return
		}
	}
	outcome := router.OutcomeOK
	if m.Kind == codec.KindError {
		outcome = router.OutcomeError
	}
	bp := getBuf()
	*bp = codec.AppendReplaceID((*bp)[:0], msg, m, e.x.Msg.ID)
	fw.finish(e, *bp, outcome)
	putBuf(bp)
}

// finish answers a settled client request with reply and releases it.
func (fw *forwarder) finish(e *entry, reply []byte, outcome router.Outcome) {
	if tr, ok := e.x.Trace.(*tracing.Request); ok {
		tr.Answered(reply)
	}
	fw.rep.done(e, outcome)
	x := e.x
	e.x, x.Tag = nil, nil
	x.Reply(reply)
	fw.release(e)
}

// release gives back what a settled client request held (a request that was sent
// holds a backend concurrency slot and counts as outstanding on its instance), tells
// the table its answer is delivered (a shutdown waits for that), and recycles it. The
// router's own requests hold neither and are not pooled.
func (fw *forwarder) release(e *entry) {
	if e.kind != clientRequest {
		return
	}
	if e.conn != nil {
		e.backend.release()
		e.conn.inst.outstanding.Add(-1)
	}
	fw.table.handedOver(e)
	*e = entry{}
	entryPool.Put(e)
}

// completeErrTaken answers settled e with a router-made error: the client's request
// gets the error response, the router's own request learns that no answer will come.
func (fw *forwarder) completeErrTaken(e *entry, code int, msg string) {
	if e.kind == ownRequest {
		close(e.wait)
		return
	}
	fw.completeErrData(e, code, msg, nil)
}

// completeErrData answers settled client request e with an error carrying data (raw,
// nil for none).
func (fw *forwarder) completeErrData(e *entry, code int, msg string, data []byte) {
	bp := getBuf()
	*bp = codec.AppendError((*bp)[:0], e.x.Msg.ID, code, msg, data)
	fw.finish(e, *bp, outcomeOfCode(code))
	putBuf(bp)
}

// cancel takes a client's notifications/cancelled for its request clientID: a request
// that reached the backend is settled as cancelled, the backend is told, and the
// client's exchange ends without a response, as cancellation asks.
func (fw *forwarder) cancel(s *router.Session, clientID []byte) {
	fw.rev.cancel(s, clientID) // between input rounds (reverse.go)
	if e := fw.table.takeClient(s, clientID); e != nil {
		fw.dropCancelled(e)
	}
}

// dropCancelled finishes e, a sent request settled as cancelled: its Send stopped, the
// backend told (as when the router gives up), the client's exchange ended without a
// response.
func (fw *forwarder) dropCancelled(e *entry) {
	if e.stop != nil {
		e.stop()
	}
	fw.gaveUp(e.conn, e.id)
	fw.finishCancelled(e)
}

// endSession cancels what client session s, which ended, still had in flight: each
// backend is told, as for the client's own cancellation, rather than left to finish work
// whose answer nobody can take; the exchanges end without a response. A request between
// input rounds (reverse.go) stops waiting for the client's answers.
func (fw *forwarder) endSession(s *router.Session) {
	fw.rev.cancelSession(s)
	var buf [8]*entry
	for _, e := range fw.table.takeSession(s, buf[:0]) {
		fw.dropCancelled(e)
	}
}

// tellCancelled sends a backend notifications/cancelled for request id on c, in the
// background: the client does not wait for it.
func (fw *forwarder) tellCancelled(c *upConn, id uint64) {
	params := append([]byte(`{"requestId":`), strconv.AppendUint(nil, id, 10)...)
	params = append(params, '}')
	note := codec.AppendNotification(nil, "notifications/cancelled", params)
	fw.life.spawn(func() {
		ctx, cancel := context.WithTimeout(fw.life.ctx, 5*time.Second)
		defer cancel()
		c.conn.Send(ctx, note)
	})
}
