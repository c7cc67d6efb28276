package loadgen

import (
	"fmt"
	"runtime"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/report"
	"github.com/mcprouter/mcprouter/loadgen/stats"
)

// contended is the run-queue wait (percent of wall time) above which the machine is
// reported as contended.
const contended = 5.0

// maxLatePct is the share of late open-loop sends above which a run is flagged.
const maxLatePct = 1.0

// group accumulates the totals of several operations.
type group struct {
	stats.OpTotals
	primary bool
	ops     []int // the recorder's operations added
}

func newGroup() *group {
	return &group{OpTotals: stats.OpTotals{Corrected: stats.NewHistogram(), Uncorrected: stats.NewHistogram(),
		FailedCorrected: stats.NewHistogram(), ByErr: map[stats.ErrKey]int64{}}}
}

func (g *group) add(op int, t *stats.OpTotals) {
	g.ops = append(g.ops, op)
	g.Add(t)
	g.primary = g.primary || t.Op.Primary
}

// byClass is the error counts by class name.
func (g *group) byClass() map[string]int64 {
	m := make(map[string]int64, len(g.ByErr))
	for k, v := range g.ByErr {
		m[k.String()] += v
	}
	return m
}

// stats summarises the group; slow is the slow threshold in nanoseconds (0: none).
func (g *group) stats(dur float64, slow int64, errs *firstErrors) *report.Stats {
	s := &report.Stats{Requests: g.Count, Errors: g.Errors, Pages: g.Pages, Primary: g.primary,
		Latency: report.Summarize(g.Corrected), LatencyUncorrected: report.Summarize(g.Uncorrected),
		Slow: report.CountSlow(g.Corrected, slow)}
	if dur > 0 {
		s.ThroughputRPS = round3(float64(g.Count) / dur)
	}
	if len(g.ByErr) > 0 {
		s.ErrorsByClass = g.byClass()
		s.FirstErrors = errs.of(g.ops)
	}
	if g.FailedCorrected.TotalCount() > 0 {
		l := report.Summarize(g.FailedCorrected)
		s.ErrorLatency = &l
	}
	if !g.primary {
		s.ThroughputRPS = 0 // set-up operations happen outside the window: a rate means nothing
	}
	return s
}

// buildReport assembles the report from the recorder and the monitor.
func (r *run) buildReport() *report.Report {
	totals, pacing := r.rec.Totals()
	cfg := &r.cfg
	mf := r.measureFrom.Load()
	end := min(r.end.Load(), r.stopAt.Load())
	dur := 0.0
	if mf != never && end > mf {
		dur = float64(end-mf) / 1e9
	}
	rep := &report.Report{
		Tool: "mcpload", FormatVersion: report.FormatVersion, Started: r.base.Format(time.RFC3339),
		Target: report.Target{URL: cfg.Target.URL, Command: cfg.Target.Command, Transport: r.dialer.Options().Transport,
			Protocol: r.info.Protocol, Server: r.info.Server},
		DurationS: round3(dur),
		ByMethod:  map[string]*report.Stats{},
		Series:    r.series,
	}
	if rep.Target.Transport == "stdio" {
		rep.Target.URL = ""
	} else {
		rep.Target.Command = nil
	}
	rep.Config = report.Config{Mode: string(cfg.Mode), Pacing: "closed", Sessions: cfg.Sessions, Rate: cfg.Rate,
		DurationS: cfg.Duration.Seconds(), WarmupS: cfg.Warmup.Seconds(), RampS: cfg.Ramp.Seconds(),
		TimeoutS: cfg.Timeout.Seconds(), Stream: cfg.Target.Stream, Scenario: cfg.Name}
	if cfg.Rate > 0 {
		rep.Config.Pacing = "open"
	}
	for _, o := range cfg.Mix {
		entry := fmt.Sprintf("%s ×%d", o.Call(), o.Weight)
		if o.Label != "" {
			entry = o.Label + ": " + entry
		}
		rep.Config.Mix = append(rep.Config.Mix, entry)
	}
	if cfg.Mode == Fanout {
		rep.Config.Rate = cfg.Fanout.Rate
		rep.Config.Pacing = "open"
		rep.Config.Mix = []string{"trigger " + cfg.Fanout.Trigger.Call()}
	}

	primary := newGroup()
	byMethod := map[string]*group{}
	byTool := map[string]*group{}
	for i := range totals {
		t := &totals[i]
		if t.Count == 0 && i != r.connectOp {
			continue
		}
		if t.Op.Primary {
			primary.add(i, t)
		}
		key := t.Op.Method
		if byMethod[key] == nil {
			byMethod[key] = newGroup()
		}
		byMethod[key].add(i, t)
		if k := t.Op.Entry; k != "" {
			if byTool[k] == nil {
				byTool[k] = newGroup()
			}
			byTool[k].add(i, t)
		}
	}
	rep.Requests, rep.Errors, rep.Excluded = primary.Count, primary.Errors, pacing.Excluded
	rep.ErrorsByClass = primary.byClass()
	rep.FirstErrors = r.errs.all()
	if rep.Requests > 0 {
		rep.ErrorRate = float64(rep.Errors) / float64(rep.Requests)
	}
	if dur > 0 {
		span := max(dur, float64(pacing.LastDone-mf)/1e9)
		rep.ThroughputRPS = round3(float64(rep.Requests) / span)
	}
	rep.Latency = report.Summarize(primary.Corrected)
	rep.LatencyUncorrected = report.Summarize(primary.Uncorrected)
	slow := int64(cfg.Slow)
	rep.Slow = report.CountSlow(primary.Corrected, slow)
	rep.Distribution = report.Curve(primary.Corrected, primary.Uncorrected)
	for k, g := range byMethod {
		if k == "connect" && g.Count == 0 {
			continue
		}
		rep.ByMethod[k] = g.stats(dur, slow, &r.errs)
	}
	if len(byTool) > 0 {
		rep.ByTool = map[string]*report.Stats{}
		for k, g := range byTool {
			rep.ByTool[k] = g.stats(dur, slow, &r.errs)
		}
	}

	rep.Sessions = report.SessionStats{Target: cfg.Sessions, Opened: r.opened.Load(), Failed: r.failed.Load(),
		Reconnects: r.reconnects.Load(), Moved: r.moved.Load(), Streams: r.streams.Load(), FirstError: r.firstErr}
	if r.connectOp >= 0 {
		rep.Sessions.Connect = report.Summarize(totals[r.connectOp].Corrected)
	}
	if r.fan != nil {
		rep.Fanout = r.fan.summary(totals[r.deliveryOp])
		rep.Sessions.Target++ // the publisher
	}
	rep.Generator = r.generator(rep, pacing, primary.Dropped)
	return rep
}

