package workers

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of Dispatch's fast path: the accept step (Prepare, then submit) run by Dispatch
// itself when the shard is idle and a worker is free.

// queuedOnly turns the fast path off, so that every Dispatch queues as it did before
// the fast path existed. Call it right after New, before any Dispatch.
func queuedOnly(d *Dispatcher) *Dispatcher {
	d.noFastPath = true
	return d
}

// holdInPrepare dispatches j to key on a goroutine of its own and returns once j's
// Prepare runs on the fast path, where it is held until open is called (open may be
// called more than once: defer it, for the failure paths). dispatched receives
// Dispatch's result.
func holdInPrepare(t *testing.T, d *Dispatcher, key uint64, j *funcJob) (open func(), dispatched <-chan error) {
	t.Helper()
	gate, inPrepare := make(chan struct{}), make(chan struct{})
	open = sync.OnceFunc(func() { close(gate) })
	j.prepare = func() bool { close(inPrepare); gateWait(t, "the held Prepare", gate); return true }
	done := make(chan error, 1)
	go func() { done <- d.Dispatch(key, j) }()
	held := false
	defer func() {
		if !held {
			open() // recv failed the test: let the Dispatch goroutine end
		}
	}()
	recv(t, "the fast-path Prepare", inPrepare)
	held = true
	return open, done
}

// checkQueued dispatches a job to key, below the shard count so that it lands on shard
// key, and checks that it did not take the fast path: the shard prepared it from its
// queue.
func checkQueued(t *testing.T, d *Dispatcher, key uint64, what string) {
	t.Helper()
	j := &trackedJob{}
	if err := d.Dispatch(key, j); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queued job", func() bool { return j.prepared.Load() })
	if st := d.Stats().Shards[key]; st.Inline != 0 || st.Prepared != 1 {
		t.Errorf("%s: shard stats = %+v", what, st)
	}
}

// trackedJob is a funcJob that records, atomically, that its Prepare has returned.
type trackedJob struct {
	funcJob
	prepared atomic.Bool
}

func (j *trackedJob) Prepare() bool {
	defer j.prepared.Store(true)
	return j.funcJob.Prepare()
}

// gateWait waits for gate, reporting (not failing: it may run on any goroutine) if it
// never opens.
func gateWait(t testing.TB, what string, gate <-chan struct{}) {
	select {
	case <-gate:
	case <-time.After(patience):
		t.Errorf("%s: gate never opened", what)
	}
}

// TestFastPathTaken: on an idle shard Dispatch prepares and submits the job itself,
// and the fast path can be turned off for comparison.
func TestFastPathTaken(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 2, PoolSize: 2, PoolPerShard: m.perShard})
		ran := make(chan struct{})
		prepared := false // no lock: Prepare must run on this goroutine
		if err := d.Dispatch(1, &funcJob{
			prepare: func() bool { prepared = true; return true },
			run:     func() { close(ran) },
		}); err != nil {
			t.Fatal(err)
		}
		if !prepared {
			t.Fatal("Dispatch on an idle shard returned before Prepare")
		}
		st := d.Stats().Shards[1]
		if st.Inline != 1 || st.Prepared != 1 || st.Submitted != 1 || st.Queued != 0 || st.Ready != 0 {
			t.Errorf("shard stats = %+v", st)
		}
		recv(t, "Run", ran)
		closeDispatcher(t, d)

		q := queuedOnly(newDispatcher(t, Config{Shards: 2, PoolSize: 2, PoolPerShard: m.perShard}))
		checkQueued(t, q, 1, "with the fast path off")
		closeDispatcher(t, q)
	})
}

