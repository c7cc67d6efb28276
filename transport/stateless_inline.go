package transport

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport/closewatch"
	"github.com/mcprouter/mcprouter/transport/readahead"
)

// A stateless request whose handler does its work on the request's own goroutine
// (the router's forward run on the caller, under HandleMessage): that goroutine cannot
// turn a slow reply into a stream (awaitReply, streamStateless) while the work runs, and
// the stream is how the client's closing of the connection is seen, which cancels the
// request. So the handler asks first (Exchange.WatchOnCaller), and the post puts itself
// in its server's callerWatches until the handler returns: a sweep of those, every
// StatelessStreamAfter/sweepSteps, puts the connection of a request still running after
// StatelessStreamAfter under the process's close watcher, and the client's close runs
// the abandon hook (OnAbandon, OnAbandonBy) as a closed stream's does. A request
// answered before that costs a slot taken and given back and its arm's state set and
// cleared (four atomic writes, all but the slot's in the post itself), where a timer
// per request, Reset and Stopped, took the runtime's timer heap and its locks every
// time; awaitReply then arms no timer either (the call is finished).

// callerWatches are the posts of one server whose handlers work on their goroutines
// (WatchOnCaller), each in a slot until its handler returns, and the sweep that watches
// their connections once they have run for StatelessStreamAfter. The sweep's goroutine
// runs only while a slot is taken; its ticks are the clock of the arms (no clock read
// per request).
type callerWatches struct {
	slots   [callerSlots]atomic.Pointer[callerWatch]
	tick    atomic.Uint32 // sweeps made (wraps: compared as a difference)
	running atomic.Bool   // a sweep goroutine runs, or is about to
}

const (
	// callerSlots bounds the requests worked on their goroutines at once, per server;
	// one more is told to go elsewhere (WatchOnCaller false: a worker, as before).
	callerSlots = 1024
	// callerProbe is how many slots an arm tries from the one its post hashes to.
	callerProbe = 8
	// sweepSteps is how many sweeps make StatelessStreamAfter: a slow request's
	// connection is watched between StatelessStreamAfter and 1+1/sweepSteps of it.
	sweepSteps = 4
)

// callerWatch is a stateless post's watch of its connection while its handler works on
// the post's goroutine. It lives in the post (pooled).
type callerWatch struct {
	ctx *fasthttp.RequestCtx // the post's, set by postStateless for the handler's time
	p   *httpPost
	// st is 0 when not armed, else this arm: its count (arms), the sweep tick it is
	// due at and, once the sweep watches its connection, watchFired. One word, so that
	// the sweep takes an arm (CompareAndSwap) that the post has not ended (Swap).
	st   atomic.Uint64
	arms uint32 // the post's goroutine's count of arms, for st
	slot uint32 // the slot taken, +1 (0: none); the post's goroutine's

	mu  sync.Mutex // held while the sweep watches, and while a close abandons
	rc  syscall.RawConn
	reg closewatch.Reg
}

// The bits of callerWatch.st below the due tick; the arm's count is above it.
const (
	watchFired = 1
	watchArmed = 2
)

// armState is st for arm number arms, due at tick due: never 0.
func armState(arms, due uint32) uint64 { return uint64(arms)<<34 | uint64(due)<<2 | watchArmed }

// dueBy reports whether st, armed, is due at tick now.
func dueBy(st uint64, now uint32) bool { return int32(now-uint32(st>>2)) >= 0 }

// WatchOnCaller is asked by a handler that would do x's work on the goroutine that
// delivered x, before it starts: it reports whether it may. Only a stateless request
// over Streamable HTTP needs the transport's goroutine meanwhile (to notice that the
// client closed the connection of a slow request, which cancels it); for it, true means
// that its connection will be watched from StatelessStreamAfter on, until the handler
// returns, and false (no close watcher here, a connection without a descriptor, as
// with TLS, or callerSlots requests at once) that the work must go elsewhere, leaving
// the goroutine to make the slow reply a stream. Anything else: true, nothing armed.
// Call it on the delivering goroutine, before the handler returns.
func (x *Exchange) WatchOnCaller() bool {
	p, ok := x.call.out.(*httpPost)
	if !ok || !p.stateless || p.inl.ctx == nil {
		return true
	}
	s := p.srv
	early := s.cfg.StatelessStreamAfter
	if p.accept&acceptSSE == 0 || early <= 0 || early >= s.cfg.ReplyTimeout {
		return true // the transport would not stream it either (awaitReply)
	}
	if s.watcher == nil {
		return false
	}
	if _, ok := readahead.SyscallConnOf(p.inl.ctx.Conn()); !ok {
		return false
	}
	w := &p.inl
	if w.slot != 0 {
		return true // asked again: armed already
	}
	return s.callers.arm(w, p, early)
}

