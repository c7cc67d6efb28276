package main

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// Bounds of "flat" (the command's doc comment says why each figure).
const (
	maxGrowth      = 0.02 // heap (else resident memory), descriptors, goroutines over the last two thirds
	maxRSSGrowth   = 0.10 // resident memory over the last two thirds, where the heap is judged
	maxRateDrift   = 0.05 // throughput, last window against the first
	maxCPUIncrease = 0.25 // router CPU per call beside the backend's, last window against the first
	maxP99Increase = 0.5  // p99, last window against the first, beyond the reference's rise
	minStarved     = 2.0  // routers' run-queue wait, last window against the first: starved
	minWindow      = 30 * time.Second
)

type verdict struct {
	capacity, rate float64
	duration       time.Duration
	start          time.Time
	routers        []string
	backend        string // the HTTP backend replica, the reference for CPU per call
	calls, churn   *report.Report
	probe          *report.Report // the direct calls, the latency reference
	samples        []cluster.Sample
	deliveries     int64
	subscribers    int
	stalls         int
}

// check is one line of the table.
type check = cluster.Check

// window is the length compared at both ends: a sixth of the run (5 of 30 minutes),
// at least minWindow and at most half the run.
func (v *verdict) window() time.Duration {
	return min(max(v.duration/6, minWindow), v.duration/2)
}

// ends are a series' figures over the first and the last window.
type ends struct{ rate0, rate1, p990, p991 float64 }

