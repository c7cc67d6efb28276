package workers

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/ants/v2"
)

// Job is one unit of work. The dispatcher calls its methods; it never copies or
// retains a Job after its final call, so jobs are meant to be pooled by the caller
// (a *T from a sync.Pool) and Dispatch allocates nothing.
//
// Lifecycle of a job accepted by Dispatch (nil error), exactly one of:
//   - Prepare returns false: done;
//   - Prepare returns true, then Run returns normally: done;
//   - Prepare returns true, then Fail(err) instead of Run: the dispatcher was closed
//     before a worker took it (err is ErrClosed);
//   - Prepare returns true, Run panics, then Fail(err) with err a *PanicError;
//   - Prepare panics, then Fail(err) with err a *PanicError;
//   - Fail(ErrClosed) without Prepare: Close gave up waiting (its context ended) before
//     the shard reached the job.
//
// A job refused by Dispatch (non-nil error) is never touched: the caller still owns it.
// The final call may recycle the job as its last action.
type Job interface {
	// Prepare runs one job at a time per shard, in Dispatch order for the shard (hence
	// per key; see the package doc for the exact guarantee). It runs on the shard's
	// goroutine or, on the fast path (shard idle), on the goroutine calling Dispatch,
	// before Dispatch returns: the caller must not hold, across Dispatch, anything
	// Prepare (or Fail) needs. It must be quick and must not block: no I/O, no waiting
	// on locks held across I/O, no waiting for other jobs. It returns whether Run is
	// needed; a job that is fully handled here (a notification, a cancellation)
	// returns false.
	Prepare() bool

	// Run runs on a pool worker, concurrently with other jobs, including other jobs of
	// the same key. It may block (on a backend, say); while it does it holds one of
	// Config.PoolSize workers.
	Run()

	// Fail is called instead of Run when the job could not be run, or after Prepare or
	// Run panicked; err matches ErrClosed or ErrPanic under errors.Is. It runs on the
	// goroutine that was running Prepare or Run (a shard goroutine, the caller of
	// Dispatch on the fast path, or a worker) and must not block.
	Fail(err error)
}

// Dispatcher is the sharded dispatcher. Its methods are safe for concurrent use.
type Dispatcher struct {
	cfg    Config
	shards []shard
	pools  []*pool

	closing    atomic.Bool   // set by the first Close: no more intake
	aborted    atomic.Bool   // Close's context ended: fail instead of run
	abort      chan struct{} // closed together with aborted being set
	abortOnce  sync.Once
	liveShards atomic.Int32  // shard goroutines still running
	shardsDone chan struct{} // closed when liveShards reaches 0

	panics     atomic.Uint64 // recovered from Prepare or Run
	failPanics atomic.Uint64 // recovered from Fail (or the panic hook)

	// noFastPath makes every Dispatch queue, as before the fast path existed. Tests and
	// benchmarks set it right after New, before any Dispatch, to compare the two.
	noFastPath bool
}

// shard is one queue plus the goroutine that prepares its jobs. Fields written only by
// producers (Dispatch), fields written by both, and fields written only by the shard
// goroutine sit on separate cache lines.
type shard struct {
	// Producer side. mu orders Dispatch's send against Close's close(q): Dispatch sends
	// under RLock after checking closed, Close sets closed and closes q under Lock,
	// so a send never meets a closed channel and no accepted job is stranded.
	mu        sync.RWMutex
	closed    bool
	q         chan Job
	overloads atomic.Uint64
	overErr   *OverloadError
	_         [64]byte

	// Shared by Dispatch's fast path and the shard goroutine; see tryInline for how
	// they keep Prepare ordered. acceptMu is held around every accept, wherever it
	// runs. pending counts jobs Dispatch put on q whose accept has not finished yet:
	// Dispatch adds 1 before the send (and takes it back if the queue is full), the
	// shard goroutine subtracts 1 after accepting the job, under acceptMu.
	acceptMu  sync.Mutex
	pending   atomic.Int64
	inline    atomic.Uint64 // jobs accepted on the fast path, for Stats
	ranInline atomic.Uint64 // of those, jobs DispatchRun ran on its caller
	_         [64]byte

	// Consumer side: owned by the shard goroutine. The atomics mirror its state for
	// Stats; readyLen is also read by the fast path.
	d         *Dispatcher
	pool      *pool
	ready     ring
	readyLen  atomic.Int64
	prepared  atomic.Uint64
	submitted atomic.Uint64
	_         [64]byte
}

