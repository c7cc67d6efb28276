package workers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of DispatchRun: on the fast path the caller runs Run too, holding the worker
// token a pool worker would.

// holdInRun calls DispatchRun(key, j) on a goroutine of its own and returns once j's
// Run is running there, held until open is called (safe to call more than once: defer
// it). dispatched receives DispatchRun's result once Run has returned.
func holdInRun(t *testing.T, d *Dispatcher, key uint64, j *funcJob) (open func(), dispatched <-chan error) {
	t.Helper()
	gate, inRun := make(chan struct{}), make(chan struct{})
	open = sync.OnceFunc(func() { close(gate) })
	run := j.run
	j.run = func() {
		close(inRun)
		gateWait(t, "the held Run", gate)
		if run != nil {
			run()
		}
	}
	done := make(chan error, 1)
	go func() { done <- d.DispatchRun(key, j) }()
	held := false
	defer func() {
		if !held {
			open()
		}
	}()
	recv(t, "the inline Run", inRun)
	held = true
	return open, done
}

// TestDispatchRunInline: on an idle shard DispatchRun prepares and runs the job on the
// calling goroutine and returns after Run; the stats count it as submitted and run
// inline; and the shard is free again for the next job.
func TestDispatchRunInline(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 1, PoolSize: 1, PoolPerShard: m.perShard})
		for i := range 3 {
			ran := false // no lock: Run runs on this goroutine, before DispatchRun returns
			if err := d.DispatchRun(0, &funcJob{run: func() { ran = true }}); err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatalf("job %d: DispatchRun returned before Run", i)
			}
		}
		st := d.Stats()
		s := st.Shards[0]
		if s.Prepared != 3 || s.Inline != 3 || s.Submitted != 3 || s.RanInline != 3 || st.Busy != 0 || st.Workers != 0 {
			t.Errorf("Stats after three inline runs = %+v", st)
		}
		// Plain Dispatch still hands Run to a worker.
		ran := make(chan struct{})
		if err := d.Dispatch(0, &funcJob{run: func() { close(ran) }}); err != nil {
			t.Fatal(err)
		}
		recv(t, "the pooled Run", ran)
		if s := d.Stats().Shards[0]; s.Submitted != 4 || s.RanInline != 3 {
			t.Errorf("shard stats after a pooled run = %+v", s)
		}
		closeDispatcher(t, d)
	})
}

// TestDispatchRunBound: an inline Run holds a worker token, so with PoolSize 1 a job of
// another shard waits, prepared, for that Run to end; and the shard of the inline Run is
// not held by it: a later job of the same key is prepared (and run inline too) while it
// runs, as it would be while a worker runs it.
func TestDispatchRunBound(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		if m.perShard {
			t.Skip("one pool per shard: shards do not share the bound")
		}
		d := newDispatcher(t, Config{Shards: 2, PoolSize: 1})
		open, dispatched := holdInRun(t, d, 0, &funcJob{})
		defer open()
		if st := d.Stats(); st.Busy != 1 {
			t.Errorf("Busy during an inline Run = %d, want 1", st.Busy)
		}

		var ran atomic.Bool
		other := &funcJob{run: func() { ran.Store(true) }}
		if err := d.DispatchRun(1, other); err != nil { // no token: queued, returns at once
			t.Fatal(err)
		}
		waitFor(t, "the other shard's job to be prepared and wait for a worker", func() bool {
			return d.Stats().Shards[1].Ready == 1
		})
		if ran.Load() {
			t.Fatal("a second Run started beyond PoolSize 1")
		}
		if s := d.Stats().Shards[1]; s.Inline != 0 || s.RanInline != 0 {
			t.Errorf("the other shard's job took the fast path without a token: %+v", s)
		}

		// Same shard, during the Run: prepared at once (queued, for want of a token).
		prepared := make(chan struct{})
		if err := d.DispatchRun(0, &funcJob{prepare: func() bool { close(prepared); return false }}); err != nil {
			t.Fatal(err)
		}
		recv(t, "Prepare of a later job of the key during the inline Run", prepared)

		open()
		if err := recv(t, "the held DispatchRun", dispatched); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the waiting job to run", ran.Load)
		closeDispatcher(t, d)
	})
}

