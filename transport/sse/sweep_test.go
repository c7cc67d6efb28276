package sse

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestSweepMany: streams of one interval share one sweeper, which writes each idle
// one's keep-alives and forgets each stream that ends; with none left it stops its
// timer.
func TestSweepMany(t *testing.T) {
	const every = 7 * time.Millisecond // an interval no other test uses
	var sinks []*memSink
	var streams []*Stream
	for i := 0; i < 20; i++ {
		s := NewStream(0, StreamConfig{})
		sink := newMemSink(-1)
		drive(t, s, sink, PumpOptions{KeepAlive: every})
		sinks, streams = append(sinks, sink), append(streams, s)
	}
	w := sweeperFor(every)
	for _, sink := range sinks {
		sink.waitFor(t, "two keep-alives", func(o string) bool { return strings.Count(o, ": keep-alive\n\n") >= 2 })
	}
	for i, s := range streams {
		s.Close(0)
		if err := within(t, sinks[i].ended, "the stream's end"); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, "the sweeper idle", waitLimit, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.cons) == 0 && !w.running
	})
}

// TestSweepDue: a sweep starts a keep-alive on a stream that would otherwise reach its
// interval before the next sweep, and on no other: not on one that wrote since, nor
// on one whose writer is busy.
func TestSweepDue(t *testing.T) {
	s := NewStream(0, StreamConfig{})
	sink := newMemSink(-1)
	c, _ := drive(t, s, sink, PumpOptions{KeepAlive: time.Hour})
	waitIdle(t, c)
	s.mu.Lock()
	last := c.drv.lastWrite
	s.mu.Unlock()
	if c.keepAliveDue(last - 1) {
		t.Errorf("keep-alive due on a stream that wrote after the due time")
	}
	if !c.keepAliveDue(last) {
		t.Fatalf("keep-alive not due on a stream silent since the due time")
	}
	if c.keepAliveDue(last) {
		t.Errorf("keep-alive due twice while its writer is busy")
	}
	c.keepAlive() // what the sweep does
	sink.waitFor(t, "the keep-alive", func(o string) bool { return strings.Contains(o, ": keep-alive\n\n") })
	s.Close(0)
}
