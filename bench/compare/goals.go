package compare

import (
	"fmt"
	"math"
)

// Goal is one target of the issues, checked against the measurements.
type Goal struct {
	// Name says what is compared.
	Name string
	// AtLeast: Measured must be >= Limit (a ratio); otherwise Measured must be <= Limit
	// (a latency difference in µs, or a CPU percentage).
	AtLeast bool
	Limit   float64
	Unit    string // "x", "µs" or "%"
	// Measured is the median over rounds of the per-round values in PerRound.
	Measured float64
	PerRound []float64
	Met      bool
	// CPURatio is, for throughput goals, the same ratio computed from the server CPU per
	// call (the other side's µs per call divided by this side's): the throughput ratio
	// the two would show if each had the server CPUs to itself and the load generator
	// were never the bottleneck. 0 when not applicable or unknown.
	CPURatio float64
	// Note adds context (which peer was the fastest, the rate, ...).
	Note string
}

// Margin says by how much the goal was met or missed, in words.
func (g Goal) Margin() string {
	switch {
	case g.AtLeast && g.Limit > 0:
		f := g.Measured / g.Limit
		if g.Met {
			return fmt.Sprintf("met, %.2fx the goal", f)
		}
		return fmt.Sprintf("missed, %.0f%% of the goal (%.2fx short)", 100*f, g.Limit/math.Max(g.Measured, 1e-9))
	case !g.AtLeast:
		d := g.Limit - g.Measured
		if g.Met {
			return fmt.Sprintf("met, %s under the limit", formatGoalValue(d, g.Unit))
		}
		return fmt.Sprintf("missed by %s", formatGoalValue(-d, g.Unit))
	}
	return ""
}

