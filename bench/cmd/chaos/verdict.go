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
// replica, beside the calls its faults may fail (failBudget).
const minSuccess = 0.999

// failBudget is how many of a backend's calls may fail, beside minSuccess: at most one
// call per load session for each fault on one of its replicas. A replica that is paused,
// killed or cut off takes down the calls in flight on it, which the router can only
// answer with an error (a tools/call is not safe to send twice); their number follows
// the load's concurrency, not its rate, so a share alone would fail a slower machine on
// a run that happened to draw more of these faults. A router that kept sending to the
// broken replica would fail thousands of calls per fault, far past this budget.
func (v *verdict) failBudget(backend string, requests int64) int64 {
	n := int64(0)
	for _, f := range v.faults {
		if f.hits == backend {
			n++
		}
	}
	return int64(float64(requests)*(1-minSuccess)) + n*int64(v.sessions)
}

// verdict holds the run's figures and checks them.
type verdict struct {
	capacity, rate float64
	timeout        time.Duration
	tools          cluster.Tools
	sessions       int // load sessions: each may lose its call in flight to a fault
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

	for _, b := range []struct{ tool, backend string }{{v.tools.Web, "web"}, {v.tools.CLI, "cli"}} {
		what := fmt.Sprintf("%s calls succeed ≥ %.1f%%, beside ≤ %d per fault on a %s replica", b.tool, 100*minSuccess, v.sessions, b.backend)
		s := rep.ByTool[b.tool]
		if s == nil {
			out = append(out, check{What: what, Figure: "no calls", Pass: false})
			continue
		}
		budget := v.failBudget(b.backend, s.Requests)
		ok := 1 - float64(s.Errors)/float64(max(s.Requests, 1))
		out = append(out, check{What: what,
			Figure: fmt.Sprintf("%.3f%% of %d, %d failed of %d allowed (%s)", 100*ok, s.Requests, s.Errors, budget, cluster.ErrorClasses(s.ErrorsByClass, s.FirstErrors)),
			Pass:   s.Errors <= budget})
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
