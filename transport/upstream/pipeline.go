package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// pipeline sends POSTs to one backend address with HTTP/1.1 pipelining over a few
// connections (HTTPOptions.Pipeline).
//
// Why: on a busy router most of the cost of a forwarded call is the kernel's, one write
// and one or two reads per request on each side of the loopback or LAN hop. Requests that
// arrive together are written in one system call and their responses come back in one
// read, on the backend's side as well (fasthttp and most servers flush pipelined
// responses together), so the cost per call falls with the load.
//
// The price is head-of-line blocking: HTTP/1.1 answers in order, so a slow request
// delays the ones written after it on the same connection. The pipeline limits the
// damage. A request goes to an idle connection when there is one and a new connection is
// opened while fewer than Pipeline exist; only then is it queued behind others, at most
// PipelineDepth deep, and only while the oldest of them has waited less than
// PipelineWindow: a slow call stops collecting followers after that window. A
// connection that carries an SSE reply (a backend that streams progress) or a request
// whose caller gave up takes no new requests, and it is closed once it owes nothing.
// When no connection can take a request, it goes out on the ordinary pool instead.
//
// The window does not cover a call that turns out slow: the requests that joined it in
// its first millisecond wait for it, however long it runs. In PipelineShort mode (the
// router's default) the pipeline therefore takes only calls predicted to be short,
// from how the calls of the same kind went on this backend (calls, a CallTimes, fed by
// every POST of the Conn, pipelined or pooled: typically short, and no slow call among
// the last thousand), only while other calls are in flight to share its writes
// (enter), and a request queues behind others only while their estimates add up to at
// most the window (budget). Every other call goes to the pool, as without pipelining.
// What remains is a call of a kind that made no slow call in a thousand turning out
// slow: the requests that joined it within the window wait for it; its kind is booked
// slow as soon as a pick sees it waiting past the slow limit (stallLocked).
//
// Connection: close, a reset or an early end fail what was still unanswered, with
// errStaleConn for requests the backend never received or (after Connection: close)
// promised not to process, so that Send may retry them.
type pipeline struct {
	addr string
	tls  bool
	o    *HTTPOptions // Pipeline, PipelineDepth, PipelineWindow, IdleTimeout
	dial func(addr string, timeout time.Duration) (net.Conn, error)

	mu     sync.Mutex
	conns  []*pipeConn
	dials  int           // dials in progress, counted against o.Pipeline
	dialed chan struct{} // closed when the dials in progress are done
	closed bool
	// off is set when the backend closes connections after their first response, three
	// in a row (an HTTP/1.0 server, or one that never keeps connections alive):
	// pipelining onto it would only fail and retry, so every request uses the pool.
	off     atomic.Bool
	oneShot atomic.Int32 // connections in a row closed after their first response

	// calls is the record of PipelineShort mode, nil without it; bound (the longest a
	// short kind's calls take) and budget (the most a request may wait behind others,
	// by their estimates) are in µs, as its estimates; slow is how long a call may take
	// before it counts as slow for its kind (slowFactor times the bound).
	calls  *CallTimes
	bound  int64
	budget int64
	slow   time.Duration

	// inFlight counts the calls to the backend in flight, pipelined or pooled (enter,
	// leave); a call tries the pipeline only while at least minShared others are.
	inFlight  atomic.Int32
	minShared int32
	// batch is a moving average of the calls one pipelined write carried, in
	// batchUnit-ths (see enter); only PipelineShort mode reads it.
	batch atomic.Int32
}

// Defaults of HTTPOptions.PipelineDepth, PipelineWindow, and of Pipeline and
// PipelineShortBound with PipelineShort. Two connections: the requests that arrive
// together on two cores. A 1 ms bound: pipelining saves a call some 10-20 µs of system
// calls, which is little beside a call that takes over a millisecond, so such a call
// has nothing to gain from the risk of waiting behind another.
const (
	defaultPipelineDepth  = 32
	defaultPipelineWindow = time.Millisecond
	defaultShortPipeline  = 2
	defaultShortBound     = time.Millisecond
	defaultMinInFlight    = 2
)

// What enter asks of the writes' batches in PipelineShort mode: batch is kept in
// batchUnit-ths of a call per write; below batchWorth (1.5 calls a write) a call is
// pipelined only while at least busyInFlight others are in flight. A new pipeline
// starts at batchStart, so that it tries.
const (
	batchUnit    = 16
	batchWorth   = 24
	batchStart   = 32
	busyInFlight = 8
)

