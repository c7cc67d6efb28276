package fanout

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 4", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of 4", ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{"p50 of 100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p0", ms(hundred...), 0, time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: percentile(%v) = %v, want %v", tt.name, tt.p, got, tt.want)
		}
	}
	if m := median([]float64{1, 2, 3}); m != 2 {
		t.Errorf("median odd = %v", m)
	}
	if m := median([]float64{1, 2, 3, 10}); m != 2.5 {
		t.Errorf("median even = %v", m)
	}
}

// TestTracker: receivers that join later start at the next round; a missing receipt
// is a miss; a receipt after the wait ended is a miss too; deliveries past the last
// round are strays.
func TestTracker(t *testing.T) {
	tr := newTracker(time.Now(), 3)
	var a, b receiver
	tr.join(&a, 0)
	r0 := tr.start(1)
	r0.t0 = 100
	tr.deliver(&a, 150)
	tr.wait(r0, time.Second) // done already: returns at once
	s0 := r0.collect()
	if len(s0.latencies) != 1 || s0.latencies[0] != 50 || s0.misses != 0 {
		t.Fatalf("round 0: %+v", s0)
	}

	tr.join(&b, 1) // b joins for round 1
	r1 := tr.start(2)
	r1.t0 = 1000
	tr.deliver(&b, 1300)
	tr.deliver(&a, 1100)
	<-r1.done
	r1.end = 2000
	s1 := r1.collect()
	if len(s1.latencies) != 2 || s1.misses != 0 {
		t.Fatalf("round 1: %+v", s1)
	}
	if want := 2 / (300e-9); s1.perSec != want {
		t.Errorf("round 1 rate = %v, want %v", s1.perSec, want)
	}

	r2 := tr.start(2)
	r2.t0 = 5000
	tr.deliver(&a, 5100)
	r2.end = 6000        // the wait ended before b's receipt
	tr.deliver(&b, 7000) // late
	s2 := r2.collect()
	if len(s2.latencies) != 1 || s2.misses != 1 {
		t.Fatalf("round 2: %+v", s2)
	}
	tr.deliver(&a, 8000) // no round 3
	if tr.stray.Load() != 1 {
		t.Fatalf("stray = %d", tr.stray.Load())
	}

	res := summarize(2, []sample{s1, s2}, []time.Duration{3, 1, 2})
	if res.Deliveries != 3 || res.Misses != 1 || res.SendRTT != 2 || res.Max != 300 {
		t.Fatalf("summary: %+v", res)
	}
}

// TestTrackerEmptyRound: a round for no receivers is done at once.
func TestTrackerEmptyRound(t *testing.T) {
	tr := newTracker(time.Now(), 1)
	rd := tr.start(0)
	select {
	case <-rd.done:
	default:
		t.Fatal("empty round not done")
	}
}
