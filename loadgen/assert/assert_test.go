package assert

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/loadgen/report"
)

func sample() *report.Report {
	return &report.Report{
		Requests: 10000, Errors: 5, ThroughputRPS: 1000,
		Latency:            report.Latency{Count: 9995, P50: 800, P90: 1500, P99: 4000, P999: 9000, Max: 20000, Mean: 900},
		LatencyUncorrected: report.Latency{Count: 9995, P50: 700, P99: 1200, Max: 20000},
		ByMethod: map[string]*report.Stats{
			"tools/call": {Requests: 8000, Errors: 5, ThroughputRPS: 800, Latency: report.Latency{Count: 7995, P99: 6000}},
		},
		ByTool: map[string]*report.Stats{"echo": {Requests: 8000, Latency: report.Latency{Count: 8000, P99: 6000},
			Slow: &report.Slow{ThresholdUS: 5000, Count: 40, Pct: 0.5}}},
		Slow:      &report.Slow{ThresholdUS: 5000, Count: 50, Pct: 0.5},
		Generator: report.Generator{LatePct: 0.5, CPUAvgPct: 40},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		expr string
		pass bool
	}{
		{"p99<5ms", true},
		{"p99 < 4ms", false},
		{"p99<=4ms", true},
		{"p99<4000us", false},
		{"p99<4001µs", true},
		{"p50<1ms", true},
		{"p99.9<10ms", true},
		{"p999<8ms", false},
		{"max<=0.02s", true},
		{"mean>500000ns", true},
		{"uncorrected.p99<2ms", true},
		{"u.p99<1ms", false},
		{"errors<0.1%", true},
		{"errors<0.01%", false},
		{"errors==5", true},
		{"errors=0", false},
		{"errors!=0", true},
		{"rps>=1000", true},
		{"throughput>1000", false},
		{"requests>=10000", true},
		{"late<1%", true},
		{"cpu<30%", false},
		{"tools/call:p99<5ms", false},
		{"tools/call:errors<0.1%", true},
		{"echo:p99<=6ms", true},
		{"resources/read:p99<5ms", false}, // never ran: fails
		{"slow<1%", true},
		{"slow<50", false},
		{"slow<=50", true},
		{"echo:slow<0.5%", false},
		{"echo:slow==40", true},
		{"tools/call:slow<1%", false}, // no count for it: fails
	}
	for _, tt := range tests {
		e, err := Parse(tt.expr)
		if err != nil {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		if a := e.Check(sample()); a.Pass != tt.pass {
			t.Errorf("%q: pass=%v (actual %v %s), want %v", tt.expr, a.Pass, a.Actual, a.Unit, tt.pass)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, expr := range []string{"", "p99", "p99<5", "p99<fast", "p42<5ms", "errors<5ms", "rps>5ms",
		"late<1", "requests>5%", "slow<5ms", "uncorrected.slow<1%", "uncorrected.errors<1%", "p99=>5ms", "tools/call:cpu<5%", "p99<1e306m"} {
		if _, err := Parse(expr); err == nil {
			t.Errorf("%q: no error", expr)
		}
	}
}

func TestEmptyRunFailsLatency(t *testing.T) {
	e, _ := Parse("p99<5ms")
	if e.Check(&report.Report{}).Pass {
		t.Error("latency assertion passed on a run without samples")
	}
	e, _ = Parse("errors<1%")
	if e.Check(&report.Report{}).Pass {
		t.Error("error-rate assertion passed on a run without requests")
	}
}

func TestCheckAll(t *testing.T) {
	exprs, err := ParseAll([]string{"p99<5ms", "errors<0.01%"})
	if err != nil {
		t.Fatal(err)
	}
	r := sample()
	if CheckAll(exprs, r) {
		t.Error("CheckAll passed with a failing expression")
	}
	if len(r.Assertions) != 2 || !r.Assertions[0].Pass || r.Assertions[1].Pass {
		t.Errorf("assertions %+v", r.Assertions)
	}
}

// format writes e back as an expression in canonical form: the scope, the metric's
// canonical name, the operator and the value in the metric's base unit.
func format(e *Expr) string {
	var b strings.Builder
	if e.Scope != "" {
		b.WriteString(e.Scope + ":")
	}
	if e.Uncorrected {
		b.WriteString("uncorrected.")
	}
	b.WriteString(e.Metric + e.Op + strconv.FormatFloat(e.Value, 'g', -1, 64))
	switch {
	case e.Metric == "late" || e.Metric == "cpu" || e.Percent:
		b.WriteString("%")
	case e.Metric != "errors" && e.Metric != "slow" && e.Metric != "rps" && e.Metric != "requests":
		b.WriteString("us")
	}
	return b.String()
}

// FuzzParse: whatever parses reads back the same from its canonical form (so no part
// of an expression is lost or misread), and can be checked.
func FuzzParse(f *testing.F) {
	b, err := os.ReadFile("testdata/asserts.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f.Add(l)
	}
	f.Add("p99<1e306m") // a bound that overflowed to +Inf in microseconds
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			return
		}
		canon := format(e)
		back, err := Parse(canon)
		if err != nil {
			t.Fatalf("%q parsed as %+v, whose form %q does not parse: %v", src, e, canon, err)
		}
		back.Source = e.Source
		if *back != *e {
			t.Fatalf("%q parsed as %+v; its form %q as %+v", src, e, canon, back)
		}
		_ = e.Check(sample())
		_ = e.Check(&report.Report{})
	})
}
