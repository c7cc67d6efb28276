package metrics

import (
	"math"
	"testing"
)

func TestBucketOf(t *testing.T) {
	cases := []struct {
		ns   int64
		want int
	}{
		{-1, 0}, {0, 0}, {1, 0}, {5e3, 0}, // upper bounds are inclusive
		{5e3 + 1, 1}, {10e3, 1},
		{999_999, 7}, {1e6, 7}, {1e6 + 1, 8},
		{60e9, len(bounds) - 1},
		{60e9 + 1, len(bounds)}, {math.MaxInt64, len(bounds)}, // +Inf
	}
	for _, c := range cases {
		if got := bucketOf(c.ns); got != c.want {
			t.Errorf("bucketOf(%d) = %d, want %d", c.ns, got, c.want)
		}
	}
	// Exhaustive over the bounds: each bound falls in its own bucket, one more in the next.
	for i, b := range bounds {
		if bucketOf(b) != i || bucketOf(b+1) != i+1 {
			t.Errorf("bound %d (%d ns) misplaced", i, b)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	var h histogram
	var empty histSnapshot
	if q := empty.quantile(0.5); !math.IsNaN(q) {
		t.Errorf("empty quantile %v, want NaN", q)
	}
	for i := 0; i < 100; i++ {
		h.observe(2e6) // (1ms, 2.5ms]
	}
	var s histSnapshot
	s.load(&h)
	if s.count() != 100 || s.sum != 200e6 {
		t.Fatalf("count %d sum %d", s.count(), s.sum)
	}
	// Linear interpolation inside the bucket, as histogram_quantile does.
	for _, c := range []struct{ q, want float64 }{{0.5, 0.00175}, {1, 0.0025}, {0.1, 0.00115}} {
		if got := s.quantile(c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	// Past the last bound: the highest finite bound.
	var slow histogram
	slow.observe(120e9)
	var ss histSnapshot
	ss.load(&slow)
	if got := ss.quantile(0.99); got != 60 {
		t.Errorf("+Inf quantile %v, want 60", got)
	}
	// Deltas between snapshots.
	h.observe(7e3)
	var s2 histSnapshot
	s2.load(&h)
	d := s2.sub(&s)
	if d.count() != 1 || d.sum != 7e3 || d.counts[1] != 1 {
		t.Errorf("delta %+v", d)
	}
	cum, n := s2.cumulative()
	if n != 101 || cum[0.000005] != 0 || cum[0.00001] != 1 || cum[0.001] != 1 || cum[0.0025] != 101 || len(cum) != len(bounds) {
		t.Errorf("cumulative %v, count %d", cum, n)
	}
}
