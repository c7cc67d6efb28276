package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"
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
	// Met is true only when the measured value is within the limit, from at least one
	// per-round value, and the goal has no Problems.
	Met bool
	// Problems say why the runs behind the goal cannot back it (failed calls, nothing
	// measured, no CPU sample); any problem makes the goal missed whatever its value.
	Problems []string
	// CPURatio is, for throughput goals, the same ratio computed from the server CPU per
	// call (the other side's µs per call divided by this side's): the throughput ratio
	// the two would show if each had the server CPUs to itself and the load generator
	// were never the bottleneck. 0 when not applicable or unknown.
	CPURatio float64
	// Note adds context (which peer was the fastest, the rate, ...).
	Note string
}

// judge sets Met: the value within the limit, from at least one per-round value, and no
// problem with the runs behind it.
func (g *Goal) judge() {
	if len(g.PerRound) == 0 && len(g.Problems) == 0 {
		g.Problems = append(g.Problems, "no sample")
	}
	within := g.Measured <= g.Limit
	if g.AtLeast {
		within = g.Measured >= g.Limit
	}
	g.Met = within && len(g.Problems) == 0
}

// maxProblemsShown bounds the problems Margin lists.
const maxProblemsShown = 3

// Margin says by how much the goal was met or missed, in words.
func (g Goal) Margin() string {
	if len(g.Problems) > 0 {
		shown := g.Problems[:min(len(g.Problems), maxProblemsShown)]
		more := ""
		if n := len(g.Problems) - len(shown); n > 0 {
			more = fmt.Sprintf(" (and %d more)", n)
		}
		return "missed: " + strings.Join(shown, "; ") + more
	}
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
	// Issue 15 (performance at the floor): against haproxy, and the stdio bridges.
	goalRouterVsHAProxy    = 1.0   // router calls/s vs haproxy's, same backend
	goalRouterCPUVsHAProxy = 1.0   // router process CPU per call vs haproxy's
	goalOpenP99VsHAProxyUS = 100.0 // open loop: router's p99 minus haproxy's
	goalStdioVsBridge      = 5.0   // router over stdio vs the faster bridge, calls/s
	goalStdioCPUVsBridge   = 0.1   // ... CPU per call (with the children) vs the cheaper
)

