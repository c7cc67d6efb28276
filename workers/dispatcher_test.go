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

// session is the per-key state a router would keep. Fields marked "Prepare only" are
// touched only from Prepare of that key's jobs and need no lock: the ordering
// guarantee serialises them, and the race detector checks that it does.
type session struct {
	seen        []int // Prepare only: sequence numbers in Prepare order
	initialized bool  // Prepare only

	mu       sync.Mutex
	inflight map[int]bool // request ids registered in Prepare, removed by Run
	done     map[int]bool // request ids whose Run finished
}

// TestOrderPerKey drives many keys from many goroutines through small queues (so the
// overload path is exercised too) and checks the ordering guarantee the router relies
// on: Prepare in Dispatch order per key, a notification handled in Prepare takes effect
// before later requests, a cancellation handled in Prepare finds the request it names,
// and Run happens after its own Prepare.
func TestOrderPerKey(t *testing.T) {
	configs := []struct {
		name   string
		cfg    Config
		queued bool // fast path off
	}{
		{"shared", Config{Shards: 4, QueueDepth: 8, ReadyDepth: 4, PoolSize: 8}, false},
		{"per-shard", Config{Shards: 4, QueueDepth: 8, ReadyDepth: 4, PoolSize: 8, PoolPerShard: true}, false},
		// Everything at its minimum: refusals and waits for a worker at every step.
		{"tiny", Config{Shards: 3, QueueDepth: 1, ReadyDepth: 1, PoolSize: 1}, false},
		{"tiny per-shard", Config{Shards: 3, QueueDepth: 1, ReadyDepth: 1, PoolSize: 1, PoolPerShard: true}, false},
		{"shared queued only", Config{Shards: 4, QueueDepth: 8, ReadyDepth: 4, PoolSize: 8}, true},
		{"tiny queued only", Config{Shards: 3, QueueDepth: 1, ReadyDepth: 1, PoolSize: 1}, true},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			defer checkNoLeak(t)()
			const keys, perKey = 48, 240
			d := newDispatcher(t, c.cfg)
			if c.queued {
				queuedOnly(d)
			}
			sessions := make([]session, keys)
			var runs, wantRuns atomic.Int64
			var wg sync.WaitGroup
			for k := range keys {
				s := &sessions[k]
				s.inflight = map[int]bool{}
				s.done = map[int]bool{}
				wg.Go(func() {
					for i := range perKey {
						var j *funcJob
						switch {
						case i == 0: // "initialized": Prepare only
							j = &funcJob{prepare: func() bool {
								s.seen = append(s.seen, i)
								s.initialized = true
								return false
							}}
						case i%3 == 2: // "cancelled" naming request i-1: Prepare only
							j = &funcJob{prepare: func() bool {
								s.seen = append(s.seen, i)
								s.mu.Lock()
								found := s.inflight[i-1] || s.done[i-1]
								s.mu.Unlock()
								if !found {
									t.Errorf("key %d: cancel of %d found no request", k, i-1)
								}
								return false
							}}
						default: // a request
							var prepared bool
							wantRuns.Add(1)
							j = &funcJob{
								prepare: func() bool {
									s.seen = append(s.seen, i)
									if !s.initialized {
										t.Errorf("key %d: request %d prepared before initialized", k, i)
									}
									s.mu.Lock()
									s.inflight[i] = true
									s.mu.Unlock()
									prepared = true
									return true
								},
								run: func() {
									if !prepared {
										t.Errorf("key %d: request %d ran before its Prepare", k, i)
									}
									s.mu.Lock()
									delete(s.inflight, i)
									s.done[i] = true
									s.mu.Unlock()
									runs.Add(1)
								},
								fail: func(err error) { t.Errorf("key %d: request %d failed: %v", k, i, err) },
							}
						}
						if err := dispatchRetry(d, uint64(k), j); err != nil {
							t.Errorf("key %d: %v", k, err)
							return
						}
					}
				})
			}
			wg.Wait()
			closeDispatcher(t, d)
			for k := range sessions {
				seen := sessions[k].seen
				if len(seen) != perKey {
					t.Errorf("key %d: %d jobs prepared, want %d", k, len(seen), perKey)
					continue
				}
				for i, v := range seen {
					if v != i {
						t.Errorf("key %d: Prepare #%d was job %d", k, i, v)
						break
					}
				}
			}
			if runs.Load() != wantRuns.Load() {
				t.Errorf("runs = %d, want %d", runs.Load(), wantRuns.Load())
			}
			st := d.Stats()
			var prepared uint64
			for _, s := range st.Shards {
				prepared += s.Prepared
			}
			if prepared != keys*perKey {
				t.Errorf("Stats prepared = %d, want %d", prepared, keys*perKey)
			}
		})
	}
}

