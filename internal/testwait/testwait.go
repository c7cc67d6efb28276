// Package testwait holds the bounded waits that tests share: until a condition holds,
// for a value on a channel, and for the shutdown of what a test started. Each is bounded by the duration the caller gives, so a
// broken test fails instead of hanging. Only tests import it; any goroutine of a test
// may call Poll, the others fail the test and so belong to its own goroutine.
package testwait

import (
	"context"
	"testing"
	"time"
)

// maxInterval bounds the pause between two looks at a condition: a condition that
// costs something (an HTTP request for /metrics) is not asked hundreds of times a
// second, and one that is met late is still seen within this much.
const maxInterval = 20 * time.Millisecond

// Poll asks cond until it holds or d has passed; it reports whether it held. The
// first looks come quickly (1ms apart), then at most maxInterval apart.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, maxInterval)
	}
	return true
}

// For is Poll that fails the test, saying what it waited for, when cond does not hold
// within d.
func For(tb testing.TB, what string, d time.Duration, cond func() bool) {
	tb.Helper()
	if !Poll(d, cond) {
		tb.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// Recv receives a value from ch, failing the test, saying what it waited for, when none
// comes within d (a closed channel gives its zero value at once).
func Recv[T any](tb testing.TB, what string, d time.Duration, ch <-chan T) T {
	tb.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("timed out after %v waiting for %s", d, what)
		var zero T
		return zero
	}
}

// Cleanup registers stop (a server's Close or Shutdown) to run when the test ends, with
// a context that ends after d, so that a shutdown that hangs is cut off after d instead
// of hanging the test binary. Its error is logged, not failed on: the test is over.
func Cleanup(tb testing.TB, d time.Duration, stop func(context.Context) error) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		if err := stop(ctx); err != nil {
			tb.Logf("cleanup: %v", err)
		}
	})
}
