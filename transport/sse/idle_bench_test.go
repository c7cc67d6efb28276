package sse

import (
	"runtime"
	"testing"
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