// TestRunsOverlapWithinKey shows that ordering Prepare does not serialise Run: two jobs
// of one key each wait inside Run for the other to start.
func TestRunsOverlapWithinKey(t *testing.T) {
	defer checkNoLeak(t)()
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 2})
	aStarted, bStarted := make(chan struct{}), make(chan struct{})
	finished := make(chan string, 2)
	meet := func(name string, mine, other chan struct{}) *funcJob {
		return &funcJob{run: func() {
			close(mine)
			select {
			case <-other:
				finished <- name
			case <-time.After(patience):
				finished <- name + " timed out waiting for the other run"
			}
		}}
	}
	if err := d.Dispatch(7, meet("a", aStarted, bStarted)); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(7, meet("b", bStarted, aStarted)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := recv(t, "a run to finish", finished); len(got) != 1 {
			t.Error(got)
		}
	}
	closeDispatcher(t, d)
}

// TestOverloadFailFast fills a one-worker, one-shard dispatcher stage by stage and
// checks that the next Dispatch is refused at once with the typed error and its JSON-RPC
// mapping, and that everything accepted still runs.
func TestOverloadFailFast(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 1, QueueDepth: 2, ReadyDepth: 1, PoolSize: 1,
			PoolPerShard: m.perShard, RetryAfter: 250 * time.Millisecond})
		gate := make(chan struct{})
		var ran atomic.Int32
		job := func(block bool) *funcJob {
			return &funcJob{
				run: func() {
					if block {
						gateWait(t, "blocker", gate)
					}
					ran.Add(1)
				},
				fail: func(err error) { t.Errorf("unexpected Fail: %v", err) },
			}
		}
		mustDispatch := func(j Job) {
			t.Helper()
			if err := d.Dispatch(1, j); err != nil {
				t.Fatalf("Dispatch: %v", err)
			}
		}
		mustDispatch(job(true)) // takes the only worker
		waitFor(t, "the blocker to hold the worker", func() bool { return d.Stats().Busy == 1 })
		mustDispatch(job(false)) // prepared, parked in the ready list
		waitFor(t, "a ready job", func() bool { return d.Stats().Shards[0].Ready == 1 })
		mustDispatch(job(false)) // queue slot 1
		mustDispatch(job(false)) // queue slot 2

		refused := job(false)
		refused.prepare = func() bool { t.Error("refused job was prepared"); return false }
		err := d.Dispatch(1, refused)
		if !errors.Is(err, ErrOverloaded) {
			t.Fatalf("Dispatch on a full queue = %v, want ErrOverloaded", err)
		}
		var oe *OverloadError
		if !errors.As(err, &oe) || oe.Shard != 0 || oe.RetryAfter != 250*time.Millisecond {
			t.Fatalf("overload error = %#v", err)
		}
		st := d.Stats()
		if st.Overloads != 1 || st.Shards[0].Overloads != 1 || st.Shards[0].Queued != 2 || st.Shards[0].Ready != 1 || st.Busy != 1 {
			t.Errorf("Stats = %+v", st)
		}

		close(gate)
		waitFor(t, "all accepted jobs to run", func() bool { return ran.Load() == 4 })
		closeDispatcher(t, d)
	})
}

// TestPrepareFlowsWhilePoolSaturated is the cancellation scenario: every worker is
// busy with a request that waits to be cancelled, a second request waits for a worker,
// and the cancel notification — Prepare only — must still be prepared, not stuck
// behind the saturated pool.
func TestPrepareFlowsWhilePoolSaturated(t *testing.T) {
	defer checkNoLeak(t)()
	d := newDispatcher(t, Config{Shards: 1, QueueDepth: 4, ReadyDepth: 2, PoolSize: 1})
	cancelled := make(chan struct{})
	result := make(chan string, 2)
	long := &funcJob{run: func() {
		select {
		case <-cancelled:
			result <- "cancelled"
		case <-time.After(patience):
			result <- "never cancelled"
		}
	}}
	next := &funcJob{run: func() { result <- "next" }}
	cancel := &funcJob{prepare: func() bool { close(cancelled); return false }}

	if err := d.Dispatch(3, long); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long request to hold the worker", func() bool { return d.Stats().Busy == 1 })
	if err := d.Dispatch(3, next); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(3, cancel); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, "the long request", result); got != "cancelled" {
		t.Fatalf("long request: %s", got)
	}
	if got := recv(t, "the next request", result); got != "next" {
		t.Fatalf("next request: %s", got)
	}
	closeDispatcher(t, d)
}