// TestDispatchRunOrder: producers, one per key and several keys per shard, mix
// DispatchRun and Dispatch; each job's Prepare checks it follows the key's previous
// one and sees what that Prepare wrote (the race detector checks the happens-before).
// Half the producers wait for each job's Run, as an HTTP request does, which keeps
// shards idle enough for the fast path; the others flood their shards.
func TestDispatchRunOrder(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		const keys, perKey = 16, 200
		d := newDispatcher(t, Config{Shards: 8, PoolSize: 8, PoolPerShard: m.perShard})
		last := make([]int, keys) // written only by Prepare, ordered per key
		var runs atomic.Int64
		var wg sync.WaitGroup
		for k := range keys {
			wg.Go(func() {
				for i := range perKey {
					answered := make(chan struct{})
					j := &funcJob{
						prepare: func() bool {
							if last[k] != i {
								t.Errorf("key %d: Prepare of job %d after job %d", k, i, last[k]-1)
							}
							last[k] = i + 1
							return true
						},
						run:  func() { runs.Add(1); close(answered) },
						fail: func(err error) { t.Errorf("Fail(%v)", err); close(answered) },
					}
					dispatch := d.DispatchRun
					if i%3 == 2 {
						dispatch = d.Dispatch
					}
					for {
						err := dispatch(uint64(k), j)
						if err == nil {
							break
						}
						if !errors.Is(err, ErrOverloaded) {
							t.Error(err)
							return
						}
						time.Sleep(time.Millisecond)
					}
					if k%2 == 0 { // not recv: its Fatal must not run off the test's goroutine
						select {
						case <-answered:
						case <-time.After(patience):
							t.Errorf("key %d: job %d never answered", k, i)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		closeDispatcher(t, d)
		if runs.Load() != keys*perKey {
			t.Errorf("ran %d of %d jobs", runs.Load(), keys*perKey)
		}
		var inline uint64
		for _, s := range d.Stats().Shards {
			inline += s.RanInline
		}
		t.Logf("%d of %d jobs ran on their caller", inline, keys*perKey)
	})
}

// TestDispatchRunCloseWaits: Close, started while an inline Run is running, stops intake
// at once but returns only after that Run has returned.
func TestDispatchRunCloseWaits(t *testing.T) {
	inModes(t, func(t *testing.T, m mode) {
		d := newDispatcher(t, Config{Shards: 2, PoolSize: 2, PoolPerShard: m.perShard})
		var finished atomic.Bool
		open, dispatched := holdInRun(t, d, 0, &funcJob{
			run:  func() { finished.Store(true) },
			fail: func(err error) { t.Errorf("Fail(%v) during a graceful close", err) },
		})
		defer open()
		closed := closeAsync(d)
		waitFor(t, "intake to stop", func() bool { return errors.Is(d.DispatchRun(1, &funcJob{}), ErrClosed) })
		wantStillClosing(t, closed, "an inline Run")
		open()
		if err := recv(t, "Close", closed); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !finished.Load() {
			t.Error("Close returned before the inline Run did")
		}
		if err := recv(t, "the held DispatchRun", dispatched); err != nil {
			t.Fatal(err)
		}
		if st := d.Stats(); st.Busy != 0 {
			t.Errorf("Busy after Close = %d", st.Busy)
		}
	})
}

// TestDispatchRunCloseGivesUp: Close's context ends while an inline Run runs: Close
// returns the context's error without waiting, and the Run finishes on its own.
func TestDispatchRunCloseGivesUp(t *testing.T) {
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 2})
	open, dispatched := holdInRun(t, d, 0, &funcJob{fail: func(err error) { t.Errorf("Fail(%v) of a running job", err) }})
	defer open()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the context's error", err)
	}
	open()
	if err := recv(t, "the held DispatchRun", dispatched); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token back", func() bool { return d.Stats().Busy == 0 })
}

// TestDispatchRunPanic: a panic in an inline Run is handled as on a worker: the job gets
// Fail with the *PanicError on the caller before DispatchRun returns, the hook sees it,
// the token is given back and the next job runs.
func TestDispatchRunPanic(t *testing.T) {
	var hooked []*PanicError // no lock: the hook runs on this goroutine
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 1, PanicHook: func(p *PanicError) { hooked = append(hooked, p) }})
	var failErr error
	if err := d.DispatchRun(0, &funcJob{
		run:  func() { panic("in run") },
		fail: func(err error) { failErr = err },
	}); err != nil {
		t.Fatal(err)
	}
	wantPanicFail(t, failErr, "in run", hooked)
	if err := d.DispatchRun(0, &funcJob{run: func() { panic("again") }, fail: func(error) { panic("in fail") }}); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if st.Panics != 2 || st.FailPanics != 1 || st.Busy != 0 || st.Shards[0].RanInline != 2 {
		t.Errorf("Stats after inline Run panics = %+v", st)
	}
	ran := false
	if err := d.DispatchRun(0, &funcJob{run: func() { ran = true }}); err != nil || !ran {
		t.Fatalf("the job after the panics: err %v, ran %v", err, ran)
	}
	closeDispatcher(t, d)
}

// callerJob is a funcJob that says, once prepared, whether it may run on its caller.
type callerJob struct {
	funcJob
	onCaller bool
}

func (j *callerJob) RunsOnCaller() bool { return j.onCaller }

// TestDispatchRunCallerRunner: a CallerRunner that says no after its Prepare goes to a
// worker as with Dispatch (DispatchRun returns before its Run), one that says yes runs
// on the caller; both count as submitted.
func TestDispatchRunCallerRunner(t *testing.T) {
	d := newDispatcher(t, Config{Shards: 1, PoolSize: 2})
	gate, ran := make(chan struct{}), make(chan struct{})
	no := &callerJob{funcJob: funcJob{run: func() {
		gateWait(t, "the pooled Run", gate)
		close(ran)
	}}}
	if err := d.DispatchRun(0, no); err != nil {
		t.Fatal(err)
	}
	close(gate) // DispatchRun returned while Run waited for this: Run is not on this goroutine
	recv(t, "the pooled Run", ran)
	waitFor(t, "the worker back", func() bool { return d.Stats().Busy == 0 })
	yes := false
	if err := d.DispatchRun(0, &callerJob{funcJob: funcJob{run: func() { yes = true }}, onCaller: true}); err != nil || !yes {
		t.Fatalf("a CallerRunner that says yes: err %v, ran on the caller %v", err, yes)
	}
	if s := d.Stats().Shards[0]; s.Submitted != 2 || s.RanInline != 1 {
		t.Errorf("shard stats = %+v, want 2 submitted, 1 on the caller", s)
	}
	closeDispatcher(t, d)
}