func trimFloat(v float64) string {
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// Goal thresholds, from the issues "mcpload" and "Backend fleets".
const (
	goalBackendVsPeer  = 3.0   // mcpbackend alone vs the fastest peer server
	goalRouterVsMCPGo  = 1.0   // router + mcpbackend vs mcp-go alone
	goalRouterVsGoSDK  = 5.0   // router + mcpbackend vs the official Go SDK alone
	goalRouterVsDirect = 0.6   // router + mcpbackend vs mcpbackend alone
	goalOpenP99DeltaUS = 100.0 // open loop p99, router minus direct
	goalLoadVsRouter   = 2.0   // mcpload's ceiling vs the router's maximum
	goalLoadCPUPct     = 100.0 // ... using at most one core
)

// evaluate computes every goal whose targets were measured.
func evaluate(res *Result) []Goal {
	closed := map[string]*TargetResult{}
	for _, t := range res.Closed {
		if t.Measured() {
			closed[t.Name] = t
		}
	}
	rounds := res.Options.Rounds
	var goals []Goal

	// fastest returns, in round r, the best throughput of the targets of a family.
	fastest := func(r int, family string) (float64, string) {
		best, name := 0.0, ""
		for _, t := range res.Closed {
			if t.Family != family {
				continue
			}
			if run := t.inRound(r); run != nil && run.Report.ThroughputRPS > best {
				best, name = run.Report.ThroughputRPS, t.Name
			}
		}
		return best, name
	}
	fastestMedian := func(families ...string) string {
		best, name := 0.0, ""
		for _, t := range res.Closed {
			for _, f := range families {
				if t.Family == f && t.Measured() && t.Throughput() > best {
					best, name = t.Throughput(), t.Name
				}
			}
		}
		return name
	}
	// ratioGoal builds a throughput-ratio goal from per-round values.
	ratioGoal := func(name string, limit float64, note string, cpuRatio float64, perRound func(r int) (float64, bool)) {
		g := Goal{Name: name, AtLeast: true, Limit: limit, Unit: "x", Note: note, CPURatio: cpuRatio}
		for r := 1; r <= rounds; r++ {
			if v, ok := perRound(r); ok {
				g.PerRound = append(g.PerRound, v)
			}
		}
		if len(g.PerRound) == 0 {
			return
		}
		g.Measured = median(g.PerRound)
		g.Met = g.Measured >= limit
		goals = append(goals, g)
	}
	tput := func(t *TargetResult, r int) (float64, bool) {
		run := t.inRound(r)
		if run == nil || run.Report.ThroughputRPS <= 0 {
			return 0, false
		}
		return run.Report.ThroughputRPS, true
	}
	peerFamilyRatio := func(t *TargetResult, families ...string) func(int) (float64, bool) {
		return func(r int) (float64, bool) {
			v, ok := tput(t, r)
			if !ok {
				return 0, false
			}
			best := 0.0
			for _, f := range families {
				if b, _ := fastest(r, f); b > best {
					best = b
				}
			}
			if best == 0 {
				return 0, false
			}
			return v / best, true
		}
	}

	// cheapest is the lowest server CPU per call among a family's targets.
	cheapest := func(families ...string) float64 {
		best := 0.0
		for _, t := range res.Closed {
			for _, f := range families {
				if c := t.serverCPUPerCall(); t.Family == f && c > 0 && (best == 0 || c < best) {
					best = c
				}
			}
		}
		return best
	}
	cpuRatio := func(other, this float64) float64 {
		if other <= 0 || this <= 0 {
			return 0
		}
		return other / this
	}
	if d := closed[TargetDirect]; d != nil {
		ratioGoal("mcpbackend alone vs the fastest peer server alone (throughput)", goalBackendVsPeer,
			"fastest peer: "+fastestMedian(familyGoSDK, familyMCPGo), cpuRatio(cheapest(familyGoSDK, familyMCPGo), d.serverCPUPerCall()),
			peerFamilyRatio(d, familyGoSDK, familyMCPGo))
	}
	for _, rv := range []struct{ target, name string }{
		{TargetRouter, "mcprouter -> mcpbackend"},
		{TargetRouterPipelined, fmt.Sprintf("mcprouter -> mcpbackend, pipelined (pipeline: %d)", benchPipeline)},
	} {
		rt := closed[rv.target]
		if rt == nil {
			continue
		}
		ratioGoal(rv.name+" vs mcp-go alone (throughput)", goalRouterVsMCPGo,
			"against the faster mcp-go mode: "+fastestMedian(familyMCPGo), cpuRatio(cheapest(familyMCPGo), rt.serverCPUPerCall()),
			peerFamilyRatio(rt, familyMCPGo))
		ratioGoal(rv.name+" vs the official Go SDK alone (throughput)", goalRouterVsGoSDK,
			"against the faster Go SDK mode: "+fastestMedian(familyGoSDK), cpuRatio(cheapest(familyGoSDK), rt.serverCPUPerCall()),
			peerFamilyRatio(rt, familyGoSDK))
		if d := closed[TargetDirect]; d != nil {
			ratioGoal(fmt.Sprintf("%s vs mcpbackend alone, %d sessions (throughput)", rv.name, res.Options.Sessions),
				goalRouterVsDirect, "", cpuRatio(d.serverCPUPerCall(), rt.serverCPUPerCall()), func(r int) (float64, bool) {
					a, ok1 := tput(rt, r)
					b, ok2 := tput(d, r)
					if !ok1 || !ok2 {
						return 0, false
					}
					return a / b, true
				})
		}
	}
	if set := res.openSet(TargetDirect); set != nil && set.target(TargetDirect).Measured() && set.target(TargetRouter).Measured() {
		od, orr := set.target(TargetDirect), set.target(TargetRouter)
		g := Goal{Name: fmt.Sprintf("open loop at %.0f%% of the direct maximum: p99 through the router minus p99 direct", 100*res.Options.OpenLoadFraction),
			Limit: goalOpenP99DeltaUS, Unit: "µs", Note: fmt.Sprintf("%s/s offered, %d sessions", formatRate(set.Rate), res.Options.OpenSessions)}
		for r := 1; r <= rounds; r++ {
			a, b := orr.inRound(r), od.inRound(r)
			if a != nil && b != nil {
				g.PerRound = append(g.PerRound, a.Report.Latency.P99-b.Report.Latency.P99)
			}
		}
		if len(g.PerRound) > 0 {
			g.Measured = median(g.PerRound)
			g.Met = g.Measured <= g.Limit
			goals = append(goals, g)
		}
	}
	if st, rt := closed[TargetStub], closed[TargetRouter]; st != nil && rt != nil {
		stub := st.Runs[0].Report
		note := fmt.Sprintf("mcpload on the stub: %s/s; mcprouter's maximum (median): %s/s", formatRate(stub.ThroughputRPS), formatRate(rt.Throughput()))
		if c := stub.Generator.CPUPerOpUS; c > 0 {
			note += fmt.Sprintf("; mcpload's CPU per operation %.1f µs, i.e. %s/s on one core", c, formatRate(1e6/c))
		}
		goals = append(goals, Goal{Name: "mcpload's own ceiling (against mcpload stub) vs mcprouter's maximum rate",
			AtLeast: true, Limit: goalLoadVsRouter, Unit: "x", Measured: stub.ThroughputRPS / rt.Throughput(),
			PerRound: []float64{stub.ThroughputRPS / rt.Throughput()}, Met: stub.ThroughputRPS/rt.Throughput() >= goalLoadVsRouter, Note: note})
		cpuNote := "mcpload not pinned: this is its own average over the run"
		if res.LoadCPUs != "" {
			cpuNote = "mcpload pinned to CPU " + res.LoadCPUs + " with taskset, so it could not use more"
		}
		goals = append(goals, Goal{Name: "mcpload's CPU while doing so (100% = one core)", Limit: goalLoadCPUPct, Unit: "%",
			Measured: stub.Generator.CPUAvgPct, PerRound: []float64{stub.Generator.CPUAvgPct},
			Met: stub.Generator.CPUAvgPct <= goalLoadCPUPct, Note: cpuNote})
		if c := stub.Generator.CPUPerOpUS; c > 0 {
			// On a shared machine the stub run's rate is bounded by whatever else runs on
			// the generator's CPU; its CPU per call is not, so it also says what mcpload
			// sustains with one core to itself.
			v := 1e6 / c / rt.Throughput()
			goals = append(goals, Goal{Name: "mcpload's one-core ceiling from its CPU per call (1e6 / µs per call) vs mcprouter's maximum rate",
				AtLeast: true, Limit: goalLoadVsRouter, Unit: "x", Measured: v, PerRound: []float64{v}, Met: v >= goalLoadVsRouter,
				Note: "derived: what the stub run would reach if no other process took mcpload's CPU"})
		}
	}
	return goals
}

// openSet returns the open-loop set whose rate derives from basis, or nil.
func (r *Result) openSet(basis string) *OpenSet {
	for _, s := range r.Open {
		if s.Basis == basis {
			return s
		}
	}
	return nil
}
