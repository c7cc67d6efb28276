// Package testmetrics reads what a Prometheus registry exports, for the tests that
// check counters and gauges: every series by its name and labels, and the expected
// values compared in one place. Only tests import it.
package testmetrics

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Series gathers g and returns the value of every counter and gauge series of a
// metric whose name starts with prefix ("" for all), keyed by the name and the labels
// as gathered (by label name): "mcprouter_endpoint_sessions,endpoint=x". Histograms
// and summaries are left out. A gather error fails the test.
func Series(t testing.TB, g prometheus.Gatherer, prefix string) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), prefix) {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				got[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			}
		}
	}
	return got
}

// Mismatches returns, in key order, a line for every series of want that got lacks
// or holds with another value.
func Mismatches(got, want map[string]float64) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			out = append(out, fmt.Sprintf("%s = %v (present %v), want %v", k, g, ok, want[k]))
		}
	}
	return out
}

// Expect reports every mismatch of got against want as an error of the test, which
// goes on.
func Expect(t testing.TB, got, want map[string]float64) {
	t.Helper()
	for _, m := range Mismatches(got, want) {
		t.Error(m)
	}
}