// TestFastPathOrderChain: goroutines take turns dispatching to one key, each passing
// the turn on after its Dispatch returned, so consecutive Dispatch calls are ordered by
// happens-before although no two come from the same goroutine. Other goroutines load
// the same shard concurrently. The pool is small and some runs are slow, so the chain
// alternates between the fast path and the queue (and sometimes the overload retry).
// Checked: Prepare in chain order, with its writes visible to the next Prepare (the
// chain's slice is unlocked: the race detector checks the happens-before), Prepare
// calls of the shard never overlap, and both paths were taken.
func TestFastPathOrderChain(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		const shards, key = 2, 5 // key 5 is on shard 1
		d := newDispatcher(t, Config{Shards: shards, QueueDepth: 4, ReadyDepth: 2, PoolSize: 4, PoolPerShard: m.perShard})
		var inPrepare [shards]atomic.Bool
		// guard wraps a Prepare body with the check that the shard runs one at a time.
		guard := func(k uint64, body func() bool) func() bool {
			s := &inPrepare[d.Shard(k)]
			return func() bool {
				if !s.CompareAndSwap(false, true) {
					t.Errorf("shard %d: two Prepare calls at once", d.Shard(k))
				}
				defer s.Store(false)
				return body()
			}
		}

		const producers, steps = 6, 2000
		var seen []int // chain jobs' Prepare only
		var chainRuns, wantChainRuns atomic.Int64
		batons := make([]chan int, producers)
		for p := range batons {
			batons[p] = make(chan int, 1)
		}
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for n := range batons[p] {
					if n == steps {
						for _, b := range batons {
							close(b)
						}
						return
					}
					j := &funcJob{fail: func(err error) { t.Errorf("chain job %d: Fail(%v)", n, err) }}
					switch n % 8 {
					case 0, 4: // a notification: Prepare only
						j.prepare = guard(key, func() bool { seen = append(seen, n); return false })
					case 1: // a slow call: holds a worker for a while
						wantChainRuns.Add(1)
						j.prepare = guard(key, func() bool { seen = append(seen, n); return true })
						j.run = func() { time.Sleep(50 * time.Microsecond); chainRuns.Add(1) }
					default:
						wantChainRuns.Add(1)
						j.prepare = guard(key, func() bool { seen = append(seen, n); return true })
						j.run = func() { chainRuns.Add(1) }
					}
					next := n + 1
					if err := dispatchRetry(d, key, j); err != nil {
						t.Errorf("chain job %d: %v", n, err)
						next = steps // end the chain
					}
					batons[(p+1)%producers] <- next
				}
			})
		}

		// Noise on both shards from goroutines outside the chain, each with one job
		// in flight at a time, so that the shards are sometimes busy and sometimes idle.
		// A noise goroutine yields after each job and stops after a bounded number:
		// with one P, it and a pool worker would otherwise hand the P back and forth
		// and keep the chain waiting for preemption.
		stop := make(chan struct{})
		var noise sync.WaitGroup
		for g := range 3 {
			noise.Go(func() {
				k := uint64(g) // 0 and 2 on shard 0, 1 on shard 1
				done := make(chan struct{}, 1)
				for i := range 4 * steps {
					select {
					case <-stop:
						return
					default:
					}
					j := &funcJob{
						prepare: guard(k, func() bool {
							if i%2 == 0 {
								done <- struct{}{}
								return false
							}
							return true
						}),
						run:  func() { done <- struct{}{} },
						fail: func(err error) { t.Errorf("noise job: Fail(%v)", err) },
					}
					if err := dispatchRetry(d, k, j); err != nil {
						t.Error(err)
						return
					}
					select {
					case <-done:
					case <-time.After(patience):
						t.Error("a noise job did not finish")
						return
					}
					runtime.Gosched()
				}
			})
		}

		batons[0] <- 0
		wg.Wait()
		close(stop)
		noise.Wait()
		closeDispatcher(t, d)

		if len(seen) != steps {
			t.Fatalf("%d chain jobs prepared, want %d", len(seen), steps)
		}
		for i, v := range seen {
			if v != i {
				t.Fatalf("Prepare #%d was chain job %d", i, v)
			}
		}
		if chainRuns.Load() != wantChainRuns.Load() {
			t.Errorf("chain runs = %d, want %d", chainRuns.Load(), wantChainRuns.Load())
		}
		st := d.Stats().Shards[1]
		t.Logf("shard 1: %d prepared, %d inline, %d overloads", st.Prepared, st.Inline, st.Overloads)
		if st.Inline == 0 || st.Inline == st.Prepared {
			t.Errorf("shard 1: %d of %d jobs inline: want both paths taken", st.Inline, st.Prepared)
		}
	})
}