func newPipeline(addr string, isTLS bool, o *HTTPOptions, conns *connSet) *pipeline {
	p := &pipeline{addr: addr, tls: isTLS, o: o, dial: conns.dialer(o.DialTimeout)}
	if o.PipelineShort {
		p.calls = o.CallTimes
		p.bound = o.PipelineShortBound.Microseconds()
		p.budget = o.PipelineWindow.Microseconds()
		p.slow = slowFactor * o.PipelineShortBound
		if !o.PipelineLone {
			p.minShared = defaultMinInFlight
		}
		p.batch.Store(batchStart)
	}
	return p
}

// enter counts a call to the backend in flight until leave, and reports whether it
// may try a pipelined connection, or else why not (PoolOff without a pipeline,
// PoolFewInFlight): always without PipelineShort. With it (unless PipelineLone), only
// while at least defaultMinInFlight other calls are in flight, and of those only while
// the recent pipelined writes carried 1.5 calls or more on average (batch), or
// busyInFlight others are in flight.
//
// Why: pipelining pays for its writer's and reader's wake-ups (two goroutine hand-offs a
// call that the pool, written and read inline by its caller, does not make) only when
// calls share a write and a read. At light load a call on the pool costs the router
// less CPU and waits behind nothing: measured at 4,000 calls/s of a 0-ms tool, 97% of
// the calls found fewer than 2 others in flight, and the router's CPU per call was
// pipeline: off's (71-75 µs) instead of 89-94 µs pipelined. Calls in flight together
// are not yet calls that arrive together, though: at 12,000 calls/s over 128 sessions
// (open loop) 2 others were often in flight, the writes carried about one call each,
// and pipelining cost 53-55 µs a call against the pool's 46-48. A saturated closed
// loop keeps its batches (and its 10-20% less CPU per call). The busyInFlight calls
// keep the average fresh when it has fallen: a burst pipelines, and if its writes carry
// several calls the average climbs back.
func (p *pipeline) enter() (PoolReason, bool) {
	if p == nil {
		return PoolOff, false
	}
	others := p.inFlight.Add(1) - 1
	if others < p.minShared {
		return PoolFewInFlight, false
	}
	if p.minShared == 0 || others >= busyInFlight || p.batch.Load() >= batchWorth {
		return 0, true
	}
	return PoolFewInFlight, false
}

// wrote records that one pipelined write carried n calls, into the moving average
// enter reads (a weight of 1/8 for the newest). Two writers may race on it; an update
// lost now and then does not matter to an average.
func (p *pipeline) wrote(n int) {
	if p.minShared == 0 || n <= 0 {
		return
	}
	old := p.batch.Load()
	p.batch.Store(old + (int32(min(n, 64))*batchUnit-old)/8)
}

// leave ends what enter began.
func (p *pipeline) leave() {
	if p != nil {
		p.inFlight.Add(-1)
	}
}

// pipeCall is one request on a pipelined connection. Two parties hold it, the caller
// waiting in do and the connection (writer, then reader); the last to let go returns it
// to the pool.
type pipeCall struct {
	wbuf  bytes.Buffer  // the request, serialised by the caller
	w     *bufio.Writer // into wbuf (fasthttp writes requests through a *bufio.Writer)
	resp  fasthttp.Response
	err   error
	state atomic.Int32 // callWaiting, callDelivered, callAbandoned
	done  chan struct{}
	refs  atomic.Int32
	body  pipeBody
	// pending is true while the request is outstanding on its connection (queued or
	// written, not answered). Guarded by the connection's mutex.
	pending bool
	since   time.Time   // when it was queued
	timer   *time.Timer // wait's, kept from call to call
	kind    callKind    // for the record (PipelineShort)
	est     int64       // its kind's estimate in µs (PipelineShort), counted in its connection's owed
	stalled bool        // booked slow while still waiting (stallLocked); guarded as pending
}

const (
	callWaiting int32 = iota
	callDelivered
	callAbandoned
)

var pipeCallPool = sync.Pool{New: func() any {
	c := &pipeCall{done: make(chan struct{}, 1)}
	c.body.closed = make(chan bool, 1)
	return c
}}

