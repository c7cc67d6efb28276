package compare

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {999.4, "999"}, {1000, "1,000"}, {47988.2, "47,988"}, {1234567, "1,234,567"}, {-1500, "-1,500"},
	} {
		if got := formatRate(tc.in); got != tc.want {
			t.Errorf("formatRate(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"mcpload", "--args", `{"text":"it's"}`, "--url", "URL", ""})
	want := `mcpload --args '{"text":"it'\''s"}' --url URL ''`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// fakeRun builds a run with the figures the harness reads from mcpload's report.
func fakeRun(round int, rps, p50, p99 float64, serverCPU ...time.Duration) LoadRun {
	const ops = 100000
	return LoadRun{
		Round: round,
		Report: &report.Report{
			ThroughputRPS: rps, Requests: ops - 1000, Excluded: 1000,
			Latency:   report.Latency{Count: ops - 1000, P50: p50, P90: (p50 + p99) / 2, P99: p99, P999: 2 * p99},
			Generator: report.Generator{Trustworthy: round != 2, CPUAvgPct: 60, CPUMaxPct: 70, CPUPerOpUS: 12.5, RunqueueWaitPct: 5, LatePct: 0.5},
			Config:    report.Config{Pacing: "closed"},
		},
		ServerCPU:      serverCPU,
		Ops:            ops,
		OtherServerPct: float64(3 * round),
		OtherLoadPct:   float64(10 * round),
		Argv:           []string{binLoad, "--url", "http://127.0.0.1:1/mcp", "--sessions", "32", "--tool", "echo", "--args", `{"text":"hello"}`},
	}
}

// fakeResult is a complete two-round result with round numbers chosen so that the
// medians and ratios are easy to check by hand.
func fakeResult() *Result {
	o := Options{Duration: 10 * time.Second, Warmup: 2 * time.Second, Sessions: 32, OpenSessions: 128, Rounds: 2,
		Args: `{"text":"hello"}`, OpenLoadFraction: 0.5}
	ms := time.Millisecond
	tr := func(name string, runs ...LoadRun) *TargetResult {
		s := targetByName(name)
		return &TargetResult{Name: name, Label: s.label, Family: s.family, Servers: s.servers, Runs: runs,
			ReportJSON: name + ".json", ReportHTML: name + ".html"}
	}
	res := &Result{
		Options: o, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Elapsed: 250 * time.Second,
		Machine:  Machine{CPUs: 2, Model: "Test CPU", Kernel: "Linux 6.0", GoVersion: "go1.26", LoadStart: "1.00 1.00 1.00", LoadEnd: "2.00 2.00 2.00"},
		LoadCPUs: "0", ServerCPUs: "1",
		Servers: []ServerRecord{{Name: srvBackend, Argv: []string{binBackend, "--listen", "127.0.0.1:0"}},
			{Name: srvRouter, Argv: []string{binRouter, "--config", "router.yaml"}}},
		Builds: []string{"go build ./cmd/mcpload ./cmd/mcpbackend ./cmd/mcprouter"},
		Closed: []*TargetResult{
			tr(TargetStub, fakeRun(1, 80000, 300, 900, 1000*ms)),
			tr(TargetDirect, fakeRun(1, 60000, 400, 1000, 1400*ms), fakeRun(2, 50000, 500, 1200, 1500*ms)),
			tr(TargetRouter, fakeRun(1, 30000, 800, 2000, 3000*ms, 1500*ms), fakeRun(2, 20000, 900, 2500, 3200*ms, 1600*ms)),
			tr(TargetGoSDKStateless, fakeRun(1, 5000, 5000, 9000, 20000*ms), fakeRun(2, 4000, 6000, 9900, 21000*ms)),
			tr(TargetMCPGoSession, fakeRun(1, 20000, 1500, 4000, 6000*ms), fakeRun(2, 25000, 1400, 3900, 6100*ms)),
		},
		Open: []*OpenSet{{Key: "open", Basis: TargetDirect, Rate: 27500, Targets: []*TargetResult{
			tr(TargetDirect, fakeRun(1, 27500, 300, 700, 2000*ms), fakeRun(2, 27500, 310, 650, 2000*ms)),
			tr(TargetRouter, fakeRun(1, 27400, 500, 760, 4000*ms, 1800*ms), fakeRun(2, 27450, 520, 900, 4000*ms, 1800*ms)),
		}}},
		Codec:        []EnvelopeRow{{Message: "call199", Lib: "codec", Speedup: 1, Summary: BenchSummary{Metrics: map[string]float64{"ns/op": 126, "cpu-ns/op": 120, "B/op": 0, "allocs/op": 0}}}},
		CodecCommand: "go test -run '^$' -bench BenchmarkEnvelope -benchtime 200ms -count 5 ./codec",
		Profile:      &Profile{Seconds: 9, Throughput: 19000, Top: "flat listing\n", TopCum: "cum listing\n", Command: "go tool pprof -top"},
		Warnings:     []string{"something odd"},
	}
	res.Closed[0].Runs[0].Report.Generator.CPUAvgPct = 95 // the stub run was generator-bound
	for _, set := range res.Open {
		for _, t := range set.Targets {
			t.ReportJSON, t.ReportHTML = set.Key+"-"+t.Name+".json", set.Key+"-"+t.Name+".html"
			for i := range t.Runs {
				t.Runs[i].Report.Config.Pacing = "open"
				t.Runs[i].Argv = append(t.Runs[i].Argv, "--rate", "27500")
				t.Runs[i].Env = []string{"GOMAXPROCS=2"}
			}
		}
	}
	res.Goals = evaluate(res)
	return res
}

func TestEvaluate(t *testing.T) {
	res := fakeResult()
	got := goalsByName(res)
	checkGoals(t, got, []goalWant{
		// Per round: 60000/20000 = 3, 50000/25000 = 2 (mcp-go session is the fastest peer
		// in both rounds); median 2.5.
		{"mcpbackend alone vs the fastest peer server alone (throughput)", 2.5, false},
		// 30000/20000 = 1.5, 20000/25000 = 0.8.
		{"mcprouter -> mcpbackend vs mcp-go alone (throughput)", 1.15, true},
		// 30000/5000 = 6, 20000/4000 = 5.
		{"mcprouter -> mcpbackend vs the official Go SDK alone (throughput)", 5.5, true},
		// 30000/60000 = 0.5, 20000/50000 = 0.4.
		{"mcprouter -> mcpbackend vs mcpbackend alone, 32 sessions (throughput)", 0.45, false},
		// 760-700 = 60, 900-650 = 250.
		{"open loop at 50% of the direct maximum: p99 through the router minus p99 direct", 155, false},
		// 80000 / median(30000, 20000).
		{"mcpload's own ceiling (against mcpload stub) vs mcprouter's maximum rate", 3.2, true},
		{"mcpload's CPU while doing so (100% = one core)", 95, true},
		// 1e6/12.5 = 80000 on one core, / 25000.
		{"mcpload's one-core ceiling from its CPU per call (1e6 / µs per call) vs mcprouter's maximum rate", 3.2, true},
	})
	if len(got) != 8 {
		t.Errorf("%d goals, want 8", len(got))
	}
	// Server CPU per call (µs): direct 14.5, router 31 + 15.5, Go SDK 205, mcp-go 60.5.
	for name, want := range map[string]float64{
		"mcpbackend alone vs the fastest peer server alone (throughput)":                  60.5 / 14.5,
		"mcprouter -> mcpbackend vs mcp-go alone (throughput)":                            60.5 / 46.5,
		"mcprouter -> mcpbackend vs the official Go SDK alone (throughput)":               205 / 46.5,
		"mcprouter -> mcpbackend vs mcpbackend alone, 32 sessions (throughput)":           14.5 / 46.5,
		"open loop at 50% of the direct maximum: p99 through the router minus p99 direct": 0,
	} {
		if d := got[name].CPURatio - want; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: CPU ratio %v, want %v", name, got[name].CPURatio, want)
		}
	}
}

func TestEvaluatePartial(t *testing.T) {
	// Only the stub and the backend: every goal needs the router or a peer, so none.
	res := &Result{Options: Options{Rounds: 1, Sessions: 32}, Closed: []*TargetResult{
		{Name: TargetStub, Family: familyStub, Runs: []LoadRun{fakeRun(1, 1000, 1, 2)}},
		{Name: TargetDirect, Family: familyOurs, Runs: []LoadRun{fakeRun(1, 1000, 1, 2)}},
	}}
	if g := evaluate(res); len(g) != 0 {
		t.Errorf("goals without peers or router: %+v", g)
	}
}

func TestGoalMargin(t *testing.T) {
	for _, tc := range []struct {
		g    Goal
		want string
	}{
		{Goal{AtLeast: true, Limit: 0.6, Measured: 0.72, Met: true, Unit: "x"}, "met, 1.20x the goal"},
		{Goal{AtLeast: true, Limit: 0.6, Measured: 0.3, Unit: "x"}, "missed, 50% of the goal (2.00x short)"},
		{Goal{Limit: 100, Measured: 40, Met: true, Unit: "µs"}, "met, 60.0µs under the limit"},
		{Goal{Limit: 100, Measured: 1600, Unit: "µs"}, "missed by 1.50ms"},
	} {
		if got := tc.g.Margin(); got != tc.want {
			t.Errorf("Margin() = %q, want %q", got, tc.want)
		}
	}
}

func TestMarkdownGolden(t *testing.T) {
	checkGolden(t, "section.golden", fakeResult().Markdown("reports"))
}

// TestMarkdownNoLinks: the reports are not kept in git, so the section names them and
// the command that writes them, and links to nothing.
func TestMarkdownNoLinks(t *testing.T) {
	md := fakeResult().Markdown("reports")
	if strings.Contains(md, "](") {
		t.Errorf("the section links to files that are not in git:\n%s", md)
	}
	for _, want := range []string{"`reports/direct.html` `reports/direct.json`", "not kept in git, so run the command"} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q", want)
		}
	}
}

func TestMarkdownNoReports(t *testing.T) {
	md := fakeResult().Markdown("")
	if strings.Contains(md, "](") {
		t.Errorf("links rendered without a reports directory:\n%s", md)
	}
	if !strings.HasPrefix(md, SectionHeading+"\n") {
		t.Errorf("section does not start with its heading")
	}
}
