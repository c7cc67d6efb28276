package compare

import (
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/loadgen/report"
)

// goalsByName evaluates res's goals again (after a test changed its runs) and indexes
// them by name.
func goalsByName(res *Result) map[string]Goal {
	res.Goals = evaluate(res)
	got := map[string]Goal{}
	for _, g := range res.Goals {
		got[g.Name] = g
	}
	return got
}

// goalWant is what a test expects of the goal named name.
type goalWant struct {
	name     string
	measured float64
	met      bool
}

// checkGoals checks that goals (by name, as goalsByName gives them) hold each of want,
// the figure to within 1e-9.
func checkGoals(t *testing.T, goals map[string]Goal, want []goalWant) {
	t.Helper()
	for _, w := range want {
		g, ok := goals[w.name]
		if !ok {
			t.Errorf("goal %q missing", w.name)
			continue
		}
		if d := g.Measured - w.measured; d > 1e-9 || d < -1e-9 || g.Met != w.met {
			t.Errorf("%s: measured %v met %v, want %v met %v (per round %v, problems %q)", w.name, g.Measured, g.Met, w.measured, w.met, g.PerRound, g.Problems)
		}
	}
}

const (
	goalRouterMCPGo  = "mcprouter -> mcpbackend vs mcp-go alone (throughput)"
	goalRouterGoSDK  = "mcprouter -> mcpbackend vs the official Go SDK alone (throughput)"
	goalRouterDirect = "mcprouter -> mcpbackend vs mcpbackend alone, 32 sessions (throughput)"
	goalOpenP99      = "open loop at 50% of the direct maximum: p99 through the router minus p99 direct"
	goalLoadCeiling  = "mcpload's own ceiling (against mcpload stub) vs mcprouter's maximum rate"
	goalLoadCPU      = "mcpload's CPU while doing so (100% = one core)"
)

// failFast makes every run of t answer most calls with a quick error at a rate far above
// anything real: the raw throughput would meet every goal.
func failFast(t *TargetResult, failed int64) {
	for i := range t.Runs {
		rep := t.Runs[i].Report
		rep.ThroughputRPS = 1e6
		rep.Errors = failed
		rep.Latency.Count = rep.Requests - failed
	}
}

func TestEvaluateFastFailingTarget(t *testing.T) {
	res := fakeResult()
	router := res.Closed[2]
	if router.Name != TargetRouter {
		t.Fatalf("fake result order changed: %s", router.Name)
	}
	failFast(router, 98000) // 1,000 of 99,000 calls succeed
	// The successful-call rate is what counts: 1e6 × 1,000/99,000.
	if got, want := router.Throughput(), 1e6*1000/99000; got < want-1e-6 || got > want+1e-6 {
		t.Errorf("throughput %v, want %v (successful calls only)", got, want)
	}
	goals := goalsByName(res)
	for _, name := range []string{goalRouterMCPGo, goalRouterGoSDK, goalRouterDirect, goalLoadCeiling} {
		g, ok := goals[name]
		if !ok {
			t.Errorf("goal %q missing: a failing target must be reported, as missed", name)
			continue
		}
		if g.Met {
			t.Errorf("%s: met from a run with failed calls", name)
		}
		if m := g.Margin(); !strings.HasPrefix(m, "missed: router round 1: 98000 failed calls") {
			t.Errorf("%s: margin %q does not name the failed calls", name, m)
		}
	}
	// Goals that do not read the router's runs stay met or missed on their own figures.
	if g := goals["mcpbackend alone vs the fastest peer server alone (throughput)"]; len(g.Problems) != 0 {
		t.Errorf("direct vs peers blamed on the router: %q", g.Problems)
	}
	md := res.Markdown("reports")
	if !strings.Contains(md, "**missed: router round 1: 98000 failed calls") {
		t.Errorf("the section does not show the missed goal:\n%s", md)
	}
}

// TestEvaluateAllCallsFailed: a target whose every call failed is not measured, and its
// goals are missed, not dropped.
func TestEvaluateAllCallsFailed(t *testing.T) {
	res := fakeResult()
	router := res.Closed[2]
	failFast(router, router.Runs[0].Report.Requests)
	if router.Measured() || router.Throughput() != 0 {
		t.Errorf("measured %v, throughput %v: nothing succeeded", router.Measured(), router.Throughput())
	}
	goals := goalsByName(res)
	for _, name := range []string{goalRouterMCPGo, goalRouterGoSDK, goalRouterDirect, goalLoadCeiling} {
		if g, ok := goals[name]; !ok || g.Met {
			t.Errorf("%s: present %v, met %v; want present and missed", name, ok, g.Met)
		}
	}
	if md := res.Markdown(""); !strings.Contains(md, "| router | mcprouter -> mcpbackend | no successful call (198000 failed calls) |") {
		t.Errorf("the closed-loop table does not show the failed target:\n%s", md)
	}
}

// TestEvaluateFastFailingPeer: a peer that fails fast cannot be the yardstick either.
func TestEvaluateFastFailingPeer(t *testing.T) {
	res := fakeResult()
	peer := res.Closed[4]
	if peer.Family != familyMCPGo {
		t.Fatalf("fake result order changed: %s", peer.Name)
	}
	failFast(peer, 10)
	g := goalsByName(res)[goalRouterMCPGo]
	if g.Met || !strings.Contains(g.Margin(), "mcpgo-session round 1: 10 failed calls") {
		t.Errorf("met %v, margin %q; want missed because of the peer's failed calls", g.Met, g.Margin())
	}
}

// TestEvaluateNoSamples: runs that measured nothing (no call completed, no CPU sample)
// meet no goal, even those whose zero value would be within the limit.
func TestEvaluateNoSamples(t *testing.T) {
	res := fakeResult()
	// The open-loop router runs completed no call: p99 0 would be "within 100 µs".
	for _, run := range res.Open[0].Targets[1].Runs {
		run.Report.Requests, run.Report.ThroughputRPS, run.Report.Latency = 0, 0, report.Latency{}
	}
	// mcpload took no CPU sample on the stub run: 0% would be "within one core".
	res.Closed[0].Runs[0].Report.Generator.CPUAvgPct = 0
	goals := goalsByName(res)
	if g := goals[goalOpenP99]; g.Met || len(g.PerRound) != 0 || !strings.Contains(g.Margin(), "router round 1: no successful call measured") {
		t.Errorf("open p99: met %v, per round %v, margin %q; want missed without samples", g.Met, g.PerRound, g.Margin())
	}
	if g := goals[goalLoadCPU]; g.Met || g.Margin() != "missed: no CPU sample" {
		t.Errorf("mcpload CPU: met %v, margin %q; want missed: no CPU sample", g.Met, g.Margin())
	}
}

func TestGoalJudge(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Goal
		met  bool
	}{
		{"within, from samples", Goal{AtLeast: true, Limit: 1, Measured: 2, PerRound: []float64{2}}, true},
		{"short", Goal{AtLeast: true, Limit: 1, Measured: 0.5, PerRound: []float64{0.5}}, false},
		{"no sample", Goal{Limit: 100, Measured: 0}, false},
		{"a problem", Goal{Limit: 100, Measured: 5, PerRound: []float64{5}, Problems: []string{"x round 1: 3 failed calls"}}, false},
	} {
		g := tc.g
		g.judge()
		if g.Met != tc.met {
			t.Errorf("%s: met %v, want %v (problems %q)", tc.name, g.Met, tc.met, g.Problems)
		}
	}
}
