package upstream

import (
	"math"
	"runtime/metrics"
	"testing"
	"time"
)

// percentileSince reads the percentile of what a histogram counted since its previous
// counts, as the upper edge of its bucket (the lower edge of an unbounded last one),
// and keeps the new counts for the next period.
func TestPercentileSince(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{0, 1e-6, 1e-3, 1e-2, math.Inf(1)},
		Counts:  []uint64{100, 0, 0, 0},
	}
	prev := append([]uint64(nil), h.Counts...)
	h.Counts = []uint64{100 + 80, 15, 5, 0} // this period: 80 under 1µs, 15 under 1ms, 5 under 10ms
	for _, c := range []struct {
		pct  uint64
		want time.Duration
	}{
		{50, time.Microsecond},
		{90, time.Millisecond},
		{99, 10 * time.Millisecond},
	} {
		p := append([]uint64(nil), prev...)
		if got := percentileSince(h, p, c.pct); got != c.want {
			t.Errorf("p%d = %v, want %v", c.pct, got, c.want)
		}
		if p[0] != 180 {
			t.Errorf("the counts kept for the next period: %v", p)
		}
	}
	p := append([]uint64(nil), prev...)
	h.Counts = []uint64{100, 0, 0, 7} // all past the last edge
	if got := percentileSince(h, p, 90); got != 10*time.Millisecond {
		t.Errorf("an unbounded last bucket: %v, want its lower edge", got)
	}
	if got := percentileSince(h, p, 90); got != 0 {
		t.Errorf("a period with nothing counted: %v, want 0", got)
	}
}

// The runtime exports the scheduler's latency under the name schedWait reads, as a
// histogram: were it renamed or retyped, routerWait would read 0 for ever and the
// saturation rule would be off without a word. The first sample keeps the counts
// (prev), and the next reads a period from them.
func TestSchedMetricRead(t *testing.T) {
	var found bool
	for _, d := range metrics.All() {
		if d.Name == schedMetric {
			found = d.Kind == metrics.KindFloat64Histogram
		}
	}
	if !found {
		t.Fatalf("the runtime exports no histogram %s", schedMetric)
	}
	schedWait.mu.Lock()
	defer schedWait.mu.Unlock()
	schedWait.prev = nil
	if d := sampleSchedWait(); d != 0 {
		t.Fatalf("the first sample read %v, want 0 (no period yet)", d)
	}
	if len(schedWait.prev) == 0 {
		t.Fatal("the first sample kept no counts")
	}
	if d := sampleSchedWait(); d < 0 {
		t.Fatalf("a period read %v", d)
	}
}

// While the router's goroutines wait a short call's bound for a CPU, PipelineShort
// lifts the bound on a kind's typical time and the window and budget of a connection's
// queue (its depth stays): every call waits for the router's CPU anyway, and the
// pipeline is the cheaper path. Below that, both hold, and the window counts a call's
// wait less the router's.
func TestPipelineSaturated(t *testing.T) {
	o := HTTPOptions{PipelineShort: true}.withDefaults()
	p := newPipeline("127.0.0.1:1", false, &o, &connSet{})
	bound := time.Duration(p.bound) * time.Microsecond
	if p.saturated(bound/2) || !p.saturated(bound) {
		t.Fatalf("saturated at half the bound or not at the bound (%v)", bound)
	}
	if got := p.shortBound(bound / 2); got != p.bound {
		t.Fatalf("short bound %d below saturation, want %d", got, p.bound)
	}
	if got := p.shortBound(bound); got != math.MaxInt64 {
		t.Fatalf("short bound %d when saturated, want none", got)
	}
	pc := &pipeConn{p: p, wake: make(chan struct{}, 1), lastUsed: time.Now()}
	if !pc.enqueue(&pipeCall{est: 2 * p.budget}) {
		t.Fatal("enqueue refused")
	}
	now := time.Now().Add(2 * o.PipelineWindow)
	if _, ok := pc.load(now, 0); ok {
		t.Fatal("a queue over its budget and window takes more below saturation")
	}
	if _, ok := pc.load(now, bound); !ok {
		t.Fatal("a queue under its depth refuses a call while the router is saturated")
	}
	if plain := newPipeline("127.0.0.1:1", false, &HTTPOptions{Pipeline: 1}, &connSet{}); plain.saturated(time.Hour) {
		t.Fatal("without PipelineShort there is nothing to lift")
	}
}