// pool is an ants pool plus the token semaphore that admits jobs to it. A shard takes
// a token before Invoke and the worker returns it after Run, so Invoke never has to
// wait for capacity (beyond the instant it takes a finished worker to park itself),
// and a shard can wait for a token in a select alongside its queue and the abort
// signal — which ants' blocking Invoke does not allow.
//
// The semaphore is a channel rather than an atomic counter on purpose: under
// saturation a release hands the token to exactly one waiting shard, in FIFO order, so
// a shard with a backlog is never starved by shards that happen to be running, and a
// release never wakes a herd. It costs two channel operations per job (see
// bench/RESULTS.md).
type pool struct {
	d    *Dispatcher
	ants *ants.PoolWithFuncGeneric[Job]
	sem  chan struct{}
}

// New starts a Dispatcher: one goroutine per shard; pool workers are started on
// demand and reaped when idle. Stop it with Close.
func New(cfg Config) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Dispatcher{
		cfg:        cfg,
		shards:     make([]shard, cfg.Shards),
		abort:      make(chan struct{}),
		shardsDone: make(chan struct{}),
	}
	size, count := cfg.pools()
	d.pools = make([]*pool, 0, count)
	for range count {
		p := &pool{d: d, sem: make(chan struct{}, size)}
		ap, err := ants.NewPoolWithFuncGeneric(size, p.run,
			ants.WithExpiryDuration(cfg.IdleTimeout),
			// Defensive: run recovers every panic, including Fail's and the hook's,
			// so nothing should reach this. If something does, count it rather than
			// let ants log it.
			ants.WithPanicHandler(func(any) { d.failPanics.Add(1) }),
		)
		if err != nil {
			for _, p := range d.pools {
				p.ants.Release()
			}
			return nil, err
		}
		p.ants = ap
		d.pools = append(d.pools, p)
	}
	d.liveShards.Store(int32(cfg.Shards))
	for i := range d.shards {
		s := &d.shards[i]
		s.d = d
		s.q = make(chan Job, cfg.QueueDepth)
		s.overErr = newOverloadError(i, cfg.RetryAfter)
		s.pool = d.pools[i%len(d.pools)]
		s.ready.buf = make([]Job, cfg.ReadyDepth)
		go s.loop()
	}
	return d, nil
}

// Dispatch hands j to the shard of key. It returns nil when the job was accepted (the
// dispatcher now owns it until its final call), an *OverloadError matching
// ErrOverloaded when the shard's queue is full, or ErrClosed after Close. It never
// blocks on a full queue or on a busy shard and does not allocate. j must not be nil.
//
// Usually Dispatch queues j and returns at once. When the shard is idle and a worker
// is free (the fast path, see the package doc), it calls j.Prepare itself and hands j
// to the pool before returning, saving the wake-up of the shard goroutine; the hand-off
// may then wait the instant it takes a worker that just finished to park itself.
//
// Dispatch may be called from Prepare, Run and Fail.
func (d *Dispatcher) Dispatch(key uint64, j Job) error { return d.dispatch(key, j, false) }

// DispatchRun is Dispatch for a caller that would only wait for the job's answer (an
// HTTP request's goroutine): on the fast path it also calls j.Run itself, after
// Prepare, instead of handing j to a worker, and returns once Run has, saving the
// hand-off to a worker and the wake-up of the caller. The inline Run holds the worker
// token a pooled Run would (Config.PoolSize bounds both together, Stats.Busy counts
// it), a panic in it is handled as on a worker (Fail with a *PanicError, on the
// caller), and Close waits for it. Off the fast path it is Dispatch: it queues j and
// returns at once.
//
// Ordering is unchanged: the shard is released once Prepare returns, before Run, so the
// next job of the shard does not wait for this Run, exactly as when a worker runs it.
//
// Never call it where Run must not block the caller: a loop reading one connection's
// messages (stdio, a message bus) would run them one at a time, and a caller that must
// serve the job's streamed output while it runs would hold that output back until Run
// returns.
func (d *Dispatcher) DispatchRun(key uint64, j Job) error { return d.dispatch(key, j, true) }