// TestFastPathInterleave walks one shard through both paths step by step: the fast
// path while idle; the queue while the pool is saturated, while a prepared job waits
// in the ready list, and while the shard goroutine is in the middle of a Prepare
// (here one dispatched from a fast-path Prepare of the same shard); and the fast path
// again once idle. Prepare order is Dispatch order throughout.
func TestFastPathInterleave(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 1, QueueDepth: 4, ReadyDepth: 2, PoolSize: 1, PoolPerShard: m.perShard})
		var order []string // Prepare only
		ran := make(chan string, 16)
		job := func(name string, run bool) *trackedJob {
			j := &trackedJob{}
			j.prepare = func() bool { order = append(order, name); return run }
			j.run = func() { ran <- name }
			j.fail = func(err error) { t.Errorf("%s: Fail(%v)", name, err) }
			return j
		}
		inline := func(name string, j *trackedJob) {
			t.Helper()
			before := d.Stats().Shards[0].Inline
			if err := d.Dispatch(0, j); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !j.prepared.Load() || d.Stats().Shards[0].Inline != before+1 {
				t.Fatalf("%s: not taken on the fast path", name)
			}
		}
		queued := func(name string, j *trackedJob) {
			t.Helper()
			before := d.Stats().Shards[0].Inline
			if err := d.Dispatch(0, j); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if d.Stats().Shards[0].Inline != before {
				t.Fatalf("%s: taken on the fast path", name)
			}
		}

		gate := make(chan struct{})
		a := job("a", true)
		a.run = func() { gateWait(t, "a", gate); ran <- "a" }
		inline("a", a) // takes the only worker
		if st := d.Stats(); st.Busy != 1 {
			t.Fatalf("Busy = %d after a fast-path submit", st.Busy)
		}
		b := job("b", true)
		queued("b", b) // no worker: queued, prepared, parked
		waitFor(t, "b in the ready list", func() bool { return d.Stats().Shards[0].Ready == 1 })
		c := job("c", false)
		queued("c", c) // b is waiting for a worker: c must not overtake it
		waitFor(t, "c prepared", func() bool { return c.prepared.Load() })
		close(gate)
		recv(t, "a run", ran)
		recv(t, "b run", ran)
		waitFor(t, "the shard to go idle", func() bool {
			st := d.Stats()
			return st.Busy == 0 && st.Shards[0].Ready == 0
		})
		inline("d", job("d", false))
		inline("e", job("e", true))
		recv(t, "e run", ran)
		waitFor(t, "a free worker", func() bool { return d.Stats().Busy == 0 })

		// h, on the fast path, dispatches g to its own shard: g is queued (h holds
		// the shard), and the shard goroutine's Prepare of g waits on a gate. i,
		// dispatched meanwhile with a worker free and nothing in the queue, must
		// wait behind g without blocking Dispatch.
		gGate, inG := make(chan struct{}), make(chan struct{})
		g := job("g", true)
		g.prepare = func() bool {
			order = append(order, "g")
			close(inG)
			gateWait(t, "g", gGate)
			return true
		}
		h := job("h", false)
		h.prepare = func() bool {
			order = append(order, "h")
			if err := d.Dispatch(0, g); err != nil {
				t.Errorf("dispatch of g from h's Prepare: %v", err)
			}
			return false
		}
		inline("h", h)
		recv(t, "the shard to start preparing g", inG)
		i := job("i", true)
		queued("i", i)
		if i.prepared.Load() {
			t.Fatal("i prepared while g's Prepare was still running")
		}
		close(gGate)
		for range 2 {
			recv(t, "g and i to run", ran)
		}
		closeDispatcher(t, d)

		want := []string{"a", "b", "c", "d", "e", "h", "g", "i"}
		if len(order) != len(want) {
			t.Fatalf("Prepare order %v, want %v", order, want)
		}
		for k := range want {
			if order[k] != want[k] {
				t.Fatalf("Prepare order %v, want %v", order, want)
			}
		}
		st := d.Stats().Shards[0]
		if st.Prepared != 8 || st.Inline != 4 || st.Submitted != 5 {
			t.Errorf("shard stats = %+v, want 8 prepared, 4 inline, 5 submitted", st)
		}
	})
}