// TestPanics checks that a panic anywhere in a job is contained: the job gets Fail with
// a *PanicError mapped to -32603, the hook sees it, and the dispatcher keeps working.
func TestPanics(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		job         func(failed chan<- error) *funcJob
		wantValue   any
		wantFail    bool // Fail is called (and reports to the channel)
		panics      uint64
		failPanics  uint64
		hookCalls   int
		hookPanics  bool
		unwrapsBoom bool
	}{
		{
			name: "prepare",
			job: func(failed chan<- error) *funcJob {
				return &funcJob{prepare: func() bool { panic("in prepare") }, fail: func(err error) { failed <- err }}
			},
			wantValue: "in prepare", wantFail: true, panics: 1, hookCalls: 1,
		},
		{
			name: "run",
			job: func(failed chan<- error) *funcJob {
				return &funcJob{run: func() { panic("in run") }, fail: func(err error) { failed <- err }}
			},
			wantValue: "in run", wantFail: true, panics: 1, hookCalls: 1,
		},
		{
			name: "run with an error value",
			job: func(failed chan<- error) *funcJob {
				return &funcJob{run: func() { panic(boom) }, fail: func(err error) { failed <- err }}
			},
			wantValue: boom, wantFail: true, panics: 1, hookCalls: 1, unwrapsBoom: true,
		},
		{
			name: "run then fail",
			job: func(failed chan<- error) *funcJob {
				return &funcJob{run: func() { panic("in run") }, fail: func(err error) {
					failed <- err
					panic("in fail")
				}}
			},
			wantValue: "in run", wantFail: true, panics: 1, failPanics: 1, hookCalls: 2,
		},
		{
			name: "hook panics too",
			job: func(failed chan<- error) *funcJob {
				return &funcJob{run: func() { panic("in run") }, fail: func(err error) { failed <- err }}
			},
			wantValue: "in run", wantFail: true, panics: 1, hookCalls: 1, hookPanics: true,
		},
	}
	for _, tc := range tests {
		for _, m := range modes {
			t.Run(tc.name+"/"+m.name, func(t *testing.T) {
				defer checkNoLeak(t)()
				var hookCalls atomic.Int32
				d := newDispatcher(t, Config{Shards: 2, PoolSize: 2, PoolPerShard: m.perShard, PanicHook: func(p *PanicError) {
					hookCalls.Add(1)
					if len(p.Stack) == 0 {
						t.Error("PanicError without a stack")
					}
					if tc.hookPanics {
						panic("in hook")
					}
				}})
				failed := make(chan error, 1)
				if err := d.Dispatch(0, tc.job(failed)); err != nil {
					t.Fatal(err)
				}
				err := recv(t, "Fail", failed)
				if !errors.Is(err, ErrPanic) {
					t.Fatalf("Fail(%v), want ErrPanic", err)
				}
				var pe *PanicError
				if !errors.As(err, &pe) || pe.Value != tc.wantValue {
					t.Fatalf("Fail(%#v), want panic value %v", err, tc.wantValue)
				}
				if got := errors.Is(err, boom); got != tc.unwrapsBoom {
					t.Errorf("errors.Is(err, boom) = %v", got)
				}

				// Still alive: a normal job on the same shard runs.
				ran := make(chan struct{})
				if err := d.Dispatch(0, &funcJob{run: func() { close(ran) }}); err != nil {
					t.Fatal(err)
				}
				recv(t, "a job after the panic", ran)
				waitFor(t, "panic counters", func() bool {
					st := d.Stats()
					return st.Panics == tc.panics && st.FailPanics == tc.failPanics
				})
				closeDispatcher(t, d)
				if got := int(hookCalls.Load()); got != tc.hookCalls {
					t.Errorf("hook called %d times, want %d", got, tc.hookCalls)
				}
			})
		}
	}
}

