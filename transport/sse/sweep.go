package sse

import (
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/internal/mono"
)

// sweeper writes the keep-alive comments of the driven consumers that share one
// keep-alive interval: one timer for all of them instead of one each, which an idle
// stream would otherwise hold for its whole life. It runs every eighth of the interval
// and writes a keep-alive on each stream that would otherwise reach its interval without
// a write before the next run: no stream stays silent longer than its interval (timer
// delays aside, as with a timer per stream), and none gets a keep-alive less than seven
// eighths of it after its last write. (A run checks each stream, about a tenth of a
// microsecond; a keep-alive is a system call, a hundred times that: a finer period would
// cost more in runs than it saves in keep-alives, a coarser one the reverse.)
type sweeper struct {
	every  time.Duration // the keep-alive interval
	period time.Duration // between runs

	mu      sync.Mutex
	cons    []*Consumer // each one's index is its driver's sweep field
	timer   *time.Timer
	running bool        // the timer is set: cons is not empty
	due     []*Consumer // a run's keep-alives to write, kept between runs
}

// sweepers holds one sweeper per keep-alive interval in use (a process uses one or a
// few). Sweepers are never removed; an empty one holds no timer.
var sweepers struct {
	mu sync.Mutex
	m  map[time.Duration]*sweeper
}

// sweeperFor returns the sweeper of interval every (> 0).
func sweeperFor(every time.Duration) *sweeper {
	sweepers.mu.Lock()
	defer sweepers.mu.Unlock()
	w := sweepers.m[every]
	if w == nil {
		if sweepers.m == nil {
			sweepers.m = make(map[time.Duration]*sweeper)
		}
		w = &sweeper{every: every, period: max(every/8, time.Millisecond)}
		sweepers.m[every] = w
	}
	return w
}

// add makes w write c's keep-alives. Called without the stream's lock (w.mu is taken
// first, then each stream's, by run).
func (w *sweeper) add(c *Consumer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c.drv.sweep = int32(len(w.cons))
	w.cons = append(w.cons, c)
	if !w.running {
		w.running = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.period, w.run)
		} else {
			w.timer.Reset(w.period)
		}
	}
}

// remove stops c's keep-alives. Called without the stream's lock.
func (w *sweeper) remove(c *Consumer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := int(c.drv.sweep)
	if i < 0 || i >= len(w.cons) || w.cons[i] != c {
		return
	}
	last := len(w.cons) - 1
	w.cons[i] = w.cons[last]
	w.cons[i].drv.sweep = int32(i)
	w.cons[last] = nil
	w.cons = w.cons[:last]
	c.drv.sweep = -1
	if cap(w.cons) > 64 && len(w.cons) < cap(w.cons)/4 { // give memory back after a peak
		w.cons = append([]*Consumer(nil), w.cons...)
	}
}

// run is one sweep, on the timer's goroutine: a keep-alive for every consumer that has
// written nothing for at least its interval less one period, each written without
// blocking by this goroutine (Consumer.keepAlive): the streams of a router mostly fall
// due together, and a goroutine each would be a stack each at once.
func (w *sweeper) run() {
	w.mu.Lock()
	due := int64(time.Duration(mono.Nanos()) - w.every + w.period)
	for _, c := range w.cons {
		if c.keepAliveDue(due) {
			w.due = append(w.due, c)
		}
	}
	if len(w.cons) == 0 {
		w.running = false
	} else {
		w.timer.Reset(w.period)
	}
	due2 := w.due
	w.due = nil
	w.mu.Unlock()
	// Written without w.mu: a write that fails ends its consumer, which leaves w.
	for i, c := range due2 {
		c.keepAlive()
		due2[i] = nil
	}
	w.mu.Lock()
	if w.due == nil && cap(due2) <= 1024 {
		w.due = due2[:0] // kept for the next run, unless a peak made it large
	}
	w.mu.Unlock()
}

// keepAliveDue reports whether c has written nothing since due (monotonic), and then
// holds its sink for a keep-alive (the caller calls keepAlive).
func (c *Consumer) keepAliveDue(due int64) bool {
	s, d := c.s, &c.drv
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.state != consActive || c.busy || d.lastWrite > due {
		return false
	}
	c.busy = true
	return true
}
