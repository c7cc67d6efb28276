package sse

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// nopSink takes every write whole and keeps nothing.
type nopSink struct{}

func (nopSink) TryWrite([]byte, EventID) (bool, error) { return true, nil }
func (nopSink) Write([]byte) error                     { return nil }
func (nopSink) Interrupt()                             {}
func (nopSink) End(error)                              {}

// BenchmarkIdleDriven reports the heap a driven stream holds while idle (B/stream): a
// stream, its consumer and driver, and what its keep-alives take, with the default
// keep-alive interval. Run with -benchtime=1x.
func BenchmarkIdleDriven(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		streams := make([]*Stream, n)
		cons := make([]*Consumer, n)
		for k := range streams {
			streams[k] = NewStream(0, StreamConfig{})
			c, err := streams[k].Attach(0)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Drive(nopSink{}, PumpOptions{}); err != nil {
				b.Fatal(err)
			}
			cons[k] = c
		}
		for _, c := range cons { // every first drain done
			for {
				c.s.mu.Lock()
				busy := c.busy
				c.s.mu.Unlock()
				if !busy {
					break
				}
				runtime.Gosched()
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/stream")
		for _, s := range streams {
			s.Close(0)
		}
		runtime.KeepAlive(cons)
	}
}

// gapSink records the longest and shortest time between its writes after the first.
type gapSink struct {
	nopSink
	mu         sync.Mutex
	last       time.Time
	most, less time.Duration
	n          int
}

func (g *gapSink) TryWrite([]byte, EventID) (bool, error) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() {
		d := now.Sub(g.last)
		g.most = max(g.most, d)
		if g.less == 0 || d < g.less {
			g.less = d
		}
		g.n++
	}
	g.last = now
	return true, nil
}

// BenchmarkKeepAliveGap reports how the keep-alives of many idle driven streams keep
// their interval: the longest silence of any stream and the shortest gap between two of
// its keep-alives, as fractions of the interval (the sweep aims at 0.875 to 1). Run with
// -benchtime=1x.
func BenchmarkKeepAliveGap(b *testing.B) {
	const n, every, span = 2000, 40 * time.Millisecond, 500 * time.Millisecond
	for i := 0; i < b.N; i++ {
		sinks := make([]*gapSink, n)
		streams := make([]*Stream, n)
		for k := range sinks {
			sinks[k], streams[k] = new(gapSink), NewStream(0, StreamConfig{})
			c, err := streams[k].Attach(0)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Drive(sinks[k], PumpOptions{KeepAlive: every}); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(span) // the span measured, not a wait for an event
		var most, less time.Duration
		for k, g := range sinks {
			streams[k].Close(0)
			g.mu.Lock()
			most = max(most, g.most)
			if less == 0 || (g.less > 0 && g.less < less) {
				less = g.less
			}
			g.mu.Unlock()
		}
		b.ReportMetric(float64(most)/float64(every), "max-gap/interval")
		b.ReportMetric(float64(less)/float64(every), "min-gap/interval")
	}
}
