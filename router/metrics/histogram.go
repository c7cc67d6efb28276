package metrics

import (
	"math"
	"sync/atomic"
)

// bounds are the upper bounds of the latency buckets, in nanoseconds: a 1-2.5-5 series
// from 5µs (time inside the router is in microseconds) to 60s (a slow tool call). The
// same buckets serve router and backend time, so the two can be compared bucket by
// bucket and summed.
var bounds = [...]int64{
	5e3, 10e3, 25e3, 50e3, 100e3, 250e3, 500e3,
	1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 500e6,
	1e9, 2.5e9, 5e9, 10e9, 30e9, 60e9,
}

// numBuckets counts the buckets, the last one (+Inf) included.
const numBuckets = len(bounds) + 1

// boundsSeconds are bounds in seconds, as Prometheus wants them.
var boundsSeconds = func() []float64 {
	s := make([]float64, len(bounds))
	for i, b := range bounds {
		s[i] = float64(b) / 1e9
	}
	return s
}()

// bucketOf returns the index of the bucket a duration of ns falls in: the first whose
// upper bound is >= ns (Prometheus buckets are inclusive of their upper bound).
func bucketOf(ns int64) int {
	lo, hi := 0, len(bounds) // the answer is in [lo, hi]; hi == len(bounds) is +Inf
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bounds[mid] < ns {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// histogram is a fixed-bucket latency histogram recorded with two atomic additions and
// no lock, no allocation, no floating point: cheaper on the hot path than a Prometheus
// histogram, whose sum is a float updated by compare-and-swap. It is exported as a
// constant histogram at scrape time.
type histogram struct {
	counts [numBuckets]atomic.Uint64
	sum    atomic.Int64 // nanoseconds; overflows after 292 years of summed latency
}

func (h *histogram) observe(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.counts[bucketOf(ns)].Add(1)
	h.sum.Add(ns)
}

// histSnapshot is a plain copy of a histogram: per-bucket (not cumulative) counts.
type histSnapshot struct {
	counts [numBuckets]uint64
	sum    int64
}

// load adds h's current values to s (so that several histograms can be merged).
func (s *histSnapshot) load(h *histogram) {
	for i := range h.counts {
		s.counts[i] += h.counts[i].Load()
	}
	s.sum += h.sum.Load()
}

func (s *histSnapshot) add(o *histSnapshot) {
	for i := range s.counts {
		s.counts[i] += o.counts[i]
	}
	s.sum += o.sum
}

// count is the number of observations.
func (s *histSnapshot) count() uint64 {
	var n uint64
	for _, c := range s.counts {
		n += c
	}
	return n
}

// sub returns s - prev: the observations made between two snapshots.
func (s *histSnapshot) sub(prev *histSnapshot) histSnapshot {
	var d histSnapshot
	for i := range s.counts {
		d.counts[i] = s.counts[i] - prev.counts[i]
	}
	d.sum = s.sum - prev.sum
	return d
}

// cumulative returns the cumulative bucket counts keyed by upper bound in seconds, the
// form prometheus.MustNewConstHistogram takes (+Inf is implied by the count).
func (s *histSnapshot) cumulative() (map[float64]uint64, uint64) {
	m := make(map[float64]uint64, len(bounds))
	var n uint64
	for i := range bounds {
		n += s.counts[i]
		m[boundsSeconds[i]] = n
	}
	return m, n + s.counts[len(bounds)]
}

// quantile estimates the q-quantile (0..1) in seconds by linear interpolation inside
// the bucket that holds it, as Prometheus' histogram_quantile does. It returns NaN
// without observations, and the highest finite bound when the quantile falls in +Inf.
func (s *histSnapshot) quantile(q float64) float64 {
	total := s.count()
	if total == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	var cum uint64
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		if float64(cum+c) >= rank {
			if i == len(bounds) {
				return boundsSeconds[len(bounds)-1]
			}
			lo := 0.0
			if i > 0 {
				lo = boundsSeconds[i-1]
			}
			hi := boundsSeconds[i]
			return lo + (hi-lo)*(rank-float64(cum))/float64(c)
		}
		cum += c
	}
	return boundsSeconds[len(bounds)-1]
}