// arm puts w (of post p) in a free slot, due sweepSteps+1 ticks from now (at least
// early from now, since the current tick began before), and starts the sweep if none
// runs. False: no free slot among those w hashes to.
func (ws *callerWatches) arm(w *callerWatch, p *httpPost, early time.Duration) bool {
	w.p = p
	w.arms++
	w.st.Store(armState(w.arms, ws.tick.Load()+sweepSteps+1))
	h := uint(uintptr(unsafe.Pointer(w))>>6) % callerSlots
	for i := range uint(callerProbe) {
		k := (h + i) % callerSlots
		if ws.slots[k].Load() == nil && ws.slots[k].CompareAndSwap(nil, w) {
			w.slot = uint32(k) + 1
			if !ws.running.Load() && ws.running.CompareAndSwap(false, true) {
				go ws.sweep(early / sweepSteps)
			}
			return true
		}
	}
	w.st.Store(0)
	return false
}

// sweep ticks every period while a slot is taken, watching the connections of the
// arms due; it ends after a tick that finds every slot free.
func (ws *callerWatches) sweep(period time.Duration) {
	t := time.NewTicker(max(period, time.Microsecond))
	defer t.Stop()
	for range t.C {
		if ws.sweepOnce() {
			continue
		}
		ws.running.Store(false)
		// An arm that saw the sweep running just before it stopped started none: look
		// once more, and go on unless another sweep started meanwhile.
		if !ws.taken() || !ws.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// sweepOnce advances the tick and fires the arms due; it reports whether a slot was
// taken.
func (ws *callerWatches) sweepOnce() bool {
	now := ws.tick.Add(1)
	taken := false
	for i := range ws.slots {
		if w := ws.slots[i].Load(); w != nil {
			taken = true
			if st := w.st.Load(); st != 0 && st&watchFired == 0 && dueBy(st, now) {
				w.fire(st)
			}
		}
	}
	return taken
}

// taken reports whether any slot is taken.
func (ws *callerWatches) taken() bool {
	for i := range ws.slots {
		if ws.slots[i].Load() != nil {
			return true
		}
	}
	return false
}

// fire puts the post's connection under the close watcher, if the arm st is still the
// watch's (the handler still works) and the request still waits for its answer. The
// sweep runs it.
func (w *callerWatch) fire(st uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.st.CompareAndSwap(st, st|watchFired) {
		return // the handler returned meanwhile
	}
	p := w.p
	c := p.call
	c.mu.Lock()
	waits := !c.finished && c.abandon != nil
	c.mu.Unlock()
	if !waits {
		return
	}
	rc, ok := readahead.RawConnOf(w.ctx.Conn())
	if !ok {
		return
	}
	reg, err := p.srv.watcher.Add(rc, &abandonOnClose{w: w, st: st | watchFired})
	if err != nil {
		return
	}
	w.rc, w.reg = rc, reg
}

// stop ends the watch once the handler has returned, before the post answers on the
// connection: the slot is given back and, if the sweep watched the connection, it
// leaves the close watcher (before it can close, see closewatch.Watcher.Add).
func (w *callerWatch) stop() {
	if w.slot == 0 { // set on this goroutine (WatchOnCaller) alone
		w.ctx = nil
		return
	}
	w.p.srv.callers.slots[w.slot-1].Store(nil)
	w.slot = 0
	if w.st.Swap(0)&watchFired == 0 {
		w.ctx = nil // the sweep, taking no arm now, does not read it
		return
	}
	w.mu.Lock() // after fire, and after a close abandoning the request
	rc, reg := w.rc, w.reg
	w.rc, w.reg = nil, closewatch.Reg{}
	w.mu.Unlock()
	w.ctx = nil
	if reg.Registered() {
		w.p.srv.watcher.Remove(rc, reg)
	}
}

// abandonOnClose is the close watcher's Closer for one arm of a callerWatch: the
// client's close of the connection abandons the request, as the closing of its stream
// does. Made only for a request still running after StatelessStreamAfter.
type abandonOnClose struct {
	w  *callerWatch
	st uint64 // the arm, fired
}

// Close implements closewatch.Closer. It holds the watch's lock while the request is
// abandoned, so that the post (pooled) cannot finish and serve another request
// meanwhile (stop waits for the lock); a Closer of an earlier arm, or one called after
// stop, does nothing.
func (k *abandonOnClose) Close() {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.st.Load() == k.st {
		w.p.call.abandoned()
	}
}
