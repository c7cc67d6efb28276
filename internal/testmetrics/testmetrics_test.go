package testmetrics

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSeries: counters and gauges by name and labels, within the prefix; a histogram
// left out; a missing and a wrong value named, in key order.
func TestSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_calls_total", Help: "h"}, []string{"outcome", "endpoint"})
	open := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_open", Help: "h"})
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "y_open", Help: "h"})
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x_seconds", Help: "h"})
	reg.MustRegister(calls, open, other, took)
	calls.WithLabelValues("ok", "a").Add(2)
	open.Set(3)
	took.Observe(1)

	got := Series(t, reg, "x_")
	want := map[string]float64{"x_calls_total,endpoint=a,outcome=ok": 2, "x_open": 3}
	if len(got) != len(want) {
		t.Errorf("Series = %v, want %v", got, want)
	}
	Expect(t, got, want)
	miss := Mismatches(got, map[string]float64{"x_open": 4, "x_gone": 0, "x_calls_total,endpoint=a,outcome=ok": 2})
	if !slices.Equal(miss, []string{"x_gone = 0 (present false), want 0", "x_open = 3 (present true), want 4"}) {
		t.Errorf("Mismatches = %q", miss)
	}
}
