package sse

import (
	"math"

	"github.com/mcprouter/mcprouter/internal/mono"
)

// Sink is the connection a driven consumer writes to (Consumer.Drive). The consumer
// uses it from one goroutine at a time, never concurrently.
type Sink interface {
	// TryWrite writes an event without blocking, its body p then its end (AppendEventEnd
	// of id), and reports whether all of it went out. When not, the sink keeps the rest
	// (a copy) and the next Write sends it first. An error means the connection is
	// unusable. The sink appends the end itself, where it frames p: the id is the one
	// part of the event that differs from stream to stream. An id with Seq 0 (never an
	// event's) appends nothing: p is a keep-alive comment.
	TryWrite(p []byte, id EventID) (bool, error)
	// Write sends what an earlier TryWrite kept, then p (nothing more if p is empty),
	// blocking until they are written or the write fails.
	Write(p []byte) error
	// Interrupt makes a blocked Write fail, like PumpOptions.Interrupt (which Drive
	// does not use): called at most once, from another goroutine, never after End.
	Interrupt()
	// End is called once when the stream is done with the sink, with nil or the
	// reason (as Pump would return it), from the goroutine that ended it; the sink is
	// not used after that, so End may close the connection.
	End(err error)
}

// Drive writes the consumer's events to sink like Pump, without a goroutine of its own
// while the stream is idle, which is what a stream held open for a session's whole life
// mostly is. Publish writes a new event itself when the consumer has nothing else to
// send and the sink takes the event at once (TryWrite); a goroutine runs only while
// there is a backlog to write with blocking writes (a replay, a slow client, a write the
// socket did not take whole), and ends when it has caught up. Keep-alive comments come
// from a sweep shared by every driven stream of the same interval (sweeper). Done and
// MaxDuration are not used: the stream ends with Close (the retry hint after what is
// left), when the consumer is cut off or detached, or when a write fails, and then the
// sink's End is called. Interrupt and Done of opts are not used either: the sink's
// Interrupt stands for the first.
//
// Drive returns at once. Like Pump it may be called once per Consumer, and not with
// Pump.
func (c *Consumer) Drive(sink Sink, opts PumpOptions) error {
	if !c.pumping.CompareAndSwap(false, true) {
		return ErrPumping
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	c.imu.Lock()
	c.isink = sink
	c.imu.Unlock()
	head := c.appendHead(nil, opts)
	var sw *sweeper
	if ka := opts.KeepAlive; ka >= 0 {
		if ka == 0 {
			ka = DefaultKeepAlive
		}
		sw = sweeperFor(ka)
	}
	s, d := c.s, &c.drv
	s.mu.Lock()
	c.driven = true
	d.maxBatch, d.sweep, d.sw = int32(min(opts.MaxBatch, math.MaxInt32)), -1, sw
	c.busy = true // the first drain writes the head and any replay
	d.lastWrite = mono.Nanos()
	s.mu.Unlock()
	if d.sw != nil {
		d.sw.add(c)
	}
	go c.drain(head)
	return nil
}

// driver is the state of a driven consumer (Drive), part of the Consumer (an object
// of its own, with a copy of the sink and wider counts, took 64 bytes more of every
// held stream). Its fields are guarded by the stream's lock. Its sink is the
// consumer's (Consumer.isink), which only the consumer's one writer uses.
type driver struct {
	sw        *sweeper // writes its keep-alives; nil: none
	lastWrite int64    // monotonic time of the last write
	flushed   uint64   // highest seq written whole
	kept      uint64   // seq of an event the sink kept part of (0: none)
	maxBatch  int32
	sweep     int32 // its index in sw's consumers (guarded by sw.mu), -1 when not there
}

// kickLocked makes a consumer notice a change of its stream (an event to write, a
// close, its own cut-off or detachment): a pump's wake-up, or for a driven consumer a
// drain goroutine when no writer holds the sink. Called with s.mu held.
func (c *Consumer) kickLocked() {
	if !c.driven {
		notify(c.wake)
		return
	}
	if !c.busy {
		c.busy = true
		go c.drain(nil)
	}
}

// publishInline writes the event id, body f, that Publish just added, from Publish's
// goroutine: the driven consumer had nothing else to write. Called without the lock,
// holding the sink (c.busy).
func (c *Consumer) publishInline(f []byte, id EventID) {
	s, d := c.s, &c.drv
	seq, size := id.Seq, len(f)+id.endLen()
	all, err := c.isink.TryWrite(f, id)
	s.mu.Lock()
	if s.writing == seq {
		s.writing = 0
	}
	if err == nil {
		c.next = seq + 1
		if s.cons == c { // a newer consumer's backlog is its own
			s.addPendingLocked(-size)
		}
		if all {
			d.flushed = seq
			s.wroteLocked(seq)
			d.lastWrite = mono.Nanos()
			if c.idleLocked() {
				c.busy = false
				s.mu.Unlock()
				s.cfg.Stats.Written.Add(uint64(size))
				return
			}
		} else {
			d.kept = seq
		}
	}
	s.mu.Unlock()
	if err != nil {
		c.end(c.cause(err))
		return
	}
	if all {
		s.cfg.Stats.Written.Add(uint64(size))
	}
	// The rest needs blocking writes: never on the publisher's goroutine, which has
	// other consumers to serve.
	go c.drain(nil)
}

// keepAlive writes a keep-alive comment from the sweep's goroutine, without blocking
// (the sweep has other streams to serve): what the socket does not take goes out from
// a drain goroutine. Called without the lock, holding the sink (c.busy).
func (c *Consumer) keepAlive() {
	s, d := c.s, &c.drv
	all, err := c.isink.TryWrite(keepAliveBlock, EventID{})
	if err != nil {
		c.end(c.cause(err))
		return
	}
	s.cfg.Stats.KeepAlives.Add(1)
	s.cfg.Stats.Written.Add(uint64(len(keepAliveBlock))) // the rest of it, if kept, surely follows
	s.mu.Lock()
	d.lastWrite = mono.Nanos()
	if all && c.idleLocked() {
		c.busy = false
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	go c.drain(nil)
}

// keepAliveBlock is a keep-alive comment.
var keepAliveBlock = AppendComment(nil, keepAliveText)

// idleLocked reports whether a driven consumer has nothing to write: the writer holding
// its sink may give it back. Called with s.mu held.
func (c *Consumer) idleLocked() bool {
	return c.state == consActive && c.next > c.s.last && !c.s.closed
}

// drain writes, with blocking writes, what the sink kept and head, then the consumer's
// backlog and the end of the stream, until it has caught up
// (then it gives the sink back) or the consumer ends. The caller holds the sink.
func (c *Consumer) drain(head []byte) {
	s, d, sink := c.s, &c.drv, c.isink
	if err := sink.Write(head); err != nil {
		c.end(c.cause(err))
		return
	}
	s.cfg.Stats.Written.Add(uint64(len(head)))
	pb := pumpBuf{size: min(int(d.maxBatch), maxPooled)}
	for {
		flushed := d.flushed
		if d.kept != 0 { // written whole by the Write above or the last batch's
			flushed, d.kept = max(flushed, d.kept), 0
		}
		d.flushed = flushed
		buf, big, last, end, stop := s.take(c, pb.get(), int(d.maxBatch), flushed)
		if stop != nil {
			pb.put(buf)
			c.end(stop)
			return
		}
		var err error
		switch {
		case len(buf) > 0 || len(big) > 0:
			if len(big) > 0 {
				err = sink.Write(big)
			}
			if err == nil {
				err = sink.Write(buf)
			}
			if err == nil {
				d.flushed = last
				s.cfg.Stats.Written.Add(uint64(len(buf) + len(big)))
			}
		case end:
			s.mu.Lock()
			retry := int(s.closeRetry)
			s.mu.Unlock()
			if retry > 0 {
				buf = AppendRetry(buf, retry)
				if err = sink.Write(buf); err == nil {
					s.cfg.Stats.Written.Add(uint64(len(buf)))
				}
			}
			pb.put(buf)
			c.end(c.cause(err))
			return
		default:
			pb.put(buf)
			if c.release() {
				return
			}
			continue
		}
		pb.put(buf)
		if err != nil {
			c.end(c.cause(err))
			return
		}
		s.mu.Lock()
		d.lastWrite = mono.Nanos()
		s.mu.Unlock()
	}
}

// release gives the sink back when nothing is left to write, and reports whether it
// did; otherwise the caller carries on writing.
func (c *Consumer) release() bool {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.idleLocked() {
		return false
	}
	s.wroteLocked(c.drv.flushed)
	c.busy = false
	return true
}

// end finishes a driven consumer: detached from its stream, out of its sweeper, and the
// sink told why. The caller holds the sink, which is never given back.
func (c *Consumer) end(err error) {
	d := &c.drv
	c.finish(d.flushed)
	c.imu.Lock() // waits for an interrupt in progress
	c.sinkGone = true
	c.imu.Unlock()
	if d.sw != nil {
		d.sw.remove(c)
	}
	c.isink.End(err)
}