// TestFastPathSerialised: while a fast-path Prepare runs, jobs dispatched to the same
// shard from other goroutines (not ordered after it, so free to be prepared before or
// after it, but never at the same time) are queued, and the shard goroutine does not
// prepare them until that Prepare has returned.
func TestFastPathSerialised(t *testing.T) {
	defer checkNoLeak(t)()
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 4})
	gate, inX := make(chan struct{}), make(chan struct{})
	var xRunning atomic.Bool
	x := &funcJob{prepare: func() bool {
		xRunning.Store(true)
		close(inX)
		gateWait(t, "x", gate)
		xRunning.Store(false)
		return true
	}}
	dispatched := make(chan error, 1)
	go func() { dispatched <- d.Dispatch(0, x) }()
	recv(t, "the fast-path Prepare", inX)

	const n = 4
	var prepared atomic.Int32
	for range n {
		y := &funcJob{prepare: func() bool {
			if xRunning.Load() {
				t.Error("the shard goroutine prepared a job during a fast-path Prepare")
			}
			prepared.Add(1)
			return true
		}}
		if err := d.Dispatch(0, y); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // time for a shard goroutine that would not wait
	if got := prepared.Load(); got != 0 {
		t.Errorf("%d queued jobs prepared during a fast-path Prepare", got)
	}
	// One of them may already be off the queue, in the shard goroutine's hands.
	if st := d.Stats().Shards[0]; st.Inline != 1 || st.Prepared != 1 || st.Queued < n-1 {
		t.Errorf("shard stats = %+v", st)
	}
	close(gate)
	if err := recv(t, "the fast-path Dispatch", dispatched); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queued jobs", func() bool { return prepared.Load() == n })
	closeDispatcher(t, d)
}

// TestFastPathOverload: free workers do not let Dispatch go past a full queue. The
// shard goroutine is stuck in a Prepare, so the shard is not idle: the next job fills
// the queue and the one after is refused, untouched, although no worker is busy.
func TestFastPathOverload(t *testing.T) {
	defer checkNoLeak(t)()
	d := newDispatcher(t, Config{Shards: 1, QueueDepth: 1, ReadyDepth: 1, PoolSize: 4})
	gate, inF := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	f := &funcJob{
		prepare: func() bool { close(inF); gateWait(t, "f", gate); return true },
		run:     func() { ran.Add(1) },
	}
	// h, prepared on the fast path, dispatches f to its own shard, which queues it.
	h := &funcJob{prepare: func() bool {
		if err := d.Dispatch(0, f); err != nil {
			t.Errorf("dispatch of f: %v", err)
		}
		return false
	}}
	if err := d.Dispatch(0, h); err != nil {
		t.Fatal(err)
	}
	recv(t, "the shard to start preparing f", inF)
	if err := d.Dispatch(0, &funcJob{run: func() { ran.Add(1) }}); err != nil {
		t.Fatalf("Dispatch into the empty queue: %v", err)
	}
	refused := &funcJob{
		prepare: func() bool { t.Error("refused job was prepared"); return false },
		fail:    func(err error) { t.Errorf("refused job got Fail(%v)", err) },
	}
	err := d.Dispatch(0, refused)
	var oe *OverloadError
	if !errors.As(err, &oe) || oe.Shard != 0 {
		t.Fatalf("Dispatch with the queue full and workers free = %v, want *OverloadError", err)
	}
	st := d.Stats()
	if st.Overloads != 1 || st.Busy != 0 || st.Shards[0].Queued != 1 || st.Shards[0].Inline != 1 {
		t.Errorf("Stats = %+v", st)
	}
	close(gate)
	waitFor(t, "f and the queued job to run", func() bool { return ran.Load() == 2 })
	waitFor(t, "the shard to go idle", func() bool { return d.Stats().Busy == 0 })
	if err := d.Dispatch(0, &funcJob{}); err != nil {
		t.Fatal(err)
	}
	if got := d.Stats().Shards[0].Inline; got != 2 {
		t.Errorf("Inline = %d after the shard went idle again, want 2", got)
	}
	closeDispatcher(t, d)
}