// generator is the self-check: was the schedule kept, was the generator's CPU
// saturated, is anything else off that makes the figures doubtful?
func (r *run) generator(rep *report.Report, p stats.Pacing, dropped int64) report.Generator {
	fan := rep.Fanout
	cfg := &r.cfg
	g := report.Generator{Pacing: "closed", GOMAXPROCS: runtime.GOMAXPROCS(0),
		CPUAvailablePct:  float64(min(runtime.GOMAXPROCS(0), runtime.NumCPU())) * 100,
		SaturatedSeconds: r.saturatedSeconds, CPUMaxPct: round3(r.cpuMax)}
	if r.cpuSeconds > 0 {
		g.CPUAvgPct = round3(r.cpuSum / float64(r.cpuSeconds))
		g.RunqueueWaitPct = round3(r.waitSum / float64(r.cpuSeconds))
	}
	if ops := rep.Requests + rep.Excluded; ops > 0 && r.cpuEnd > r.cpuStart {
		g.CPUPerOpUS = round3(float64(r.cpuEnd-r.cpuStart) / 1e3 / float64(ops))
	}
	rate := cfg.Rate
	if cfg.Mode == Fanout {
		rate = cfg.Fanout.Rate
	}
	if rate > 0 {
		g.Pacing = "open"
		g.IntendedRate = rate
		g.LateThresholdUS = float64(cfg.LateThreshold) / 1e3
		g.Sends, g.LateSends, g.StarvedSends = p.Sends, p.Late, p.Starved
		if p.Sends > 0 {
			g.LatePct = round3(100 * float64(p.Late) / float64(p.Sends))
		}
	}
	g.CPUSaturated = r.saturatedSeconds > 0 && r.saturatedSeconds*5 >= r.cpuSeconds ||
		r.cpuSeconds > 0 && g.CPUAvgPct+g.RunqueueWaitPct >= saturation*g.CPUAvailablePct
	var warn []string
	if g.LatePct > maxLatePct {
		if p.Starved*2 >= p.Late {
			warn = append(warn, fmt.Sprintf("%.2f%% of sends started more than %s late, most because every session was busy: "+
				"the target did not keep up with %g/s over %d sessions (corrected latencies include the wait; "+
				"add sessions to offer the full rate)", g.LatePct, cfg.LateThreshold, rate, cfg.Sessions))
		} else {
			why := "lower the rate or give it more CPU"
			if g.RunqueueWaitPct >= contended {
				why = fmt.Sprintf("its threads waited for a CPU %.0f%% of the time: other processes compete for the CPUs", g.RunqueueWaitPct)
			}
			warn = append(warn, fmt.Sprintf("%.2f%% of sends started more than %s late although a session was free: "+
				"the generator could not keep its own schedule (%s)", g.LatePct, cfg.LateThreshold, why))
		}
	}
	if g.CPUSaturated {
		who := "its own work"
		if g.RunqueueWaitPct >= contended {
			who = fmt.Sprintf("its own work (%.0f%%) and other processes (it waited for a CPU %.0f%% of the time)", g.CPUAvgPct, g.RunqueueWaitPct)
		}
		warn = append(warn, fmt.Sprintf("the generator was CPU-bound in %d of %d seconds (%s filled %.0f%% of %.0f%%): "+
			"latencies include its own queueing", r.saturatedSeconds, r.cpuSeconds, who, 100*saturation, g.CPUAvailablePct))
	}
	if dropped > 0 {
		warn = append(warn, fmt.Sprintf("%d latencies exceeded the histogram range and were clamped", dropped))
	}
	if fan != nil {
		if fan.Missing > 0 {
			warn = append(warn, fmt.Sprintf("%d of %d expected deliveries did not arrive", fan.Missing, fan.Expected))
		}
	}
	if cfg.Target.Stream && r.streams.Load() < r.opened.Load() {
		warn = append(warn, fmt.Sprintf("GET streams were requested but only %d of %d sessions got one (the server answered 405)",
			r.streams.Load(), r.opened.Load()))
	}
	if r.failed.Load() > 0 {
		warn = append(warn, fmt.Sprintf("%d sessions failed to open: %s", r.failed.Load(), r.firstErr))
	}
	g.Warnings = warn
	g.Trustworthy = g.LatePct <= maxLatePct && !g.CPUSaturated && dropped == 0
	return g
}
