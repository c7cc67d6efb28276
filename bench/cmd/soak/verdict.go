package main

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// Bounds of "flat".
const (
	maxGrowth      = 0.02 // resident memory, descriptors, goroutines over the last two thirds
	maxRateDrift   = 0.05 // throughput, last window against the first
	maxP99Increase = 0.5  // p99, last window against the first (a shared machine is noisy)
)

type verdict struct {
	capacity, rate float64
	duration       time.Duration
	start          time.Time
	calls, churn   *report.Report
	samples        []cluster.Sample
	deliveries     int64
	subscribers    int
	stalls         int
}

// check is one line of the table.
type check = cluster.Check

// window is the length compared at both ends: 5 of 30 minutes.
func (v *verdict) window() time.Duration { return v.duration / 6 }

// ends returns the mean throughput and p99 of the calls over the first and the last
// window of the measured series.
func (v *verdict) ends() (rate0, rate1, p990, p991 float64) {
	s := v.calls.Series
	n := max(1, int(v.window()/time.Second))
	if len(s) < 2*n {
		n = max(1, len(s)/2)
	}
	mean := func(pts []report.Second) (rate, p99 float64) {
		for _, p := range pts {
			rate += p.RPS
			p99 += p.P99
		}
		return rate / float64(len(pts)), p99 / float64(len(pts))
	}
	if len(s) == 0 {
		return
	}
	rate0, p990 = mean(s[:n])
	rate1, p991 = mean(s[len(s)-n:])
	return
}

func (v *verdict) checks() cluster.Checks {
	var out cluster.Checks
	r0, r1, p0, p1 := v.ends()
	w := v.window().Round(time.Second)
	out = append(out, check{What: fmt.Sprintf("throughput flat (first %v vs last %v)", w, w),
		Figure: fmt.Sprintf("%.0f/s → %.0f/s (%+.1f%%)", r0, r1, 100*(r1-r0)/max(r0, 1)), Pass: r0 > 0 && (r1-r0)/r0 >= -maxRateDrift})
	out = append(out, check{What: fmt.Sprintf("p99 flat (first %v vs last %v)", w, w),
		Figure: fmt.Sprintf("%s → %s (%+.0f%%)", report.FormatUS(p0), report.FormatUS(p1), 100*(p1-p0)/max(p0, 1)), Pass: p1 <= p0*(1+maxP99Increase)+1000})
	out = append(out, check{What: "no call fails", Figure: fmt.Sprintf("%d calls, %d errors (%s)", v.calls.Requests, v.calls.Errors, cluster.ErrorClasses(v.calls.ErrorsByClass, v.calls.FirstErrors)), Pass: v.calls.Errors == 0})
	out = append(out, check{What: "no session lifecycle fails", Figure: fmt.Sprintf("%d lifecycles, %d errors (%s)", v.churn.Requests, v.churn.Errors, cluster.ErrorClasses(v.churn.ErrorsByClass, v.churn.FirstErrors)), Pass: v.churn.Errors == 0})
	out = append(out, check{What: "fan-out never stalls (every subscriber hears a change every 2s)",
		Figure: fmt.Sprintf("%d subscribers, %d deliveries, %d stalls", v.subscribers, v.deliveries, v.stalls), Pass: v.stalls == 0})

	// Growth over the last two thirds: the mean of its first tenth against the mean of
	// its last tenth (single samples are noisy).
	from := v.start.Add(v.duration / 3)
	end := v.start.Add(v.duration)
	tenth := (end.Sub(from)) / 10
	names := map[string]bool{}
	for _, s := range v.samples {
		for n := range s.Usage {
			names[n] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		a, na := cluster.Mean(v.samples, name, from, from.Add(tenth))
		b, nb := cluster.Mean(v.samples, name, end.Add(-tenth), end.Add(time.Minute))
		if na == 0 || nb == 0 {
			continue
		}
		ok := flat(float64(a.RSS), float64(b.RSS), 2<<20) && flat(float64(a.FDs), float64(b.FDs), 2) &&
			(a.Goroutines < 0 || flat(float64(a.Goroutines), float64(b.Goroutines), 5))
		out = append(out, check{What: name + " flat over the last two thirds", Figure: a.String() + " → " + b.String(), Pass: ok})
	}
	return out
}

// flat reports whether after grew less than maxGrowth over before, or by no more than
// slack (small counts, such as a dozen descriptors, move by whole units).
func flat(before, after, slack float64) bool {
	return after <= before*(1+maxGrowth) || after-before <= slack
}

// report is the run's summary, checks and command line.
func (v *verdict) report(o *options) cluster.Report {
	return cluster.Report{
		Summary: fmt.Sprintf("capacity %.0f calls/s; calls offered at %.0f/s for %v; p50 %s p99 %s over the run", v.capacity, v.rate, v.duration,
			report.FormatUS(v.calls.Latency.P50), report.FormatUS(v.calls.Latency.P99)),
		Checks:  v.checks(),
		Command: fmt.Sprintf("go run ./bench/cmd/soak -duration %v -warmup %v -share %g -out bench/RESULTS.md", o.duration, o.warmup, o.share),
	}
}