func (c *pipeCall) unref() {
	if c.refs.Add(-1) != 0 {
		return
	}
	c.resp.Reset()
	c.err = nil
	c.body.r, c.body.pc, c.body.eof = nil, nil, false
	if c.wbuf.Cap() > maxPooledBuf {
		c.wbuf = bytes.Buffer{}
	}
	pipeCallPool.Put(c)
}

// deliver hands the call's outcome to its caller; false means the caller gave up.
func (c *pipeCall) deliver(err error) bool {
	c.err = err
	if !c.state.CompareAndSwap(callWaiting, callDelivered) {
		return false
	}
	c.done <- struct{}{}
	return true
}

// pipeBody is an SSE reply body on a pipelined connection: the caller reads it, and its
// Close tells the connection's reader whether the body was read to its end (the next
// response follows) or not (the connection must go).
type pipeBody struct {
	r      io.Reader
	pc     *pipeConn
	eof    bool
	closed chan bool
}

func (b *pipeBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *pipeBody) close() { b.closed <- b.eof }

// CloseWithError interrupts a read in progress (a cancelled call, a stream that lingers
// after its response) by closing the connection, as fasthttp's own body streams do: a
// body not read to its end leaves the connection unusable anyway.
func (b *pipeBody) CloseWithError(err error) error {
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	b.pc.fail(err)
	return nil
}

// do sends req, a call of the given kind, on a pipelined connection and waits for its
// response within ctx. The call's resp (and body, for an SSE reply) stay valid until
// release. A poolErr means nothing was sent, and says why (poolReasonOf): no
// connection could take it (errPipelineFull), pipelining stopped (errPipelineOff), or
// (in PipelineShort mode) its kind is not known to be short (errNotShort). A call it
// queues on a connection is counted as pipelined (PipeStats).
func (p *pipeline) do(ctx context.Context, req *fasthttp.Request, kind callKind) (*pipeCall, error) {
	var est int64
	wait := p.routerWait()
	if p.calls != nil {
		var short bool
		if est, short = p.calls.predict(kind, p.shortBound(wait)); !short {
			return nil, errNotShort
		}
	}
	pc, err := p.pick(ctx, wait)
	if err != nil {
		return nil, err
	}
	c := pipeCallPool.Get().(*pipeCall)
	c.kind, c.est, c.stalled = kind, est, false
	c.refs.Store(2)
	c.state.Store(callWaiting)
	c.wbuf.Reset()
	if c.w == nil {
		c.w = bufio.NewWriterSize(&c.wbuf, 2048)
	}
	if err := req.Write(c.w); err != nil {
		c.w.Reset(&c.wbuf)
		c.unref()
		c.unref()
		return nil, err
	}
	_ = c.w.Flush() // into memory: cannot fail
	if !pc.enqueue(c) {
		c.unref()
		c.unref()
		return nil, errPipelineFull
	}
	p.o.PipeStats.pipe()
	if !c.wait(ctx) {
		if pc.abandon(c) {
			c.unref()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, context.DeadlineExceeded // a wall clock set back: still the deadline
		}
		<-c.done // delivered meanwhile
	}
	if c.err != nil {
		err := c.err
		c.unref()
		return nil, err
	}
	return c, nil
}

// wait waits for the call's outcome; false when ctx ended first. The Deadline a call
// is forwarded with is waited for with the call's own timer, reused from call to call,
// and its parent's Done channel: its own Done would arm a context for every call (a
// context, a timer and a channel, five heap objects, the whole garbage of a pipelined
// call).
func (c *pipeCall) wait(ctx context.Context) bool {
	dl, ok := ctx.(*Deadline)
	if !ok || dl.started.Load() {
		select {
		case <-c.done:
			return true
		case <-ctx.Done():
			return false
		}
	}
	d := time.Until(dl.d)
	if d <= 0 {
		select {
		case <-c.done:
			return true
		default:
			return false
		}
	}
	if c.timer == nil {
		c.timer = time.NewTimer(d)
	} else {
		c.timer.Reset(d)
	}
	defer c.timer.Stop()
	select {
	case <-c.done:
		return true
	case <-c.timer.C:
		return false
	case <-dl.parent.Done():
		return false
	}
}

// bodyStream is the SSE body the caller reads, nil when resp holds the body whole.
func (c *pipeCall) bodyStream() io.Reader {
	if c.body.r == nil {
		return nil
	}
	return &c.body
}

// release is the caller's end of the call: for an SSE reply it also tells the
// connection's reader whether the body was read to its end.
func (c *pipeCall) release() {
	if c.body.r != nil {
		c.body.close()
	}
	c.unref()
}