// evaluate computes every goal whose targets were run. Throughputs count successful
// calls only, and a goal is met only when every run behind it measured successful calls
// and none failed (see Goal.judge): a target that fails fast cannot meet a goal.
func evaluate(res *Result) []Goal {
	closed := map[string]*TargetResult{}
	for _, t := range res.Closed {
		if len(t.Runs) > 0 {
			closed[t.Name] = t
		}
	}
	rounds := res.Options.Rounds
	var goals []Goal

	// family lists the targets of the families that were run.
	family := func(families ...string) []*TargetResult {
		var out []*TargetResult
		for _, t := range res.Closed {
			if slices.Contains(families, t.Family) && len(t.Runs) > 0 {
				out = append(out, t)
			}
		}
		return out
	}
	// fastest returns, in round r, the best throughput among ts.
	fastest := func(r int, ts []*TargetResult) float64 {
		best := 0.0
		for _, t := range ts {
			if run := t.inRound(r); run != nil {
				best = max(best, run.CallsPerSecond())
			}
		}
		return best
	}
	fastestMedian := func(ts []*TargetResult) string {
		best, name := 0.0, ""
		for _, t := range ts {
			if t.Measured() && t.Throughput() > best {
				best, name = t.Throughput(), t.Name
			}
		}
		return name
	}
	// ratioGoal builds a throughput-ratio goal from per-round values; the runs of every
	// target in from must back it.
	ratioGoal := func(name string, limit float64, note string, cpuRatio float64, from []*TargetResult, perRound func(r int) (float64, bool)) {
		g := Goal{Name: name, AtLeast: true, Limit: limit, Unit: "x", Note: note, CPURatio: cpuRatio}
		for r := 1; r <= rounds; r++ {
			if v, ok := perRound(r); ok {
				g.PerRound = append(g.PerRound, v)
			}
		}
		g.Measured = median(g.PerRound)
		for _, t := range from {
			g.Problems = append(g.Problems, t.problems()...)
		}
		g.judge()
		goals = append(goals, g)
	}
	tput := func(t *TargetResult, r int) (float64, bool) {
		run := t.inRound(r)
		if run == nil || run.CallsPerSecond() <= 0 {
			return 0, false
		}
		return run.CallsPerSecond(), true
	}
	peerRatio := func(t *TargetResult, peers []*TargetResult) func(int) (float64, bool) {
		return func(r int) (float64, bool) {
			v, ok := tput(t, r)
			best := fastest(r, peers)
			if !ok || best == 0 {
				return 0, false
			}
			return v / best, true
		}
	}

	// cheapest is the lowest server CPU per call among ts.
	cheapest := func(ts []*TargetResult) float64 {
		best := 0.0
		for _, t := range ts {
			if c := t.serverCPUPerCall(); c > 0 && (best == 0 || c < best) {
				best = c
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
	goSDK, mcpGo, peers := family(familyGoSDK), family(familyMCPGo), family(familyGoSDK, familyMCPGo)
	if d := closed[TargetDirect]; d != nil && len(peers) > 0 {
		ratioGoal("mcpbackend alone vs the fastest peer server alone (throughput)", goalBackendVsPeer,
			"fastest peer: "+fastestMedian(peers), cpuRatio(cheapest(peers), d.serverCPUPerCall()),
			append([]*TargetResult{d}, peers...), peerRatio(d, peers))
	}
	for _, rv := range []struct{ target, name string }{
		{TargetRouter, "mcprouter -> mcpbackend"},
		{TargetRouterPipelined, fmt.Sprintf("mcprouter -> mcpbackend, pipelined (pipeline: %d)", benchPipeline)},
	} {
		rt := closed[rv.target]
		if rt == nil {
			continue
		}
		if len(mcpGo) > 0 {
			ratioGoal(rv.name+" vs mcp-go alone (throughput)", goalRouterVsMCPGo,
				"against the faster mcp-go mode: "+fastestMedian(mcpGo), cpuRatio(cheapest(mcpGo), rt.serverCPUPerCall()),
				append([]*TargetResult{rt}, mcpGo...), peerRatio(rt, mcpGo))
		}
		if len(goSDK) > 0 {
			ratioGoal(rv.name+" vs the official Go SDK alone (throughput)", goalRouterVsGoSDK,
				"against the faster Go SDK mode: "+fastestMedian(goSDK), cpuRatio(cheapest(goSDK), rt.serverCPUPerCall()),
				append([]*TargetResult{rt}, goSDK...), peerRatio(rt, goSDK))
		}
		if d := closed[TargetDirect]; d != nil {
			ratioGoal(fmt.Sprintf("%s vs mcpbackend alone, %d sessions (throughput)", rv.name, res.Options.Sessions),
				goalRouterVsDirect, "", cpuRatio(d.serverCPUPerCall(), rt.serverCPUPerCall()), []*TargetResult{rt, d},
				peerRatio(rt, []*TargetResult{d}))
		}
	}
	if rt, ha := closed[TargetRouter], closed[TargetHAProxy]; rt != nil && ha != nil {
		ratioGoal("mcprouter -> mcpbackend vs haproxy -> mcpbackend (throughput)", goalRouterVsHAProxy, "",
			cpuRatio(ha.serverCPUPerCall(), rt.serverCPUPerCall()), []*TargetResult{rt, ha}, peerRatio(rt, []*TargetResult{ha}))
		goals = append(goals, cpuRatioGoal("mcprouter's CPU per forwarded call vs haproxy's (the proxy process alone)",
			goalRouterCPUVsHAProxy, rounds, rt, []*TargetResult{ha}))
	}
	if fr, ha := closed[TargetFastRelay], closed[TargetHAProxy]; fr != nil && ha != nil {
		goals = append(goals, cpuRatioGoal("reference, the floor on fasthttp: the bare relay's CPU per forwarded call vs haproxy's",
			goalRouterCPUVsHAProxy, rounds, fr, []*TargetResult{ha}))
	}
	if rs, bridges := closed[TargetRouterStdio], family(familyBridge); rs != nil && len(bridges) > 0 {
		ratioGoal("mcprouter -> mcpbackend stdio vs the faster stdio bridge (throughput)", goalStdioVsBridge,
			"fastest bridge: "+fastestMedian(bridges), cpuRatio(cheapest(bridges), rs.serverCPUPerCall()),
			append([]*TargetResult{rs}, bridges...), peerRatio(rs, bridges))
		goals = append(goals, cpuRatioGoal("mcprouter -> mcpbackend stdio: CPU per call (with the child) vs the cheaper stdio bridge's (with its children)",
			goalStdioCPUVsBridge, rounds, rs, bridges))
	}
	if set := res.openSet(TargetDirect); set != nil {
		goals = append(goals, openP99Goal(res, set)...)
	}
	if set := res.openSet(TargetRouter); set != nil {
		goals = append(goals, openP99VsHAProxyGoal(res, set)...)
		name := fmt.Sprintf("reference, the floor on fasthttp: open loop at %.0f%% of the router's maximum, p99 the bare relay adds minus the p99 haproxy adds", 100*res.Options.OpenLoadFraction)
		goals = append(goals, p99DeltaGoal(res, set, TargetFastRelay, TargetHAProxy, name, goalOpenP99VsHAProxyUS)...)
	}
	if st, rt := closed[TargetStub], closed[TargetRouter]; st != nil && rt != nil {
		goals = append(goals, loadGoals(res, st, rt)...)
	}
	return goals
}

// cpuPerOp is the CPU microseconds per operation of the run's first server (the proxy
// under test); NaN when unknown.
func cpuPerOp(run *LoadRun) float64 {
	if run == nil || len(run.ServerCPU) == 0 || run.Ops == 0 || run.ServerCPU[0] <= 0 {
		return math.NaN()
	}
	return float64(run.ServerCPU[0].Microseconds()) / float64(run.Ops)
}

// cpuRatioGoal compares, round by round, the CPU per call of t's first server with the
// lowest among others' first servers: at most limit.
func cpuRatioGoal(name string, limit float64, rounds int, t *TargetResult, others []*TargetResult) Goal {
	g := Goal{Name: name, Limit: limit, Unit: "x"}
	for r := 1; r <= rounds; r++ {
		this := cpuPerOp(t.inRound(r))
		best := math.NaN()
		for _, o := range others {
			if v := cpuPerOp(o.inRound(r)); !math.IsNaN(v) && (math.IsNaN(best) || v < best) {
				best = v
			}
		}
		if !math.IsNaN(this) && !math.IsNaN(best) {
			g.PerRound = append(g.PerRound, this/best)
		}
	}
	g.Measured = median(g.PerRound)
	g.Problems = t.problems()
	for _, o := range others {
		g.Problems = append(g.Problems, o.problems()...)
	}
	g.judge()
	return g
}

// openP99VsHAProxyGoal: at the same fraction of the router's own maximum, the p99 the
// router adds over direct minus the p99 haproxy adds over direct, that is the router's
// p99 minus haproxy's, round by round.
func openP99VsHAProxyGoal(res *Result, set *OpenSet) []Goal {
	name := fmt.Sprintf("open loop at %.0f%% of the router's maximum: p99 the router adds over direct minus the p99 haproxy adds", 100*res.Options.OpenLoadFraction)
	return p99DeltaGoal(res, set, TargetRouter, TargetHAProxy, name, goalOpenP99VsHAProxyUS)
}

// openP99Goal is the open-loop tail goal: p99 through the router minus p99 direct, round
// by round.
func openP99Goal(res *Result, set *OpenSet) []Goal {
	name := fmt.Sprintf("open loop at %.0f%% of the direct maximum: p99 through the router minus p99 direct", 100*res.Options.OpenLoadFraction)
	return p99DeltaGoal(res, set, TargetRouter, TargetDirect, name, goalOpenP99DeltaUS)
}

// p99DeltaGoal is an open-loop goal on p99 of over minus p99 of base, round by round,
// against limit (µs); none when either side was not run.
func p99DeltaGoal(res *Result, set *OpenSet, over, base, name string, limit float64) []Goal {
	o, b := set.target(over), set.target(base)
	if o == nil || b == nil || len(o.Runs) == 0 || len(b.Runs) == 0 {
		return nil
	}
	g := Goal{Name: name, Limit: limit, Unit: "µs",
		Note: fmt.Sprintf("%s/s offered, %d sessions", formatRate(set.Rate), res.Options.OpenSessions)}
	for r := 1; r <= res.Options.Rounds; r++ {
		x, y := o.inRound(r), b.inRound(r)
		if x != nil && y != nil && x.sampled() && y.sampled() {
			g.PerRound = append(g.PerRound, x.Report.Latency.P99-y.Report.Latency.P99)
		}
	}
	g.Measured = median(g.PerRound)
	g.Problems = append(o.problems(), b.problems()...)
	g.judge()
	return []Goal{g}
}

// loadGoals are mcpload's own goals, from its run against the stub: its rate against the
// router's maximum, the CPU it used doing so, and the one-core ceiling its CPU per call
// implies. The CPU goal needs a real CPU sample: mcpload reports 0% when it took none.
func loadGoals(res *Result, st, rt *TargetResult) []Goal {
	run := &st.Runs[0]
	stub := run.Report
	base := append(st.problems(), rt.problems()...)
	routerMax := rt.Throughput()
	ratio := func(v float64) []float64 {
		if v <= 0 || routerMax <= 0 {
			return nil
		}
		return []float64{v / routerMax}
	}
	note := fmt.Sprintf("mcpload on the stub: %s/s; mcprouter's maximum (median): %s/s", formatRate(run.CallsPerSecond()), formatRate(routerMax))
	if c := stub.Generator.CPUPerOpUS; c > 0 {
		note += fmt.Sprintf("; mcpload's CPU per operation %.1f µs, i.e. %s/s on one core", c, formatRate(1e6/c))
	}
	ceiling := Goal{Name: "mcpload's own ceiling (against mcpload stub) vs mcprouter's maximum rate",
		AtLeast: true, Limit: goalLoadVsRouter, Unit: "x", PerRound: ratio(run.CallsPerSecond()), Note: note}

	cpuNote := "mcpload not pinned: this is its own average over the run"
	if res.LoadCPUs != "" {
		cpuNote = "mcpload pinned to CPU " + res.LoadCPUs + " with taskset, so it could not use more"
	}
	cpu := Goal{Name: "mcpload's CPU while doing so (100% = one core)", Limit: goalLoadCPUPct, Unit: "%", Note: cpuNote}
	if stub.Generator.CPUAvgPct > 0 {
		cpu.PerRound = []float64{stub.Generator.CPUAvgPct}
	} else {
		cpu.Problems = append(cpu.Problems, "no CPU sample")
	}
	goals := []Goal{ceiling, cpu}
	if c := stub.Generator.CPUPerOpUS; c > 0 {
		// On a shared machine the stub run's rate is bounded by whatever else runs on
		// the generator's CPU; its CPU per call is not, so it also says what mcpload
		// sustains with one core to itself.
		goals = append(goals, Goal{Name: "mcpload's one-core ceiling from its CPU per call (1e6 / µs per call) vs mcprouter's maximum rate",
			AtLeast: true, Limit: goalLoadVsRouter, Unit: "x", PerRound: ratio(1e6 / c),
			Note: "derived: what the stub run would reach if no other process took mcpload's CPU"})
	}
	for i := range goals {
		goals[i].Measured = median(goals[i].PerRound)
		goals[i].Problems = append(slices.Clone(base), goals[i].Problems...)
		goals[i].judge()
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
