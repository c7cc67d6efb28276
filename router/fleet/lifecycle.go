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
	// mu orders spawn's wg.Add before stop's wg.Wait: a WaitGroup must not grow from
	// zero while Wait runs, and a backend's reader goroutine, which stop does not wait
	// for, may spawn at any time (a list_changed arriving during Close).
	mu      sync.Mutex
	stopped bool
	// drained wakes a shutdown waiting for the fleet's calls (Fleet.WaitIdle): the
	// in-flight table and the owner relay poke it when a count it waits on goes down.
	drained drainSignal
}

// drainSignal wakes the goroutines waiting for some calls to end when a count they
// wait on went down; it does not say which nor how far, so each waiter counts again.
// The fleet has one for its client calls (Fleet.WaitIdle, poked by the in-flight table
// and the owner relay) and one per backend (poked when a client's request to the
// backend leaves the table: what a retired backend's drain waits on,
// upkeep_reconfigure.go). Any number of goroutines may wait at once: a shutdown's
// WaitIdle beside two retirements.
//
// While nobody waits, a poke is one atomic load: the per-call paths may poke freely,
// under their locks (it never blocks; it takes mu, which is never held while taking
// another lock, only while somebody waits). The zero value is ready to use.
type drainSignal struct {
	waiters atomic.Int32
	mu      sync.Mutex
	// woken is closed by the first poke after a waiter took it, and a fresh one made
	// for the next look; nil while no waiter holds one (pokes then close nothing).
	woken chan struct{}
}

// poke wakes every waiter, if any; a nil signal (a table made without one) does nothing.
func (d *drainSignal) poke() {
	if d == nil || d.waiters.Load() == 0 {
		return
	}
	d.mu.Lock()
	if d.woken != nil {
		close(d.woken)
		d.woken = nil
	}
	d.mu.Unlock()
}

// next returns the channel the next poke closes.
func (d *drainSignal) next() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.woken == nil {
		d.woken = make(chan struct{})
	}
	return d.woken
}

// wait calls count until it reports 0, waiting for a poke between calls; false when ctx
// ended first. No wake-up is lost: the waiter registers, then takes the channel, then
// counts, so a decrease that count did not see happened after the channel was taken,
// and its poke (which sees the registration) closes that channel or, if another poke
// did, a later one.
func (d *drainSignal) wait(ctx context.Context, count func() int) bool {
	d.waiters.Add(1)
	defer d.waiters.Add(-1)
	for {
		woken := d.next()
		if count() == 0 {
			return true
		}
		select {
		case <-woken:
		case <-ctx.Done():
			return false
		}
	}
}

func newLifecycle() *lifecycle {
	l := &lifecycle{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// spawn runs fn on a goroutine of its own that stop waits for.
func (l *lifecycle) spawn(fn func()) {
	l.mu.Lock()
	tracked := !l.stopped
	if tracked {
		l.wg.Add(1)
	}
	l.mu.Unlock()
	if !tracked {
		// stop has begun waiting: fn still runs, under the ended context, so that
		// what it owes is answered (a send fails at once and answers its request).
		go fn()
		return
	}
	go func() { defer l.wg.Done(); fn() }()
}

// ended reports whether the fleet is shutting down: work that would answer a backend or
// a client is no longer started.
func (l *lifecycle) ended() bool { return l.ctx.Err() != nil }

// stop ends the context and waits for every goroutine spawn started.
func (l *lifecycle) stop() {
	l.cancel()
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	l.wg.Wait()
}