// TestFastPathPanics: a panic in a fast-path Prepare is recovered on the caller's
// goroutine before Dispatch returns: the job gets Fail with a *PanicError, the hook
// sees it, the reserved worker is given back, and so is the shard (a panic in Fail
// too does not leave it locked).
func TestFastPathPanics(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		var hooked []*PanicError // no lock: the hook runs on this goroutine
		d := newDispatcher(t, Config{Shards: 1, PoolSize: 1, PoolPerShard: m.perShard,
			PanicHook: func(p *PanicError) { hooked = append(hooked, p) }})

		var failErr error // no lock: Fail runs on this goroutine
		if err := d.Dispatch(0, &funcJob{
			prepare: func() bool { panic("in prepare") },
			fail:    func(err error) { failErr = err },
		}); err != nil {
			t.Fatal(err)
		}
		wantPanicFail(t, failErr, "in prepare", hooked)
		st := d.Stats()
		if st.Panics != 1 || st.Busy != 0 || st.Shards[0].Inline != 1 || st.Shards[0].Prepared != 1 || st.Shards[0].Submitted != 0 {
			t.Errorf("Stats after a fast-path Prepare panic = %+v", st)
		}

		if err := d.Dispatch(0, &funcJob{
			prepare: func() bool { panic("in prepare") },
			fail:    func(error) { panic("in fail") },
		}); err != nil {
			t.Fatal(err)
		}
		if st := d.Stats(); st.Panics != 2 || st.FailPanics != 1 || st.Busy != 0 || len(hooked) != 3 {
			t.Errorf("Stats after a Fail panic = %+v, hook calls %d", st, len(hooked))
		}

		// The shard and the worker are free: the next job takes the fast path and runs.
		ran := make(chan struct{})
		if err := d.Dispatch(0, &funcJob{run: func() { close(ran) }}); err != nil {
			t.Fatal(err)
		}
		recv(t, "a job after the panics", ran)
		if got := d.Stats().Shards[0].Inline; got != 3 {
			t.Errorf("Inline = %d, want 3", got)
		}
		closeDispatcher(t, d)
	})
}

// TestFastPathCloseWaitsForInline: Close, started while a fast-path Prepare is still
// running, stops intake at once but does not return (nor release the pool) until that
// job has been submitted and has run; nothing fails. Nothing else is queued on that
// shard, so its goroutine has no job of its own to wait for before exiting.
func TestFastPathCloseWaitsForInline(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 2, PoolSize: 2, PoolPerShard: m.perShard})
		var accepted, ran atomic.Int64
		job := func() *funcJob {
			return &funcJob{
				run:  func() { ran.Add(1) },
				fail: func(err error) { t.Errorf("Fail(%v) during a graceful close", err) },
			}
		}
		openGate, dispatched := holdInPrepare(t, d, 0, job())
		defer openGate() // also on failure
		accepted.Add(1)

		closed := closeAsync(d)
		// Intake stops although the fast-path Prepare has not returned. The probes go
		// to the other shard (Close closes shard 0 first); those accepted before
		// intake stopped must run too.
		probeUntilClosed(t, d, 1, func() Job { return job() }, &accepted)
		if err := d.Dispatch(0, job()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Dispatch to the shard with the fast-path Prepare = %v, want ErrClosed", err)
		}
		wantStillClosing(t, closed, "a fast-path Prepare")
		openGate()
		if err := recv(t, "the slow Dispatch", dispatched); err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
		if err := recv(t, "Close", closed); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if ran.Load() != accepted.Load() {
			t.Errorf("ran %d of %d accepted jobs", ran.Load(), accepted.Load())
		}
	})
}

