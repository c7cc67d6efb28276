package workers

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// patience bounds every wait in the tests. It is a safety net against hangs, never a
// performance assertion: on a loaded 2-core machine things may be slow, not wrong.
const patience = 20 * time.Second

// funcJob is a Job built from functions; nil functions do the obvious minimum.
type funcJob struct {
	prepare func() bool
	run     func()
	fail    func(error)
}

func (j *funcJob) Prepare() bool {
	if j.prepare == nil {
		return true
	}
	return j.prepare()
}

func (j *funcJob) Run() {
	if j.run != nil {
		j.run()
	}
}

func (j *funcJob) Fail(err error) {
	if j.fail != nil {
		j.fail(err)
	}
}

// wantPanicFail fails the test unless failErr, what a job's Fail got, is the
// *PanicError of a panic(value) in its Prepare or Run, and the PanicHook, whose calls
// so far are hooked, saw that same value and nothing else.
func wantPanicFail(t testing.TB, failErr error, value any, hooked []*PanicError) {
	t.Helper()
	var pe *PanicError
	if !errors.As(failErr, &pe) || pe.Value != value {
		t.Fatalf("Fail(%v) when the dispatch returned, want the *PanicError of %q", failErr, value)
	}
	if len(hooked) != 1 || hooked[0] != pe {
		t.Errorf("hook saw %v, want the same *PanicError", hooked)
	}
}

// waitFor polls cond until it holds, failing the test after patience.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, patience, cond)
}

// recv receives from ch, failing the test after patience.
func recv[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	return testwait.Recv(t, what, patience, ch)
}

func newDispatcher(t testing.TB, cfg Config) *Dispatcher {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return d
}

// closeDispatcher closes d with a bounded context and fails the test on error.
func closeDispatcher(t testing.TB, d *Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// dispatchRetry dispatches j, yielding and retrying while the shard is overloaded.
// Tests that are not about overload use it so that a slow machine cannot turn into a
// failure. It returns an error rather than failing the test so that it can be used
// from any goroutine.
func dispatchRetry(d *Dispatcher, key uint64, j Job) error {
	deadline := time.Now().Add(patience)
	for {
		err := d.Dispatch(key, j)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrOverloaded) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shard stayed overloaded for %v: %w", patience, err)
		}
		runtime.Gosched()
	}
}

// checkNoLeak records the goroutine count and returns a function that waits until the
// count is back to it.
func checkNoLeak(t testing.TB) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		if !testwait.Poll(patience, func() bool { return runtime.NumGoroutine() <= before }) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines: %d before, %d after %v\n%s", before, runtime.NumGoroutine(), patience, buf)
		}
	}
}

// mode is one pool layout: one ants pool shared by all shards, or one per shard.
type mode struct {
	name     string
	perShard bool
}

// modes runs a test against both pool layouts.
var modes = []mode{
	{"shared", false},
	{"per-shard", true},
}

// inModes runs f as a subtest in each pool layout, failing the subtest if it leaves
// goroutines behind.
func inModes(t *testing.T, f func(t *testing.T, m mode)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			defer checkNoLeak(t)()
			f(t, m)
		})
	}
}
