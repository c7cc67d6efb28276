package fleet

import (
	"context"
	"sync"
	"sync/atomic"
)

// lifecycle is the fleet's run: the context every part's background work runs under
// and the count of that work, so that Close ends it and waits for it. New makes it,
// Close ends it; the parts hold a pointer to the one lifecycle and start their
// goroutines through it (from any goroutine), never bare.
type lifecycle struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// drained wakes a shutdown waiting for the fleet's calls (Fleet.WaitIdle): the
	// in-flight table and the owner relay poke it when a count it waits on goes down.
	drained drainSignal
}

// drainSignal wakes the one goroutine waiting for the fleet's calls to end when a count
// it waits on went down; it does not say which nor how far, so the waiter counts again.
// One waiter at a time: a second wait would turn the wake-ups off for the first when it
// returns (the app's shutdown is the one caller).
// While nobody waits, a poke is one atomic load: the per-call paths may poke freely,
// under their locks (it never blocks).
type drainSignal struct {
	waiting atomic.Bool
	wake    chan struct{} // buffered 1: wake-ups coalesce
}

// poke wakes the waiter, if any; a nil signal (a table made without one) does nothing.
func (d *drainSignal) poke() {
	if d == nil || !d.waiting.Load() {
		return
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// wait calls count until it reports 0, waiting for a poke between calls; false when ctx
// ended first. No wake-up is lost: waiting is set before the first count, so a
// decrease that count did not see pokes after it and fills wake.
func (d *drainSignal) wait(ctx context.Context, count func() int) bool {
	d.waiting.Store(true)
	defer d.waiting.Store(false)
	for count() > 0 {
		select {
		case <-d.wake:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func newLifecycle() *lifecycle {
	l := &lifecycle{drained: drainSignal{wake: make(chan struct{}, 1)}}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// spawn runs fn on a goroutine of its own that stop waits for.
func (l *lifecycle) spawn(fn func()) {
	l.wg.Add(1)
	go func() { defer l.wg.Done(); fn() }()
}

// ended reports whether the fleet is shutting down: work that would answer a backend or
// a client is no longer started.
func (l *lifecycle) ended() bool { return l.ctx.Err() != nil }

// stop ends the context and waits for every goroutine spawn started.
func (l *lifecycle) stop() {
	l.cancel()
	l.wg.Wait()
}
