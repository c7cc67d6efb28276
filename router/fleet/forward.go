package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Forwarding: Run's send of a routed request (forward, on a dispatcher worker), the
// backend's answers (backendResponse, on the connection's reader goroutine), and every
// way a forwarded request ends: its answer, a router-made error, a cancellation, the
// sweeper goroutine's expiry, the loss of its connection. Whoever settles an entry in the
// in-flight table completes it here, exactly once.

// sweep fails requests whose backend did not answer in time.
func (f *Fleet) sweep() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var buf []*entry
	for {
		select {
		case <-f.life.ctx.Done():
			return
		case now := <-t.C:
			buf = f.table.expired(now.UnixNano(), buf[:0])
			for _, e := range buf {
				f.Stats.TimedOut.Add(1)
				f.completeErrTaken(e, CodeBackendTimeout, timeoutMessage(e.backend))
			}
		}
	}
}

// connLost fails every request in flight on c: their answers will not come.
func (f *Fleet) connLost(c *upConn, cause error) {
	msg := "backend " + c.b.cfg.Name + " connection lost"
	if cause != nil {
		msg += ": " + cause.Error()
	}
	for _, e := range f.table.takeConn(c, nil) {
		f.completeErrTaken(e, CodeBackendUnavailable, msg)
	}
}

// bufPool holds the buffers that forwarded messages are rewritten into.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 64<<10 {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

var entryPool = sync.Pool{New: func() any { return new(entry) }}

// track records a request about to be forwarded to b.
func (f *Fleet) track(s *router.Session, x *transport.Exchange, b *backend, strip int) *entry {
	e := entryPool.Get().(*entry)
	*e = entry{kind: clientRequest, sess: s, x: x, backend: b, deadline: deadlineIn(b.cfg.Timeout), strip: strip}
	if tok := x.Msg.ProgressToken; tok != nil {
		e.progress = true
		e.origToken = tok
	}
	if f.obs != nil {
		e.start = router.Started(x) // before x.Tag changes hands
	}
	f.table.add(e)
	x.Tag = e
	return e
}

// forward sends a routed request: it finds the upstream session and a concurrency slot,
// builds the bytes while it still owns the exchange (the entry is routed: nobody else
// may complete it), then binds the entry (routed → sent) and sends. From the bind on, e
// and its exchange belong to whoever settles it: only id, deadline and the buffer are
// used after.
func (f *Fleet) forward(e *entry) {
	b := e.backend
	// The upstream session first: a request waiting for a per-client session (beyond
	// the cap) must not hold one of the backend's concurrency slots meanwhile.
	c, err := f.sessions.upstreamFor(e)
	if err != nil {
		if errors.Is(err, errUpstreamFull) {
			f.abandon(e, codec.CodeOverloaded, f.sessions.fullMessage(b))
			return
		}
		f.abandon(e, CodeBackendUnavailable, "backend "+b.cfg.Name+" unavailable: "+err.Error())
		return
	}
	if !b.acquire(time.Second) {
		f.abandon(e, CodeBackendBusy, "backend "+b.cfg.Name+" is at its concurrency limit ("+strconv.Itoa(b.cfg.MaxConcurrency)+")")
		return
	}
	id, deadline := e.id, e.deadline
	bp := getBuf()
	*bp = appendWire((*bp)[:0], e)
	if f.obs != nil {
		e.sent = router.Now()
	}
	if !f.table.bind(e, c) { // cancelled before it left: nothing to tell the backend
		b.release()
		putBuf(bp)
		f.finishCancelled(e)
		return
	}
	f.Stats.Forwarded.Add(1)
	ctx, cancel := context.WithDeadline(f.life.ctx, time.Unix(0, deadline))
	err = c.conn.Send(ctx, *bp)
	if err != nil && errors.Is(err, upstream.ErrBackendDown) && !b.cfg.PerClient {
		// The instance refused the message (connection refused, process down, 502-504):
		// the backend did not process it, so another replica may, once.
		c.inst.healthy.Store(false)
		if in := b.pick(); in != nil && in != c.inst {
			if c2 := in.conn.Load(); c2 != nil && f.table.rebind(id, c, c2) {
				f.Stats.Failovers.Add(1)
				c = c2
				err = c.conn.Send(ctx, *bp)
			}
		}
	}
	cancel()
	putBuf(bp)
	if err != nil {
		f.sendFailed(b, c, id, err)
	}
}

