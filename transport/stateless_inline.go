package transport

import (
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport/closewatch"
	"github.com/mcprouter/mcprouter/transport/readahead"
)

// A stateless request whose handler does its work on the request's own goroutine
// (the router's forward run on the caller, under HandleMessage): that goroutine cannot
// turn a slow reply into a stream (awaitReply, streamStateless) while the work runs, and
// the stream is how the client's closing of the connection is seen, which cancels the
// request. So the handler asks first (Exchange.WatchOnCaller), and the post arms one
// timer for StatelessStreamAfter: a request still running then has its connection put
// under the process's close watcher, and the client's close runs the abandon hook
// (OnAbandon, OnAbandonBy) as a closed stream's does. A request answered before that
// costs a timer's Reset and Stop and nothing else, and awaitReply then arms none (the
// call is finished): one timer per request, as on a worker.

// callerWatch is a stateless post's watch of its connection while its handler works on
// the post's goroutine. It lives in the post (pooled), its timer made once per post.
type callerWatch struct {
	ctx   *fasthttp.RequestCtx // the post's, set by postStateless for the handler's time
	timer *time.Timer          // fire, after StatelessStreamAfter
	p     *httpPost

	mu    sync.Mutex
	armed bool   // between WatchOnCaller and stop
	gen   uint64 // counts arms: a Closer of an earlier arm does nothing
	rc    syscall.RawConn
	reg   closewatch.Reg
}

// WatchOnCaller is asked by a handler that would do x's work on the goroutine that
// delivered x, before it starts: it reports whether it may. Only a stateless request
// over Streamable HTTP needs the transport's goroutine meanwhile (to notice that the
// client closed the connection of a slow request, which cancels it); for it, true means
// that its connection will be watched from StatelessStreamAfter on, until the handler
// returns, and false (no close watcher here, or a connection without a descriptor, as
// with TLS) that the work must go elsewhere, leaving the goroutine to make the slow
// reply a stream. Anything else: true, nothing armed. Call it on the delivering
// goroutine, before the handler returns.
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
	w.mu.Lock()
	w.p = p
	w.armed = true
	w.gen++
	w.mu.Unlock()
	if w.timer == nil {
		w.timer = time.AfterFunc(early, w.fire)
	} else {
		w.timer.Reset(early)
	}
	return true
}

// fire puts the post's connection under the close watcher, if the handler still works
// and the request still waits for its answer. A timer's goroutine runs it.
func (w *callerWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed || w.reg.Registered() {
		return
	}
	p := w.p
	c := &p.call
	c.mu.Lock()
	waits := !c.finished && c.abandon != nil
	c.mu.Unlock()
	if !waits {
		return
	}
	sc, ok := readahead.SyscallConnOf(w.ctx.Conn())
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	reg, err := p.srv.watcher.Add(rc, &abandonOnClose{w: w, gen: w.gen})
	if err != nil {
		return
	}
	w.rc, w.reg = rc, reg
}

// stop ends the watch once the handler has returned, before the post answers on the
// connection: the connection leaves the close watcher (before it can close, see
// closewatch.Watcher.Add). A timer that fired meanwhile finds nothing armed.
func (w *callerWatch) stop() {
	if !w.armed { // set on this goroutine (WatchOnCaller) alone
		w.ctx = nil
		return
	}
	w.timer.Stop()
	w.mu.Lock()
	w.armed = false
	rc, reg := w.rc, w.reg
	w.rc, w.reg = nil, closewatch.Reg{}
	w.mu.Unlock()
	w.ctx = nil // after the lock: a timer that fired reads it only while armed
	if reg.Registered() {
		w.p.srv.watcher.Remove(rc, reg)
	}
}

// abandonOnClose is the close watcher's Closer for one arm of a callerWatch: the
// client's close of the connection abandons the request, as the closing of its stream
// does. Made only for a request still running after StatelessStreamAfter.
type abandonOnClose struct {
	w   *callerWatch
	gen uint64
}

// Close implements closewatch.Closer. It holds the watch's lock while the request is
// abandoned, so that the post (pooled) cannot finish and serve another request
// meanwhile; a Closer of an earlier arm, or one called after stop, does nothing.
func (k *abandonOnClose) Close() {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed && w.gen == k.gen {
		w.p.call.abandoned()
	}
}