// CallerRunner is a Job that knows only once prepared whether its Run may block the
// caller of DispatchRun (a forward whose backend answers in a way the caller could not
// serve meanwhile): DispatchRun asks RunsOnCaller right after a Prepare that returned
// true, on the fast path, and hands the job to a worker as Dispatch would when it says
// false. It is called under the shard's accept step and must be as quick as Prepare.
type CallerRunner interface {
	Job
	RunsOnCaller() bool
}

// runsOnCaller is j's say on running on DispatchRun's caller: yes unless j is a
// CallerRunner that says no.
func runsOnCaller(j Job) bool {
	cr, ok := j.(CallerRunner)
	return !ok || cr.RunsOnCaller()
}

func (d *Dispatcher) dispatch(key uint64, j Job, run bool) error {
	if j == nil {
		panic("workers: Dispatch of a nil Job")
	}
	s := &d.shards[key%uint64(len(d.shards))]
	if s.pending.Load() == 0 && !d.noFastPath && s.tryInline(j, run) {
		return nil
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	s.pending.Add(1) // before the send: see tryInline
	select {
	case s.q <- j:
		s.mu.RUnlock()
		return nil
	default:
	}
	s.pending.Add(-1)
	s.mu.RUnlock()
	s.overloads.Add(1)
	return s.overErr
}

// tryInline is Dispatch's fast path: it runs the shard's accept step for j on the
// calling goroutine and reports true, or does nothing and reports false, and then
// Dispatch queues j as usual. It runs only when, under acceptMu, the shard has no job
// queued or being accepted (pending == 0), no prepared job waiting for a worker
// (readyLen == 0), Close has not started, and a worker token is free. It takes the
// token before Prepare, so it never needs the ready list, which stays the shard
// goroutine's alone: a job that cannot get a worker at once takes the usual path.
//
// Why Prepare stays serialised and in Dispatch order per shard:
//
//   - Serialised: every accept, inline or on the shard goroutine, holds acceptMu.
//     tryInline only tries the lock (TryLock), so it never waits: a Prepare that
//     dispatches to its own shard, or two Dispatch calls racing for an idle shard,
//     simply fall back to the queue, and a chain of inline Dispatch calls from
//     Prepare can visit each shard at most once.
//   - Ordered: let Dispatch(k, a) return nil before Dispatch(k, b) starts. If a was
//     accepted inline, a.Prepare returned inside Dispatch(k, a), so before anything b
//     does. If a was queued, Dispatch(k, a) added 1 to pending before sending a, and
//     the shard goroutine subtracts it only after a.Prepare has returned, under
//     acceptMu. b reads pending after that addition, so reading 0 means a's
//     subtraction came first (each subtraction follows its own job's addition, so
//     pending returns to 0 only once every earlier addition is matched), and the read
//     synchronises with it (Go's atomics are sequentially consistent): a.Prepare
//     happens before b.Prepare. A job the shard goroutine has taken off q but not yet
//     prepared is still counted, which is what a test of len(q) alone would miss.
//     Whenever b does not go inline (pending != 0, or any other reason), it is queued
//     after a on q, which is FIFO, and the shard goroutine accepts one job at a time,
//     as before.
//   - Close: tryInline reads d.closing under acceptMu, and a shard goroutine takes
//     acceptMu once more before it exits (see loop), after q was closed, which Close
//     does after setting closing. So an inline accept either sees closing and backs
//     off, or finishes before its shard goroutine exits; Close, which waits for every
//     shard goroutine before releasing the pools, therefore never releases a pool
//     under an inline accept that has not yet submitted, unless its context ended
//     and it gave up, in which case the submit fails and the job gets Fail(ErrClosed)
//     like any other job Close abandoned.
//
// pending is read twice: by Dispatch before it tries the lock, which keeps producers
// off acceptMu while the shard is busy, and again here under the lock. The ordering
// argument only needs a read made after Dispatch(k, b) started, which both are; the
// second keeps the rule simple to state (accept inline only if nothing is pending
// under the lock) for the price of one load. readyLen is checked so that an inline job does not take a worker ahead of prepared
// jobs already waiting for one. It only grows inside accept (under acceptMu), so 0
// under the lock is exact; a stale non-zero value just sends j to the queue.
//
// Taking the token first means a worker slot is reserved while an inline Prepare
// runs, and is given back when Prepare returns false or panics: the number of Run
// calls is still bounded by the pool size, and no token is taken while shards are
// waiting for one (they wait in a send on the full semaphore, which a non-blocking
// send cannot overtake).
//
// With run (DispatchRun), Run follows on the calling goroutine once acceptMu is
// released, through the pool's own run, so it holds the token a worker would, its panic
// is recovered and the token given back exactly as on a worker. Close waits for it by
// taking every token back (see Close): the token was taken before closing was seen to
// be false under acceptMu, so before Close's shard barrier, hence before Close waits.
func (s *shard) tryInline(j Job, run bool) bool {
	if !s.acceptMu.TryLock() {
		return false
	}
	if s.pending.Load() != 0 || s.readyLen.Load() != 0 || s.d.closing.Load() {
		s.acceptMu.Unlock()
		return false
	}
	select {
	case s.pool.sem <- struct{}{}:
	default:
		s.acceptMu.Unlock()
		return false
	}
	s.inline.Add(1)
	s.prepared.Add(1)
	if !s.d.prepare(j) {
		<-s.pool.sem
		s.acceptMu.Unlock()
		return true
	}
	if !run || !runsOnCaller(j) {
		s.submit(j)
		s.acceptMu.Unlock()
		return true
	}
	s.submitted.Add(1)
	s.ranInline.Add(1)
	s.acceptMu.Unlock()
	s.pool.run(j)
	return true
}

// Shard returns the index of the shard key maps to, for logs and tests.
func (d *Dispatcher) Shard(key uint64) int { return int(key % uint64(len(d.shards))) }

// Close stops intake (Dispatch returns ErrClosed from now on), lets the shards prepare
// and submit every job already accepted, then waits for running jobs to return and the
// pools' goroutines to exit. If ctx ends first, Close gives up: jobs not yet started
// get Fail(ErrClosed), running ones finish on their own, and Close returns ctx.Err().
// Only the first call does this; later calls return ErrClosed at once.
//
// Close must not be called from Prepare, Run or Fail: it would wait for itself.
func (d *Dispatcher) Close(ctx context.Context) error {
	if !d.closing.CompareAndSwap(false, true) {
		return ErrClosed
	}
	for i := range d.shards {
		s := &d.shards[i]
		s.mu.Lock()
		s.closed = true
		close(s.q)
		s.mu.Unlock()
	}
	select {
	case <-d.shardsDone:
	case <-ctx.Done():
		d.giveUp()
		return ctx.Err()
	}
	// Every accepted job has been prepared and either submitted or failed. Releasing
	// a pool stops its idle workers at once and busy ones as they return; waiting
	// for that is waiting for the jobs running on workers.
	for _, p := range d.pools {
		if err := p.ants.ReleaseContext(ctx); err != nil {
			d.giveUp()
			return err
		}
	}
	// Jobs DispatchRun runs on its caller hold a token each and no new token can be
	// taken any more (the shards have exited, the fast path sees closing): taking every
	// token back waits for the last of them to return.
	for _, p := range d.pools {
		if err := p.drain(ctx); err != nil {
			d.giveUp()
			return err
		}
	}
	return nil
}

// drain waits until no token of p is held, by taking them all, then gives them back
// (Stats reads the tokens held as Busy). Close calls it once nothing can take a token.
func (p *pool) drain(ctx context.Context) error {
	n := 0
	defer func() {
		for range n {
			<-p.sem
		}
	}()
	for ; n < cap(p.sem); n++ {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// giveUp makes the shards fail what they still hold and unblocks them.
func (d *Dispatcher) giveUp() {
	d.abortOnce.Do(func() {
		d.aborted.Store(true)
		close(d.abort)
		for _, p := range d.pools {
			p.ants.Release() // idempotent; wakes a shard waiting inside Invoke
		}
	})
}

func (d *Dispatcher) shardExited() {
	if d.liveShards.Add(-1) == 0 {
		close(d.shardsDone)
	}
}

// loop is the shard goroutine. It alternates between taking jobs off the queue (while
// the ready list has room) and moving prepared jobs to the pool (while tokens are
// free), and exits when the queue is closed and the ready list is empty. Each
// iteration either takes a job, submits one, or sees the queue closed, so it ends
// once the queue is closed and drained. Before it exits it waits for an inline accept
// still in progress on its shard (see tryInline).
func (s *shard) loop() {
	d := s.d
	defer func() {
		// An empty critical section on purpose: a barrier against an inline accept.
		s.acceptMu.Lock()
		s.acceptMu.Unlock()
		d.shardExited()
	}()
	q := s.q
	for q != nil || s.ready.n > 0 {
		var recv chan Job // nil disables the receive case
		if s.ready.n < len(s.ready.buf) {
			recv = q
		}
		var sem chan struct{}
		if s.ready.n > 0 {
			sem = s.pool.sem
		}
		select {
		case j, ok := <-recv:
			if !ok {
				q = nil
				continue
			}
			s.acceptMu.Lock()
			s.accept(j)
			s.pending.Add(-1)
			s.acceptMu.Unlock()
		case sem <- struct{}{}:
			s.submit(s.ready.pop())
			s.readyLen.Store(int64(s.ready.n))
		case <-d.abort:
			s.failRemaining(q)
			return
		}
	}
}

// accept prepares j and, if it needs to run, submits it right away when a token is
// free and nothing is waiting ahead of it, else parks it in the ready list (which the
// loop guarantees has room). The shard goroutine calls it holding acceptMu.
func (s *shard) accept(j Job) {
	d := s.d
	if d.aborted.Load() {
		d.fail(j, ErrClosed)
		return
	}
	s.prepared.Add(1)
	if !d.prepare(j) {
		return
	}
	if s.ready.n == 0 {
		select {
		case s.pool.sem <- struct{}{}:
			s.submit(j)
			return
		default:
		}
	}
	s.ready.push(j)
	s.readyLen.Store(int64(s.ready.n))
}

// submit hands j, for which a token is held, to the pool.
func (s *shard) submit(j Job) {
	if err := s.pool.ants.Invoke(j); err != nil {
		// The pool was released: Close gave up.
		<-s.pool.sem
		s.d.fail(j, ErrClosed)
		return
	}
	s.submitted.Add(1)
}

// failRemaining fails every job the shard still holds once Close has given up. q is
// closed (or nil) by then, so the drain ends.
func (s *shard) failRemaining(q chan Job) {
	for s.ready.n > 0 {
		s.d.fail(s.ready.pop(), ErrClosed)
	}
	s.readyLen.Store(0)
	for j := range q {
		s.d.fail(j, ErrClosed)
		s.pending.Add(-1)
	}
}

// prepare calls j.Prepare, turning a panic into Fail.
func (d *Dispatcher) prepare(j Job) (run bool) {
	defer func() {
		if v := recover(); v != nil {
			run = false
			d.panicked(j, v)
		}
	}()
	return j.Prepare()
}

// run is the pool function: it runs one job, turns a panic into Fail, and returns the
// job's token last, after everything that touches the job.
func (p *pool) run(j Job) {
	defer p.release()
	defer func() {
		if v := recover(); v != nil {
			p.d.panicked(j, v)
		}
	}()
	j.Run()
}

func (p *pool) release() { <-p.sem }

func (d *Dispatcher) panicked(j Job, v any) {
	d.panics.Add(1)
	pe := newPanicError(v)
	d.hook(pe)
	d.fail(j, pe)
}

// fail calls j.Fail, containing a panic in it.
func (d *Dispatcher) fail(j Job, err error) {
	defer func() {
		if v := recover(); v != nil {
			d.failPanics.Add(1)
			d.hook(newPanicError(v))
		}
	}()
	j.Fail(err)
}

func (d *Dispatcher) hook(pe *PanicError) {
	if d.cfg.PanicHook == nil {
		return
	}
	defer func() { _ = recover() }() // a broken hook must not take a worker down
	d.cfg.PanicHook(pe)
}

// ring is a fixed-capacity FIFO of prepared jobs, owned by one shard goroutine.
type ring struct {
	buf  []Job
	head int
	n    int
}

func (r *ring) push(j Job) {
	i := r.head + r.n
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	r.buf[i] = j
	r.n++
}

func (r *ring) pop() Job {
	j := r.buf[r.head]
	r.buf[r.head] = nil // do not keep a recycled job reachable
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
	return j
}
