// Package ctxtime holds the one sleep that a context can cut short, for the loops that
// wait between attempts (reconnect backoff, health checks, stream retries), and the
// bounded waits for a signal or a WaitGroup that Close and shutdown paths use, and the
// one "every period until stopped" loop of the background jobs (lease heartbeats, key
// refreshes, counter publishing). Any goroutine may call them.
package ctxtime

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Wait waits for ch to be closed, at most d; it reports whether it was. Its timer is
// stopped on return.
func Wait(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// WaitGroup waits for wg, at most d; it reports whether wg was done in time. When it
// was not, the goroutine that waits for wg stays until wg is done.
func WaitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return Wait(done, d)
}

// Every calls fn every period until stop is closed, on the calling goroutine (the
// background job's own), and returns then. fn is never called after stop is seen closed;
// a call under way when it closes runs to its end first. The ticker is stopped on return.
func Every(stop <-chan struct{}, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		select {
		case <-stop: // both were ready and select chose the tick: stop wins
			return
		default:
		}
		fn()
	}
}

// Sleep waits for d unless ctx ends first; it reports whether it slept the whole d, so
// that a loop can return as soon as its context is done. Its timer is stopped on
// return, so a cut-short sleep leaves nothing running.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Counter counts work in flight so that a closing path can wait until none is left. Unlike
// a sync.WaitGroup it may gain work while someone already waits (sessions that close
// during a shutdown start work of their own, and the shutdown waits for that too), and
// the wait is a channel, so it combines with a timeout or a context. The zero value is
// ready to use; any goroutine may call its methods.
//
// Add and Done are one atomic operation each while nobody waits, so that a per-request
// path (a traced request, a call in flight) can count itself: only a Done that brings
// the count to 0 while a Zero is outstanding takes the lock.
type Counter struct {
	n atomic.Int64
	// waited is set (under mu) by Zero before it reads n, and cleared when the channel
	// closes: a Done that reaches 0 after Zero read n sees it set and closes the channel.
	waited atomic.Bool
	mu     sync.Mutex
	zero   chan struct{} // closed when n drops to 0; nil while nobody waits
}

// closedChan is what Zero returns when nothing is counted.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Add counts one more piece of work.
func (c *Counter) Add() { c.n.Add(1) }

// Done counts one piece of work finished.
func (c *Counter) Done() {
	if c.n.Add(-1) != 0 || !c.waited.Load() {
		return
	}
	c.mu.Lock()
	if c.zero != nil && c.n.Load() == 0 { // not when work was added meanwhile
		close(c.zero)
		c.zero = nil
		c.waited.Store(false)
	}
	c.mu.Unlock()
}

// N is the work counted now: for reports ("requests still traced"), not to wait on (Zero is
// the signal).
func (c *Counter) N() int { return int(c.n.Load()) }

// Zero returns a channel closed once nothing is counted: already closed when nothing is
// now. Work added after it closed is not waited for by that channel; ask again.
func (c *Counter) Zero() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waited.Store(true) // before reading n: see Done
	if c.n.Load() == 0 {
		if c.zero == nil { // no channel for a Done to close: no Done need lock
			c.waited.Store(false)
		}
		return closedChan
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	return c.zero
}