// pick chooses the connection for the next request: an idle one, else a new one, else
// the least loaded one below the depth. While a connection is being opened the others
// wait for it rather than spill into the pool.
func (p *pipeline) pick(ctx context.Context, wait time.Duration) (*pipeConn, error) {
	if p.off.Load() {
		return nil, errPipelineOff
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		var best *pipeConn
		bestN := 0
		live := p.conns[:0]
		now := time.Now()
		for _, pc := range p.conns {
			n, ok := pc.load(now, wait)
			if n < 0 {
				continue // dead: dropped from the list
			}
			live = append(live, pc)
			if ok && (best == nil || n < bestN) {
				best, bestN = pc, n
			}
		}
		clear(p.conns[len(live):])
		p.conns = live
		if best != nil && bestN == 0 {
			p.mu.Unlock()
			return best, nil
		}
		if len(p.conns)+p.dials < p.o.Pipeline {
			return p.openLocked()
		}
		if best != nil && bestN < p.o.PipelineDepth {
			p.mu.Unlock()
			return best, nil
		}
		dialed := p.dialed
		p.mu.Unlock()
		if dialed == nil {
			return nil, errPipelineFull
		}
		select {
		case <-dialed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// openLocked opens a connection; p.mu is held on entry and released.
func (p *pipeline) openLocked() (*pipeConn, error) {
	p.dials++
	if p.dialed == nil {
		p.dialed = make(chan struct{})
	}
	dialed := p.dialed
	p.mu.Unlock()
	pc, err := p.open()
	p.mu.Lock()
	p.dials--
	if p.dials == 0 {
		close(dialed)
		p.dialed = nil
	}
	if err == nil {
		if p.closed {
			p.mu.Unlock()
			pc.fail(ErrClosed)
			return nil, ErrClosed
		}
		p.conns = append(p.conns, pc)
	}
	p.mu.Unlock()
	return pc, err
}

func (p *pipeline) open() (*pipeConn, error) {
	nc, err := p.dial(p.addr, p.o.DialTimeout)
	if err != nil {
		return nil, err
	}
	raw := nc
	if t, ok := nc.(*trackedConn); ok {
		raw = t.Conn // the reader and writer run concurrently: no idle probe state
	}
	if p.tls {
		raw = tlsClient(raw, p.addr, p.o.TLSConfig)
	} else {
		raw = newRawIO(raw) // the reader and writer leave sysmon asleep (rawIO)
	}
	pc := &pipeConn{
		p: p, nc: nc, raw: raw,
		bw:       bufio.NewWriterSize(raw, 16<<10),
		br:       bufio.NewReaderSize(raw, 16<<10),
		wake:     make(chan struct{}, 1),
		lastUsed: time.Now(),
	}
	go pc.writeLoop()
	go pc.readLoop()
	return pc, nil
}

// close fails every request and closes the connections.
func (p *pipeline) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, pc := range conns {
		pc.fail(ErrClosed)
	}
}

// pipeConn is one pipelined connection with its writer and reader goroutines.
type pipeConn struct {
	p   *pipeline
	nc  net.Conn // as dialed (tracked, for Close); bw and br use the connection under it
	raw net.Conn // that connection (TLS over it for https), for the reader's deadline
	bw  *bufio.Writer
	br  *bufio.Reader

	wake chan struct{}

	mu          sync.Mutex
	queue       []*pipeCall // to write
	spare       []*pipeCall // the writer's batch slice, swapped with queue
	fifo        []*pipeCall // written, awaiting their responses in order
	outstanding int         // queued + written, not yet answered
	owed        int64       // their estimates, in µs (PipelineShort)
	gaveUp      int         // of those, abandoned by their callers
	noNew       bool        // takes no new requests
	streaming   bool        // a caller is reading an SSE reply from it
	dead        error       // set once the connection failed
	lastUsed    time.Time   // the last response, or the dial
	served      int         // responses read (the reader's alone)
	readDL      time.Time   // the read deadline set on raw (the reader's alone)
}

// load reports the outstanding requests (-1: dead) and whether it takes new ones: an
// idle connection does; a busy one only while its oldest request is younger than the
// window and (PipelineShort) the estimates of its requests add up to at most the
// budget. A connection idle for longer than IdleTimeout is closed here, before the
// backend closes it under a request (see HTTPOptions.IdleTimeout).
func (pc *pipeConn) load(now time.Time, wait time.Duration) (int, bool) {
	pc.mu.Lock()
	if pc.dead != nil {
		pc.mu.Unlock()
		return -1, false
	}
	if pc.expiredLocked(now) {
		pc.mu.Unlock()
		pc.fail(errStaleConn)
		return -1, false
	}
	defer pc.mu.Unlock()
	young := true
	if oldest := pc.oldestLocked(); oldest != nil {
		pc.stallLocked(oldest, now, wait)
		young = pc.p.saturated(wait) ||
			now.Sub(oldest.since)-wait < pc.p.o.PipelineWindow && pc.owed <= pc.p.budget
	}
	return pc.outstanding, !pc.noNew && young
}

// stallLocked books the kind of c, the connection's oldest outstanding request, as
// slow once c has been the backend's to answer for longer than the slow limit
// (PipelineShort): a stall is learnt when it starts delaying the requests behind it,
// not only when it ends, so that no more calls of its kind join a pipeline meanwhile.
// Its time is counted less wait, the router's own recent wait for a CPU (routerWait).
func (pc *pipeConn) stallLocked(c *pipeCall, now time.Time, wait time.Duration) {
	p := pc.p
	if p.calls == nil || c.stalled || now.Sub(later(c.since, pc.lastUsed))-wait <= p.slow {
		return
	}
	c.stalled = true
	p.calls.record(c.kind, noTime, true)
}

// expiredLocked reports a connection idle for longer than IdleTimeout, and then takes
// no new requests: one sent after this check would be failed as never written when it
// may have been.
func (pc *pipeConn) expiredLocked(now time.Time) bool {
	if pc.outstanding > 0 || pc.streaming || now.Sub(pc.lastUsed) <= pc.p.o.IdleTimeout {
		return false
	}
	pc.noNew = true
	return true
}

// oldestLocked returns the oldest outstanding request, nil when there is none.
func (pc *pipeConn) oldestLocked() *pipeCall {
	switch {
	case len(pc.fifo) > 0:
		return pc.fifo[0]
	case len(pc.queue) > 0:
		return pc.queue[0]
	}
	return nil
}

// enqueue queues c for the writer; false when the connection cannot take it.
func (pc *pipeConn) enqueue(c *pipeCall) bool {
	pc.mu.Lock()
	if pc.dead != nil || pc.noNew || pc.outstanding >= pc.p.o.PipelineDepth {
		pc.mu.Unlock()
		return false
	}
	c.since = time.Now()
	c.pending = true
	pc.outstanding++
	pc.owed += c.est
	pc.queue = append(pc.queue, c)
	pc.mu.Unlock()
	select {
	case pc.wake <- struct{}{}:
	default:
	}
	return true
}

// abandon gives up c for its caller; false when c was delivered first. A response
// still to come will be thrown away, so the connection takes no new requests behind it;
// once every outstanding request was given up nothing is lost by closing it.
func (pc *pipeConn) abandon(c *pipeCall) bool {
	pc.mu.Lock()
	if !c.state.CompareAndSwap(callWaiting, callAbandoned) {
		pc.mu.Unlock()
		return false
	}
	all := false
	if c.pending {
		pc.noNew = true
		pc.gaveUp++
		all = pc.gaveUp >= pc.outstanding
	}
	since := c.since
	pc.mu.Unlock()
	pc.p.recordLate(c.kind, time.Since(since))
	if all {
		pc.fail(fmt.Errorf("upstream: %s: every request on a pipelined connection was given up", pc.p.o.Name))
	}
	return true
}

// settledLocked books c as no longer outstanding (answered, or dropped before it was
// written).
func (pc *pipeConn) settledLocked(c *pipeCall) {
	c.pending = false
	pc.outstanding--
	pc.owed -= c.est
	if c.state.Load() == callAbandoned {
		pc.gaveUp--
	}
}

// answered books one response, and its time for the record: from when the backend
// could start on it (it was written, or the response before it was read) to now. An
// SSE reply (streaming) keeps the connection busy and closed to new requests until its
// caller has read it, and counts as slow. retired reports a connection that takes
// nothing new and owes nothing: it should be closed.
func (pc *pipeConn) answered(c *pipeCall, streaming bool) (retired bool) {
	now := time.Now()
	pc.mu.Lock()
	pc.settledLocked(c)
	took := now.Sub(later(c.since, pc.lastUsed))
	pc.lastUsed = now
	if streaming {
		pc.noNew, pc.streaming = true, true // do not queue behind a stream of unknown length
	}
	retired = !streaming && pc.noNew && pc.outstanding == 0
	pc.mu.Unlock()
	pc.p.recordReply(c.kind, took, streaming)
	return retired
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// streamed books the end of an SSE reply; retired as for answered.
func (pc *pipeConn) streamed() (retired bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.streaming = false
	pc.lastUsed = time.Now()
	return pc.outstanding == 0
}

// fail closes the connection and fails everything on it: err for what was written,
// errStaleConn for what was not.
func (pc *pipeConn) fail(err error) {
	pc.mu.Lock()
	if pc.dead != nil {
		pc.mu.Unlock()
		return
	}
	pc.dead = err
	queue, fifo := pc.queue, pc.fifo
	pc.queue, pc.fifo = nil, nil
	pc.outstanding, pc.gaveUp, pc.owed = 0, 0, 0
	pc.mu.Unlock()
	_ = pc.nc.Close()
	select {
	case pc.wake <- struct{}{}: // the writer sees dead and ends
	default:
	}
	for _, c := range fifo {
		c.deliver(err)
		c.unref()
	}
	for _, c := range queue {
		c.deliver(errStaleConn)
		c.unref()
	}
}

// writeLoop writes queued requests. When requests are already in flight (the
// connection is under load), it yields once after taking the first batch, so that the
// requests of other goroutines that are ready to run join it in the same system call;
// a lone request goes out at once.
func (pc *pipeConn) writeLoop() {
	for range pc.wake {
		written := 0
		for round := 0; ; round++ {
			pc.mu.Lock()
			if pc.dead != nil {
				pc.mu.Unlock()
				return
			}
			busy := len(pc.fifo) > 0
			batch := pc.queue
			pc.queue = pc.spare[:0]
			n := 0
			for _, c := range batch {
				if c.state.Load() == callAbandoned {
					pc.settledLocked(c)
					c.unref() // never written: the reader will not see it
					continue
				}
				pc.fifo = append(pc.fifo, c)
				// The writer's own reference while it reads c.wbuf: the reader may fail
				// the connection meanwhile and hand c back to its caller, who may
				// release it to the pool for another request.
				c.refs.Add(1)
				batch[n] = c
				n++
			}
			pc.mu.Unlock()
			for _, c := range batch[:n] {
				_, _ = pc.bw.Write(c.wbuf.Bytes())
				c.unref()
			}
			written += n
			clear(batch)
			pc.spare = batch[:0]
			if len(batch) == 0 && round > 0 {
				break
			}
			if round == 0 {
				if !busy && n <= 1 {
					break
				}
				runtime.Gosched()
			}
			if round > 4 { // a steady stream: flush now and then
				break
			}
		}
		if err := pc.bw.Flush(); err != nil {
			pc.writeFailed()
			return
		}
		pc.p.wrote(written)
	}
}

// writeFailed stops the writer after a failed write, and the connection takes nothing
// new. The backend may have answered what was written before it closed the connection
// (a response with Connection: close, then a reset for the requests behind it): the
// reader still delivers those, and fails the rest when the connection ends (as stale
// after Connection: close, so that they are retried). Failing them here instead would
// report calls the backend ran as failed.
func (pc *pipeConn) writeFailed() {
	pc.mu.Lock()
	pc.noNew = true
	pc.mu.Unlock()
}

// readLoop reads the responses in order and hands each to its request.
func (pc *pipeConn) readLoop() {
	maxBody := pc.p.o.MaxMessage
	for {
		if err := pc.nextResponse(); err != nil {
			if err != errIdleConn {
				err = fmt.Errorf("upstream: %s: %w", pc.p.o.Name, err)
			}
			pc.fail(err)
			return
		}
		pc.mu.Lock()
		if len(pc.fifo) == 0 {
			pc.mu.Unlock()
			pc.fail(fmt.Errorf("%w: %s: response without a request on a pipelined connection", ErrProtocol, pc.p.o.Name))
			return
		}
		c := pc.fifo[0]
		copy(pc.fifo, pc.fifo[1:])
		pc.fifo[len(pc.fifo)-1] = nil
		pc.fifo = pc.fifo[:len(pc.fifo)-1]
		pc.mu.Unlock()
		if err := pc.readResponse(c, maxBody); err != nil {
			err = fmt.Errorf("upstream: %s: %w", pc.p.o.Name, err)
			c.deliver(err)
			c.unref()
			pc.fail(err)
			return
		}
		closing, streaming := c.resp.ConnectionClose(), c.body.r != nil
		retired := pc.answered(c, streaming)
		pc.served++
		switch {
		case closing && pc.served == 1:
			if pc.p.oneShot.Add(1) >= 3 && !pc.p.off.Swap(true) {
				pc.p.o.Logger.Warn("backend closes connections after one response: not pipelining to it",
					"backend", pc.p.o.Name)
			}
		case pc.served == 2:
			pc.p.oneShot.Store(0)
		}
		if streaming { // an SSE reply: the caller reads it from our reader
			if !c.deliver(nil) {
				c.unref()
				pc.fail(fmt.Errorf("upstream: %s: SSE reply given up", pc.p.o.Name))
				return
			}
			eof := <-c.body.closed
			_ = c.resp.CloseBodyStream()
			c.unref()
			if !eof {
				pc.fail(fmt.Errorf("upstream: %s: SSE reply not read to its end", pc.p.o.Name))
				return
			}
			retired = pc.streamed()
		} else {
			c.deliver(nil) // false: its caller gave up, the response is dropped
			c.unref()
		}
		if closing || retired { // the backend processes nothing after this one, or we send nothing more
			pc.fail(errStaleConn)
			return
		}
	}
}

// errIdleConn ends a pipelined connection that stayed idle for IdleTimeout; nothing
// was outstanding on it.
var errIdleConn = fmt.Errorf("%w (idle pipelined connection)", errStaleConn)

// nextResponse waits for the first byte of the next response. While the connection
// owes nothing it waits only until IdleTimeout after its last use, then closes it
// (errIdleConn), as the next pick would (load): a Conn that goes quiet must not keep
// its pipelined connections, and their two goroutines each, for as long as the backend
// keeps them open, which may be for ever. The response itself is read without a
// deadline (an SSE reply may stream for longer than IdleTimeout).
func (pc *pipeConn) nextResponse() error {
	for pc.br.Buffered() == 0 {
		pc.mu.Lock()
		var dl time.Time
		if pc.outstanding == 0 {
			dl = pc.lastUsed.Add(pc.p.o.IdleTimeout)
		}
		pc.mu.Unlock()
		if err := pc.setReadDeadline(dl); err != nil {
			return err
		}
		_, err := pc.br.Peek(1)
		if err == nil {
			break
		}
		if !isTimeout(err) {
			return err
		}
		pc.mu.Lock()
		expired := pc.expiredLocked(time.Now()) // else a request went out meanwhile: wait for it
		pc.mu.Unlock()
		if expired {
			return errIdleConn
		}
	}
	return pc.setReadDeadline(time.Time{})
}

// setReadDeadline sets raw's read deadline when it changes: under load it stays unset,
// and costs nothing per response.
func (pc *pipeConn) setReadDeadline(dl time.Time) error {
	if dl.Equal(pc.readDL) {
		return nil
	}
	pc.readDL = dl
	return pc.raw.SetReadDeadline(dl)
}

// readResponse reads one response into c.resp: an SSE body is left to the caller (as
// c.body), any other body is read whole.
func (pc *pipeConn) readResponse(c *pipeCall, maxBody int) error {
	resp := &c.resp
	resp.Reset()
	if err := readHead(resp, pc.br); err != nil {
		return err
	}
	if noBody(resp.StatusCode()) {
		return nil
	}
	if isSSE(resp) {
		resp.StreamBody = true
		if err := resp.ReadBody(pc.br, 0); err != nil {
			return err
		}
		c.body.r, c.body.pc, c.body.eof = resp.BodyStream(), pc, false
		return nil
	}
	resp.StreamBody = false
	if err := resp.ReadBody(pc.br, maxBody); err != nil {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return ErrTooLarge
		}
		return err
	}
	if resp.Header.ContentLength() == -1 {
		if err := resp.Header.ReadTrailer(pc.br); err != nil {
			return err
		}
	}
	return nil
}

// tlsClient wraps a dialed connection in TLS for addr (host:port).
func tlsClient(c net.Conn, addr string, cfg *tls.Config) net.Conn {
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	cfg.NextProtos = []string{"http/1.1"}
	return tls.Client(c, cfg)
}