// endsOf returns the mean throughput and the median of the per-second p99s of the
// first and the last window of series s. The median, not the mean: one second stalled
// by a neighbour (or a collection) weighs as one second, not as its latency.
func (v *verdict) endsOf(s []report.Second) ends {
	n := max(1, int(v.window()/time.Second))
	if len(s) < 2*n {
		n = max(1, len(s)/2)
	}
	if len(s) == 0 {
		return ends{}
	}
	figures := func(pts []report.Second) (rate, p99 float64) {
		var p99s []float64
		for _, p := range pts {
			rate += p.RPS
			if p.Done > p.Errors {
				p99s = append(p99s, p.P99)
			}
		}
		return rate / float64(len(pts)), median(p99s)
	}
	var e ends
	e.rate0, e.p990 = figures(s[:n])
	e.rate1, e.p991 = figures(s[len(s)-n:])
	return e
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// cost is what a set of processes spent over a window: CPU time per call served (µs),
// and the time their threads waited, runnable, for a CPU per second of the window (ms).
type cost struct{ cpuPerCall, waitPerSec float64 }

// costOf is the cost of the processes names between from and to, calls served at rate.
func (v *verdict) costOf(names []string, from, to time.Time, rate float64) cost {
	var cpu, wait, span time.Duration
	for _, name := range names {
		c, w, s := cluster.Delta(v.samples, name, from, to)
		cpu, wait, span = cpu+c, wait+w, max(span, s)
	}
	if span <= 0 || rate <= 0 {
		return cost{}
	}
	return cost{cpuPerCall: float64(cpu.Microseconds()) / (rate * span.Seconds()), waitPerSec: float64(wait.Milliseconds()) / span.Seconds()}
}

func (v *verdict) checks() cluster.Checks {
	var out cluster.Checks
	e, ref := v.endsOf(v.calls.Series), v.endsOf(v.probe.Series)
	w := v.window().Round(time.Second)
	end := v.start.Add(v.duration)
	r0, r1 := v.costOf(v.routers, v.start, v.start.Add(w), e.rate0), v.costOf(v.routers, end.Add(-w), end, e.rate1)
	b0, b1 := v.costOf([]string{v.backend}, v.start, v.start.Add(w), e.rate0), v.costOf([]string{v.backend}, end.Add(-w), end, e.rate1)
	// The backend's CPU per call is the reference: on a busy machine every process
	// handles more messages per wakeup and spends less per call (the routers' fell by a
	// third in a run whose neighbours took over at the end), on a quiet one more.
	ratio0, ratio1 := r0.cpuPerCall/max(b0.cpuPerCall, 1e-9), r1.cpuPerCall/max(b1.cpuPerCall, 1e-9)
	cheap := r0.cpuPerCall > 0 && b0.cpuPerCall > 0 && r1.cpuPerCall > 0 && b1.cpuPerCall > 0 && ratio1 <= ratio0*(1+maxCPUIncrease)
	// When the neighbours take the CPU the routers need, an open-loop load queues
	// without bound (the direct calls, a few a second, do not): throughput falls behind
	// and p99 soars. A fall or a rise while the routers' threads waited for a CPU
	// minStarved times as long as in the first window, each call costing them no more,
	// is the machine's; the rows show the wait.
	starved := cheap && r1.waitPerSec >= minStarved*max(r0.waitPerSec, 1)
	waited := fmt.Sprintf("routers waited for a CPU %.0f → %.0f ms/s", r0.waitPerSec, r1.waitPerSec)
	out = append(out, check{What: fmt.Sprintf("throughput flat, unless the routers starved (first %v vs last %v)", w, w),
		Figure: fmt.Sprintf("%.0f/s → %.0f/s (%+.1f%%); %s", e.rate0, e.rate1, pct(e.rate0, e.rate1), waited),
		Pass:   e.rate0 > 0 && ((e.rate1-e.rate0)/e.rate0 >= -maxRateDrift || starved)})
	out = append(out, check{What: fmt.Sprintf("router CPU per call flat beside the backend's (first %v vs last %v)", w, w),
		Figure: fmt.Sprintf("%.0fµs → %.0fµs; %s %.0fµs → %.0fµs; ratio %.2f → %.2f (%+.0f%%)", r0.cpuPerCall, r1.cpuPerCall, v.backend,
			b0.cpuPerCall, b1.cpuPerCall, ratio0, ratio1, pct(ratio0, ratio1)), Pass: cheap})
	// The routers' p99 may rise by what the direct calls' rose (the machine), and
	// maxP99Increase more; 1ms of slack for sub-millisecond figures.
	allowed := 1 + maxP99Increase
	if ref.p990 > 0 && ref.p991 > ref.p990 {
		allowed *= ref.p991 / ref.p990
	}
	flatP99 := e.p990 > 0 && e.p991 <= e.p990*allowed+1000
	out = append(out, check{What: fmt.Sprintf("p99 flat beside direct calls, unless the routers starved (median second, first %v vs last %v)", w, w),
		Figure: fmt.Sprintf("%s → %s (%+.0f%%); direct %s → %s (%+.0f%%); %s", report.FormatUS(e.p990), report.FormatUS(e.p991), pct(e.p990, e.p991),
			report.FormatUS(ref.p990), report.FormatUS(ref.p991), pct(ref.p990, ref.p991), waited),
		Pass: flatP99 || starved})
	out = append(out, check{What: "no call fails", Figure: fmt.Sprintf("%d calls, %d errors (%s)", v.calls.Requests, v.calls.Errors, cluster.ErrorClasses(v.calls.ErrorsByClass, v.calls.FirstErrors)), Pass: v.calls.Errors == 0})
	out = append(out, check{What: "no session lifecycle fails", Figure: fmt.Sprintf("%d lifecycles, %d errors (%s)", v.churn.Requests, v.churn.Errors, cluster.ErrorClasses(v.churn.ErrorsByClass, v.churn.FirstErrors)), Pass: v.churn.Errors == 0})
	out = append(out, check{What: "fan-out never stalls (every subscriber hears a change every 2s)",
		Figure: fmt.Sprintf("%d subscribers, %d deliveries, %d stalls", v.subscribers, v.deliveries, v.stalls), Pass: v.stalls == 0})

	// Growth over the last two thirds: the level of its first tenth against the level
	// of its last tenth (single samples are noisy; cluster.Level).
	from := v.start.Add(v.duration / 3)
	tenth := (end.Sub(from)) / 10
	names := map[string]bool{}
	for _, s := range v.samples {
		for n := range s.Usage {
			names[n] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		a, na := cluster.Level(v.samples, name, from, from.Add(tenth))
		b, nb := cluster.Level(v.samples, name, end.Add(-tenth), end.Add(time.Second))
		if na == 0 || nb == 0 {
			continue
		}
		ok := memoryFlat(a, b) && flat(float64(a.FDs), float64(b.FDs), 2) &&
			(a.Goroutines < 0 || flat(float64(a.Goroutines), float64(b.Goroutines), 5))
		out = append(out, check{What: name + " flat over the last two thirds", Figure: a.String() + " → " + b.String(), Pass: ok})
	}
	return out
}

// pct is the change from a to b in percent.
func pct(a, b float64) float64 { return 100 * (b - a) / max(a, 1e-9) }

// flat reports whether after grew less than maxGrowth over before, or by no more than
// slack (small counts, such as a dozen descriptors, move by whole units).
func flat(before, after, slack float64) bool { return within(before, after, maxGrowth, slack) }

// within reports whether after grew less than the fraction growth over before, or by
// no more than slack.
func within(before, after, growth, slack float64) bool {
	return after <= before*(1+growth) || after-before <= slack
}

// memoryFlat judges a process's memory between two levels. Where the process
// reports its Go heap (the routers), a leak shows in the heap's floor, held to
// maxGrowth or 2 MiB, whichever is more (the floor moves by half a MiB with nothing
// leaking; 2 MiB over the last two thirds of the test command's 2-minute run is about
// 6 bytes for each of its ~320,000 calls); resident memory follows the heap's peaks
// and the runtime's lazy return of pages (a CI run measured 44.7 -> 47.5 MiB with the
// rest flat), so it gets the wider maxRSSGrowth, which still catches memory outside the
// heap that keeps growing.
// Without a heap figure, resident memory is all there is and gets maxGrowth.
func memoryFlat(a, b cluster.Usage) bool {
	if a.Heap < 0 || b.Heap < 0 {
		return flat(float64(a.RSS), float64(b.RSS), 2<<20)
	}
	return flat(float64(a.Heap), float64(b.Heap), 2<<20) &&
		within(float64(a.RSS), float64(b.RSS), maxRSSGrowth, 4<<20)
}

// report is the run's summary, checks and command line.
func (v *verdict) report(o *options) cluster.Report {
	return cluster.Report{
		Summary: fmt.Sprintf("capacity %.0f calls/s; calls offered at %.0f/s for %v; p50 %s p99 %s over the run; direct calls (the reference) at %g/s: p99 %s",
			v.capacity, v.rate, v.duration, report.FormatUS(v.calls.Latency.P50), report.FormatUS(v.calls.Latency.P99), o.probeRate, report.FormatUS(v.probe.Latency.P99)),
		Checks:  v.checks(),
		Command: fmt.Sprintf("go run ./bench/cmd/soak -duration %v -warmup %v -tick %v -share %g -out bench/RESULTS.md", o.duration, o.warmup, o.tick, o.share),
	}
}