// TestCloseDrains checks that Close refuses new work at once but prepares and runs
// everything it had accepted, and does not return while a job is still running.
func TestCloseDrains(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		const n = 100
		d := newDispatcher(t, Config{Shards: 2, QueueDepth: 64, ReadyDepth: 64, PoolSize: 2, PoolPerShard: m.perShard})
		gate := make(chan struct{})
		var accepted, ran, failed atomic.Int64
		job := func() *funcJob {
			return &funcJob{
				run: func() {
					gateWait(t, "job", gate)
					ran.Add(1)
				},
				fail: func(err error) { failed.Add(1); t.Errorf("Fail(%v) during a graceful close", err) },
			}
		}
		for i := range n {
			if err := dispatchRetry(d, uint64(i), job()); err != nil {
				t.Fatal(err)
			}
			accepted.Add(1)
		}

		closed := closeAsync(d)
		// Probe until intake is shut; probes accepted before that must run too.
		probeUntilClosed(t, d, 0, func() Job { return job() }, &accepted)
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while jobs were blocked", err)
		default:
		}
		close(gate)
		if err := recv(t, "Close", closed); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if ran.Load() != accepted.Load() || failed.Load() != 0 {
			t.Errorf("ran %d, failed %d, accepted %d", ran.Load(), failed.Load(), accepted.Load())
		}
		if err := d.Close(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("second Close = %v, want ErrClosed", err)
		}
		if err := d.Dispatch(0, job()); !errors.Is(err, ErrClosed) {
			t.Errorf("Dispatch after Close = %v, want ErrClosed", err)
		}
	})
}

// TestCloseGivesUp checks the other way Close can end: its context ends while jobs
// are still queued. Queued and ready jobs get Fail(ErrClosed) — each job reaches
// exactly one final call — and the running one finishes on its own.
func TestCloseGivesUp(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 1, QueueDepth: 8, ReadyDepth: 2, PoolSize: 1, PoolPerShard: m.perShard})
		gate := make(chan struct{})
		const queued = 6
		var finals [queued + 1]atomic.Int32 // per job: Run returned or Fail called
		var closedFails atomic.Int32
		mk := func(i int, block bool) *funcJob {
			return &funcJob{
				run: func() {
					if block {
						gateWait(t, "job", gate)
					}
					finals[i].Add(1)
				},
				fail: func(err error) {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("job %d: Fail(%v), want ErrClosed", i, err)
					}
					closedFails.Add(1)
					finals[i].Add(1)
				},
			}
		}
		if err := d.Dispatch(0, mk(0, true)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the blocker to hold the worker", func() bool { return d.Stats().Busy == 1 })
		for i := 1; i <= queued; i++ {
			if err := d.Dispatch(0, mk(i, false)); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := d.Close(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Close with an ended context = %v, want context.Canceled", err)
		}
		waitFor(t, "queued jobs to fail", func() bool { return closedFails.Load() == queued })
		close(gate)
		waitFor(t, "the blocker to finish", func() bool { return finals[0].Load() == 1 })
		for i := range finals {
			if got := finals[i].Load(); got != 1 {
				t.Errorf("job %d reached %d final calls, want 1", i, got)
			}
		}
		if err := d.Dispatch(0, mk(0, false)); !errors.Is(err, ErrClosed) {
			t.Errorf("Dispatch after Close = %v", err)
		}
	})
}

// TestReentrantDispatch: Prepare and Run may dispatch, including to their own shard,
// without deadlock; a job dispatched from Prepare is prepared after it.
func TestReentrantDispatch(t *testing.T) {
	defer checkNoLeak(t)()
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 1})
	var order []string // Prepare only
	done := make(chan struct{})
	child := &funcJob{prepare: func() bool { order = append(order, "child"); return true }, run: func() { close(done) }}
	parent := &funcJob{
		prepare: func() bool {
			order = append(order, "parent")
			if err := d.Dispatch(0, child); err != nil {
				t.Error(err)
			}
			return true
		},
		run: func() {
			if err := d.Dispatch(0, &funcJob{prepare: func() bool { order = append(order, "grandchild"); return false }}); err != nil {
				t.Error(err)
			}
		},
	}
	if err := d.Dispatch(0, parent); err != nil {
		t.Fatal(err)
	}
	recv(t, "the child to run", done)
	closeDispatcher(t, d)
	if len(order) != 3 || order[0] != "parent" || order[1] != "child" {
		t.Errorf("order = %v", order)
	}
}