// appendWire appends the bytes the backend sees for routed e: the client's request with
// the id (and progress token) replaced by e.id and the name's prefix removed.
func appendWire(dst []byte, e *entry) []byte {
	x := e.x
	var idb [20]byte
	wireID := strconv.AppendUint(idb[:0], e.id, 10)
	var sp [3]codec.Splice
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
	return codec.AppendSplices(dst, x.Raw, sp[:n])
}

// sendFailed settles sent request id after its send failed, unless someone settled it
// first: a passed deadline is a timeout, counted like the sweeper's; anything else
// makes it unavailable.
func (f *Fleet) sendFailed(b *backend, c *upConn, id uint64, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		// The backend held the exchange past the deadline (HTTP answers within Send).
		if te := f.table.take(id, stateExpired); te != nil {
			f.Stats.TimedOut.Add(1)
			f.completeErrTaken(te, CodeBackendTimeout, timeoutMessage(b))
		}
		return
	}
	f.Stats.Failed.Add(1)
	if errors.Is(err, upstream.ErrBackendDown) || errors.Is(err, upstream.ErrClosed) {
		c.inst.healthy.Store(false)
	}
	if te := f.table.take(id, stateFailed); te != nil {
		f.completeErrTaken(te, CodeBackendUnavailable, "backend "+b.cfg.Name+": "+err.Error())
	}
}

// timeoutMessage is the error message of a request b did not answer in time.
func timeoutMessage(b *backend) string {
	return "backend " + b.cfg.Name + " did not answer within " + b.cfg.Timeout.String()
}

// abandon answers routed e with a router-made error: forward could not send it. A
// request cancelled meanwhile gets no answer, as cancellation asks.
func (f *Fleet) abandon(e *entry, code int, msg string) {
	if !f.table.abandon(e) {
		f.finishCancelled(e)
		return
	}
	f.completeErrTaken(e, code, msg)
}

// finishCancelled ends the exchange of a request settled as cancelled, without a
// response, and releases the entry.
func (f *Fleet) finishCancelled(e *entry) {
	f.Stats.Cancelled.Add(1)
	f.observe(e, router.OutcomeCancelled)
	x := e.x
	e.x, x.Tag = nil, nil
	x.Done()
	f.release(e)
}

// backendResponse settles the request a backend answered and hands the answer over:
// to the client under its own id, or to the router's own call.
func (f *Fleet) backendResponse(c *upConn, msg []byte, m *codec.Message) {
	id, ok := parseID(m.ID)
	if !ok {
		return
	}
	e := f.table.take(id, stateAnswered)
	if e == nil {
		return // settled already: timed out or cancelled
	}
	if e.kind == ownRequest {
		e.wait <- append([]byte(nil), msg...)
		return
	}
	if f.obs != nil {
		e.recv = router.Now()
	}
	outcome := router.OutcomeOK
	if m.Kind == codec.KindError {
		outcome = router.OutcomeError
	}
	bp := getBuf()
	*bp = codec.AppendReplaceID((*bp)[:0], msg, m, e.x.Msg.ID)
	f.finish(e, *bp, outcome)
	putBuf(bp)
}

// finish answers a settled client request with reply and releases it.
func (f *Fleet) finish(e *entry, reply []byte, outcome router.Outcome) {
	f.observe(e, outcome)
	x := e.x
	e.x, x.Tag = nil, nil
	x.Reply(reply)
	f.release(e)
}

// release gives back what a settled client request held (a request that was sent
// holds a backend concurrency slot and counts as outstanding on its instance) and
// recycles it. The router's own requests hold neither and are not pooled.
func (f *Fleet) release(e *entry) {
	if e.kind != clientRequest {
		return
	}
	if e.conn != nil {
		e.backend.release()
		e.conn.inst.outstanding.Add(-1)
	}
	*e = entry{}
	entryPool.Put(e)
}

// completeErrTaken answers settled e with a router-made error: the client's request
// gets the error response, the router's own request learns that no answer will come.
func (f *Fleet) completeErrTaken(e *entry, code int, msg string) {
	if e.kind == ownRequest {
		close(e.wait)
		return
	}
	bp := getBuf()
	*bp = codec.AppendError((*bp)[:0], e.x.Msg.ID, code, msg, nil)
	f.finish(e, *bp, outcomeOfCode(code))
	putBuf(bp)
}
