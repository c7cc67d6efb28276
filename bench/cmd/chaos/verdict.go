package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// subscriberBound is how soon after a fault clears every subscriber must hear of the
// resource's latest change.
const subscriberBound = 2 * time.Second

// minSuccess is the share of calls that must succeed for a backend that kept a live
// replica.
const minSuccess = 0.999

// verdict holds the run's figures and checks them.
type verdict struct {
	capacity, rate float64
	timeout        time.Duration
	tools          cluster.Tools
	rep            *report.Report
	faults         []played
	routerKills    int
	watchMoves     int64
	deliveries     int64
	before, after  map[string]cluster.Usage
	restarted      map[string]bool // by process name: a fault replaced it during the run
}

// check is one line of the table.
type check = cluster.Check

func (v *verdict) checks() cluster.Checks {
	rep := v.rep
	var out cluster.Checks
	protocol := rep.ErrorsByClass["protocol"]
	out = append(out, check{What: "every call answered exactly once",
		Figure: fmt.Sprintf("%d sends, %d answers (%d errors), %d protocol violations", rep.Generator.Sends, rep.Requests, rep.Errors, protocol),
		Pass:   rep.Requests == rep.Generator.Sends && protocol == 0})

	worst := rep.LatencyUncorrected.Max
	var failedMax float64
	for _, s := range rep.ByMethod {
		if s.ErrorLatency != nil {
			failedMax = max(failedMax, s.ErrorLatency.Max)
		}
	}
	bound := float64(v.timeout+time.Second) / 1e3
	out = append(out, check{What: "no call hangs past its timeout",
		Figure: fmt.Sprintf("slowest success %s, slowest failure %s (from its intended send), timeout %v, %d timed out",
			report.FormatUS(worst), report.FormatUS(failedMax), v.timeout, rep.ErrorsByClass["timeout"]),
		Pass: worst <= bound})

	for _, tool := range []string{v.tools.Web, v.tools.CLI} {
		s := rep.ByTool[tool]
		if s == nil {
			out = append(out, check{What: tool + " calls succeed ≥ 99.9%", Figure: "no calls", Pass: false})
			continue
		}
		ok := 1 - float64(s.Errors)/float64(max(s.Requests, 1))
		out = append(out, check{What: tool + " calls succeed ≥ 99.9%",
			Figure: fmt.Sprintf("%.3f%% of %d (%s)", 100*ok, s.Requests, cluster.ErrorClasses(s.ErrorsByClass, s.FirstErrors)), Pass: ok >= minSuccess})
	}

	moved := rep.Sessions.Moved + v.watchMoves
	out = append(out, check{What: "sessions carry on through another instance",
		Figure: fmt.Sprintf("%d router kills; %d session moves (%d load, %d subscribers), %d sessions opened again", v.routerKills, moved,
			rep.Sessions.Moved, v.watchMoves, rep.Sessions.Reconnects),
		Pass: rep.Sessions.Reconnects == 0 && (v.routerKills == 0 || moved > 0)})

	var worstLag time.Duration
	late, broken := 0, 0
	for _, f := range v.faults {
		worstLag = max(worstLag, f.lag)
		late += f.late
		if f.err != nil {
			broken++
		}
	}
	out = append(out, check{What: fmt.Sprintf("subscribers hear the latest change ≤ %v after each fault", subscriberBound),
		Figure: fmt.Sprintf("worst %v over %d faults, %d late, %d deliveries in all", worstLag.Round(time.Millisecond), len(v.faults), late, v.deliveries),
		Pass:   late == 0 && len(v.faults) > 0})
	out = append(out, check{What: "every fault cleared (restarts came back)", Figure: fmt.Sprintf("%d of %d", len(v.faults)-broken, len(v.faults)), Pass: broken == 0})

	for _, name := range slices.Sorted(maps.Keys(v.after)) {
		b, ok := v.before[name]
		if !ok {
			continue
		}
		a := v.after[name]
		what := name + " back to its level before the run"
		if v.restarted[name] {
			what = name + " (restarted) back to the level before the run"
		}
		out = append(out, check{What: what, Figure: "before " + b.String() + "; after " + a.String(), Pass: usageBack(b, a)})
	}
	return out
}

// usageBack reports whether a process's usage came back to its level before the run:
// descriptors and goroutines within 10% (and a few), resident memory within 25% and
// 32 MiB (a Go heap gives memory back to the system lazily).
func usageBack(b, a cluster.Usage) bool {
	near := func(before, after, slack int) bool { return after <= before+before/10+slack }
	return near(b.FDs, a.FDs, 8) && (b.Goroutines < 0 || a.Goroutines < 0 || near(b.Goroutines, a.Goroutines, 20)) &&
		a.RSS <= b.RSS+b.RSS/4+32<<20
}

// report is the run's summary, checks and command line.
func (v *verdict) report(o *options) cluster.Report {
	var b strings.Builder
	counts := map[string]int{}
	for _, f := range v.faults {
		counts[f.kind]++
	}
	fmt.Fprintf(&b, "capacity %.0f calls/s; offered %.0f/s; %d calls answered, %d failed; faults:", v.capacity, v.rate, v.rep.Requests, v.rep.Errors)
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, " %s ×%d,", k, counts[k])
	}
	return cluster.Report{Summary: strings.TrimSuffix(b.String(), ","), Checks: v.checks(),
		Command: fmt.Sprintf("go run ./bench/cmd/chaos -duration %v -every %v -share %g -seed %d -out bench/RESULTS.md", o.duration, o.every, o.share, o.seed)}
}
