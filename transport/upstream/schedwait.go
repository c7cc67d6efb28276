package upstream

import (
	"math"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/internal/mono"
)

// The router's own queueing, taken out of the call times that PipelineShort decides
// on. A call's time as the router measures it (from its request's write to its reply
// in the caller's hands) includes the time the caller's goroutine, and a pipelined
// call's writer and reader, waited for a CPU once runnable. On an idle router that is
// microseconds. On a saturated one it is milliseconds for every call, and it made every
// kind look longer than the 1 ms bound, so that pipelining, the cheaper path, turned
// itself off exactly when the router ran short of CPU: at 40,000 calls/s offered to a
// router and its backend sharing one CPU, 89% of the calls that entered the pipeline
// went back to the pool as not short, and the router forwarded 0.75-0.85x what
// pipeline: 2 did. The Go scheduler measures that wait itself (runtime/metrics,
// /sched/latencies:seconds); schedWait keeps its 90th percentile over the last
// sampling period, read at most every schedSample by whichever call finds it due (no
// goroutine of its own), and the record books a call's time less that wait.
const (
	schedSample  = 100 * time.Millisecond
	schedMetric  = "/sched/latencies:seconds"
	schedPercent = 90
)

var schedWait struct {
	next atomic.Int64 // mono.Nanos of the next sample
	wait atomic.Int64 // ns: the percentile of the last period's waits

	mu     sync.Mutex // the sampler's: a call that finds it taken does not wait
	sample [1]metrics.Sample
	prev   []uint64 // the histogram's counts at the previous sample
}

// saturated reports whether the router's own goroutines wait at least a short call's
// bound for a CPU (wait, from routerWait). Then the record cannot tell a short kind
// from a long one (every call takes the router's queueing), and a call queued on a
// pipelined connection waits for nothing that the CPU's queue does not already hold it
// for: PipelineShort pipelines every kind with no slow call among its last
// shortClean, up to the connections' depth, as Pipeline alone would, because the
// pipeline is the cheaper path per call exactly when the router runs short of CPU.
// Its stalls are still booked (past the slow limit beyond wait), a kind known slow
// stays on the pool, and a call still tries the pipeline only while others are in
// flight to share its writes (enter).
func (p *pipeline) saturated(wait time.Duration) bool {
	return p.calls != nil && wait.Microseconds() >= p.bound
}

// shortBound is the typical time in µs up to which a kind counts as short, given the
// router's recent wait for a CPU: the bound, or no bound at all while saturated.
func (p *pipeline) shortBound(wait time.Duration) int64 {
	if p.saturated(wait) {
		return math.MaxInt64
	}
	return p.bound
}

// routerWait is how long the process's goroutines recently waited for a CPU once
// runnable (their schedPercent-th percentile over the last period); 0 without
// PipelineShort, whose record alone needs it.
func (p *pipeline) routerWait() time.Duration {
	if p.calls == nil {
		return 0
	}
	return routerWait()
}

// routerWait is how long the process's goroutines recently waited for a CPU once
// runnable (their schedPercent-th percentile over the last period).
func routerWait() time.Duration {
	now := mono.Nanos()
	if now >= schedWait.next.Load() && schedWait.mu.TryLock() {
		if now >= schedWait.next.Load() {
			schedWait.wait.Store(int64(sampleSchedWait()))
			schedWait.next.Store(now + int64(schedSample))
		}
		schedWait.mu.Unlock()
	}
	return time.Duration(schedWait.wait.Load())
}

// sampleSchedWait reads the scheduler's latency histogram and returns the
// schedPercent-th percentile of the waits since the previous read (0 on the first
// read, or with none); the caller holds schedWait.mu.
func sampleSchedWait() time.Duration {
	s := schedWait.sample[:]
	s[0].Name = schedMetric
	metrics.Read(s) // reuses the histogram of the previous read
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s[0].Value.Float64Histogram()
	prev := schedWait.prev
	if len(prev) != len(h.Counts) {
		schedWait.prev = append(prev[:0], h.Counts...)
		return 0
	}
	return percentileSince(h, prev, schedPercent)
}

// percentileSince returns the pct-th percentile of the values h counted since its
// counts were prev (the upper edge of the bucket it falls in, or the lower edge of an
// unbounded last bucket), and leaves h's counts in prev.
func percentileSince(h *metrics.Float64Histogram, prev []uint64, pct uint64) time.Duration {
	var total uint64
	for i, c := range h.Counts {
		total += c - prev[i]
	}
	want := total * pct / 100
	var run uint64
	var d time.Duration
	for i, c := range h.Counts {
		run += c - prev[i]
		if total > 0 && run > want {
			edge := h.Buckets[i+1]
			if math.IsInf(edge, 1) {
				edge = h.Buckets[i]
			}
			d = time.Duration(edge * float64(time.Second))
			break
		}
	}
	copy(prev, h.Counts)
	return d
}

// backendShare is d less the router's recent wait for a CPU (routerWait), at least 0:
// what the call took on the backend's side, as nearly as the router can tell.
func backendShare(d time.Duration) time.Duration {
	return max(d-routerWait(), 0)
}