func TestDispatchNilPanics(t *testing.T) {
	d := newDispatcher(t, Config{Shards: 1})
	defer closeDispatcher(t, d)
	defer func() {
		if recover() == nil {
			t.Error("Dispatch(nil) did not panic")
		}
	}()
	_ = d.Dispatch(0, nil)
}

// countJob is a stateless job that can be dispatched many times concurrently.
type countJob struct {
	run  bool
	done atomic.Int64
}

func (j *countJob) Prepare() bool {
	if !j.run {
		j.done.Add(1)
	}
	return j.run
}
func (j *countJob) Run()         { j.done.Add(1) }
func (j *countJob) Fail(_ error) { j.done.Add(1) }

// spinUntil waits for j.done to reach n without allocating (no timers), bounded.
func (j *countJob) spinUntil(n int64) bool {
	deadline := time.Now().Add(patience)
	for j.done.Load() < n {
		if time.Now().After(deadline) {
			return false
		}
		runtime.Gosched()
	}
	return true
}

// TestDispatchZeroAlloc guards the steady state: a Dispatch, the Prepare on the shard
// and the Run on a warm pool allocate nothing (the measurement covers the whole
// process, so the shard goroutine and the workers are included).
func TestDispatchZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, m := range modes {
		for _, run := range []bool{false, true} {
			t.Run(m.name+"/run="+map[bool]string{false: "no", true: "yes"}[run], func(t *testing.T) {
				d := newDispatcher(t, Config{Shards: 4, PoolSize: 4, PoolPerShard: m.perShard})
				defer closeDispatcher(t, d)
				j := &countJob{run: run}
				var n int64
				step := func() {
					if err := d.Dispatch(uint64(n), j); err != nil {
						t.Fatal(err)
					}
					n++
					if !j.spinUntil(n) {
						t.Fatal("job did not finish")
					}
				}
				for range 200 { // warm the pools' worker caches
					step()
				}
				if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
					t.Errorf("%v allocations per Dispatch, want 0", allocs)
				}
			})
		}
	}
}

func TestOverloadZeroAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	d := newDispatcher(t, Config{Shards: 1, QueueDepth: 1, ReadyDepth: 1, PoolSize: 1})
	gate := make(chan struct{})
	blocker := &funcJob{run: func() {
		select {
		case <-gate:
		case <-time.After(patience):
		}
	}}
	if err := d.Dispatch(0, blocker); err != nil {
		t.Fatal(err)
	}
	filler := &countJob{run: true}
	waitFor(t, "the blocker to hold the worker", func() bool { return d.Stats().Busy == 1 })
	_ = dispatchRetry(d, 0, filler) // ready
	waitFor(t, "a ready job", func() bool { return d.Stats().Shards[0].Ready == 1 })
	_ = dispatchRetry(d, 0, filler) // queue
	allocs := testing.AllocsPerRun(1000, func() {
		if err := d.Dispatch(0, filler); !errors.Is(err, ErrOverloaded) {
			t.Fatalf("Dispatch = %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per refused Dispatch, want 0", allocs)
	}
	close(gate)
	closeDispatcher(t, d)
}

// closeAsync runs Close, bounded by patience, and returns where its result will come.
func closeAsync(d *Dispatcher) <-chan error {
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		closed <- d.Close(ctx)
	}()
	return closed
}

// wantStillClosing fails the test if the Close of closeAsync has returned, or returns
// within a short grace (the time a Close that would not wait takes to return), while
// what it must wait for (during) is still going on.
func wantStillClosing(t *testing.T, closed <-chan error, during string) {
	t.Helper()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) during %s", err, during)
	case <-time.After(20 * time.Millisecond):
	}
}

// probeUntilClosed dispatches probes to key until Dispatch refuses them with ErrClosed,
// counting in accepted the ones taken before intake stopped (they must still run).
func probeUntilClosed(t *testing.T, d *Dispatcher, key uint64, probe func() Job, accepted *atomic.Int64) {
	t.Helper()
	waitFor(t, "Dispatch to return ErrClosed", func() bool {
		err := d.Dispatch(key, probe())
		if err == nil {
			accepted.Add(1)
		}
		return errors.Is(err, ErrClosed)
	})
}
