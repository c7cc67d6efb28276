package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Deadline is the context of one Send that nothing cancels early: it ends at its
// deadline, or when its parent ends. It is what the router forwards a call with.
//
// context.WithDeadline arms a runtime timer and registers a child on its parent (a lock
// and a map entry) for every call, and a pooled HTTP exchange does not need either: the
// exchange's timeout is the deadline (exchangeOn sets it on the connection, where it also
// bounds the reading of a streamed body), and the Conn's Close, which the end of the
// router closes it with, interrupts a read in progress. So a Deadline arms nothing until
// something asks for its Done channel (a pipelined exchange, a credentials fetch, a
// renewal waiting its turn); from then on it is a context.WithDeadline of its parent,
// and Release stops that timer. Until then Err reports the parent's error, or
// context.DeadlineExceeded once the deadline has passed, and Value is the parent's
// (context.Cause reports the parent's cause meanwhile).
//
// Deadline's methods are safe for concurrent use; Release must be called once the Send
// returned.
type Deadline struct {
	parent context.Context
	d      time.Time

	detach Detacher // Detach's, nil for none

	mu      sync.Mutex
	inner   context.Context // nil until Done is first called
	stop    context.CancelFunc
	started atomic.Bool // inner and stop are set
}

// NewDeadline returns the context of a Send that ends at d or with parent.
func NewDeadline(parent context.Context, d time.Time) *Deadline {
	return &Deadline{parent: parent, d: d}
}

// Reset makes c the context of a new Send, as NewDeadline(parent, d) would, for a
// caller that keeps its Deadline in a pooled object of its own (saving its allocation
// per Send). c must be new or Released, and nothing may use it as the context of an
// earlier Send any more.
func (c *Deadline) Reset(parent context.Context, d time.Time) {
	c.parent, c.d, c.detach = parent, d, nil
	c.inner, c.stop = nil, nil
	c.started.Store(false)
}

// Deadline implements context.Context.
func (c *Deadline) Deadline() (time.Time, bool) { return c.d, true }

// Done implements context.Context: the first call arms the timer.
func (c *Deadline) Done() <-chan struct{} {
	if !c.started.Load() {
		c.mu.Lock()
		if c.inner == nil {
			c.inner, c.stop = context.WithDeadline(c.parent, c.d)
			c.started.Store(true)
		}
		c.mu.Unlock()
	}
	return c.inner.Done()
}

// Err implements context.Context.
func (c *Deadline) Err() error {
	if c.started.Load() {
		return c.inner.Err()
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Detach lets the Send under c hand a streamed reply to d (Detacher), as WithDetach
// would without another context. Call it before the Send.
func (c *Deadline) Detach(d Detacher) { c.detach = d }

// Value implements context.Context; a context made from c finds its Detacher.
func (c *Deadline) Value(key any) any {
	if _, ok := key.(detachKey); ok && c.detach != nil {
		return c.detach
	}
	if c.started.Load() {
		return c.inner.Value(key)
	}
	return c.parent.Value(key)
}

// Release stops the timer, if Done armed one.
func (c *Deadline) Release() {
	if c.started.Load() {
		c.stop()
	}
}

// liveErr is ctx.Err() for a caller that has just seen ctx's deadline ahead: a Deadline
// not armed yet then only needs its parent's error, without reading the clock again
// (clock reads are a measurable share of a forwarded call's CPU).
func liveErr(ctx context.Context) error {
	if c, ok := ctx.(*Deadline); ok && !c.started.Load() {
		return c.parent.Err()
	}
	return ctx.Err()
}

// timerless reports whether ctx is a Deadline, whose end a pooled exchange's connection
// deadline and the Conn's Close already cover, so that a body read under it needs no
// watch (see watchBody).
func timerless(ctx context.Context) bool {
	_, ok := ctx.(*Deadline)
	return ok
}