// TestFastPathCloseGivesUp: when Close's context ends while a fast-path Prepare is
// running, Close returns without waiting for it, and the job, which can no longer be
// run, gets Fail(ErrClosed) as its one final call.
func TestFastPathCloseGivesUp(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 1, PoolSize: 2, PoolPerShard: m.perShard})
		var finals atomic.Int32
		failed := make(chan error, 1)
		openGate, dispatched := holdInPrepare(t, d, 0, &funcJob{
			run:  func() { finals.Add(1); t.Error("ran after Close gave up") },
			fail: func(err error) { finals.Add(1); failed <- err },
		})
		defer openGate() // also on failure

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		closed := make(chan error, 1)
		go func() { closed <- d.Close(ctx) }()
		if err := recv(t, "Close", closed); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close with an ended context = %v, want context.Canceled", err)
		}
		if err := d.Dispatch(0, &funcJob{}); !errors.Is(err, ErrClosed) {
			t.Errorf("Dispatch after Close = %v", err)
		}
		openGate()
		if err := recv(t, "the slow Dispatch", dispatched); err != nil {
			t.Fatalf("Dispatch: %v", err)
		}
		if err := recv(t, "Fail", failed); !errors.Is(err, ErrClosed) {
			t.Errorf("Fail(%v), want ErrClosed", err)
		}
		if st := d.Stats(); st.Busy != 0 || finals.Load() != 1 {
			t.Errorf("Busy = %d, final calls = %d", st.Busy, finals.Load())
		}
	})
}

// TestFastPathOffOnceClosing: once Close has started (d.closing, set here directly to
// hold the window open), Dispatch no longer takes the fast path, even on an idle shard
// whose queue is still open: the job is queued as before and prepared by the shard.
func TestFastPathOffOnceClosing(t *testing.T) {
	defer checkNoLeak(t)()
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 2})
	d.closing.Store(true)
	checkQueued(t, d, 0, "once closing")
	d.closing.Store(false)
	closeDispatcher(t, d)
}

// TestFastPathCloseRace closes dispatchers while producers keep dispatching, on idle
// and busy shards alike, and checks that every accepted job runs: a fast-path submit
// never lands on a released pool during a graceful Close, and Dispatch refuses once
// intake has stopped.
func TestFastPathCloseRace(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		for round := range 10 {
			d := newDispatcher(t, Config{Shards: 4, QueueDepth: 4, ReadyDepth: 2, PoolSize: 4, PoolPerShard: m.perShard})
			var accepted, finals atomic.Int64
			var closeReturned atomic.Bool
			var wg sync.WaitGroup
			for p := range 4 {
				wg.Go(func() {
					for i := uint64(0); ; i++ {
						j := &funcJob{
							prepare: func() bool {
								if i%3 == 0 { // a notification: done in Prepare
									finals.Add(1)
									return false
								}
								return true
							},
							run:  func() { finals.Add(1) },
							fail: func(err error) { finals.Add(1); t.Errorf("Fail(%v) during a graceful close", err) },
						}
						after := closeReturned.Load()
						err := d.Dispatch(uint64(p)*7+i, j)
						switch {
						case err == nil && after:
							t.Error("Dispatch accepted a job after Close returned")
							return
						case err == nil:
							accepted.Add(1)
						case errors.Is(err, ErrClosed):
							return
						case errors.Is(err, ErrOverloaded):
							runtime.Gosched()
						default:
							t.Error(err)
							return
						}
					}
				})
			}
			waitFor(t, "some jobs", func() bool { return accepted.Load() > int64(50*(round%4)) })
			closeDispatcher(t, d)
			closeReturned.Store(true)
			wg.Wait()
			if finals.Load() != accepted.Load() {
				t.Fatalf("round %d: %d final calls for %d accepted jobs", round, finals.Load(), accepted.Load())
			}
			var inline uint64
			for _, s := range d.Stats().Shards {
				inline += s.Inline
			}
			if round == 0 {
				t.Logf("round 0: %d accepted, %d inline", accepted.Load(), inline)
			}
		}
	})
}
