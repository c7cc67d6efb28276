// Package assert parses and checks mcpload's --assert expressions, which turn a run
// into a pass/fail gate for scripts and CI:
//
//	p99<5ms            corrected p99 latency of the headline operations
//	uncorrected.p99<2ms
//	errors<0.1%        error rate; errors<10 or errors==0 compare the count
//	slow<1%            calls at or over the --slow threshold; slow<10 compares the count
//	rps>=1000          throughput (also: throughput)
//	requests>=10000
//	late<1%            open-loop sends that started late
//	cpu<80%            the generator's own average CPU (100% = one core)
//	tools/call:p99<5ms a method from by_method (or a tool or mix entry label from by_tool)
//
// Latency metrics are min, mean, p50, p75, p90, p95, p99, p99.9 (or p999), p99.99 (or
// p9999) and max, and need a unit: ns, us (or µs), ms, s, m. Operators are <, <=, >, >=,
// == (or =) and !=.
package assert

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mcprouter/mcprouter/internal/each"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// Expr is a parsed assertion.
type Expr struct {
	Source      string
	Scope       string // method or tool, or "" for the headline figures
	Metric      string // canonical metric name
	Uncorrected bool
	Op          string
	Value       float64 // in the metric's unit: µs, %, count or /s
	Percent     bool    // errors given as a rate
}

var latencyMetrics = map[string]string{
	"min": "min", "mean": "mean", "avg": "mean", "p50": "p50", "median": "p50", "p75": "p75",
	"p90": "p90", "p95": "p95", "p99": "p99", "p99.9": "p999", "p999": "p999",
	"p99.99": "p9999", "p9999": "p9999", "max": "max",
}

var units = map[string]float64{"ns": 1e-3, "us": 1, "µs": 1, "ms": 1e3, "s": 1e6, "m": 60e6, "min": 60e6}

// Parse parses one expression.
func Parse(src string) (*Expr, error) {
	s := strings.Join(strings.Fields(src), "")
	e := &Expr{Source: src}
	opAt, opLen := -1, 0
	for i := 0; i < len(s); i++ {
		if strings.ContainsRune("<>=!", rune(s[i])) {
			opAt, opLen = i, 1
			if i+1 < len(s) && s[i+1] == '=' {
				opLen = 2
			}
			break
		}
	}
	if opAt <= 0 {
		return nil, fmt.Errorf("assert %q: want METRIC OP VALUE, for example p99<5ms", src)
	}
	lhs, rhs := s[:opAt], s[opAt+opLen:]
	e.Op = s[opAt : opAt+opLen]
	switch e.Op {
	case "<", "<=", ">", ">=", "==", "!=":
	case "=":
		e.Op = "=="
	default:
		return nil, fmt.Errorf("assert %q: unknown operator %q", src, e.Op)
	}
	if i := strings.LastIndexByte(lhs, ':'); i >= 0 {
		e.Scope, lhs = lhs[:i], lhs[i+1:]
	}
	lhs = strings.ToLower(lhs)
	for _, p := range []string{"uncorrected.", "uncorrected_", "u."} {
		if strings.HasPrefix(lhs, p) {
			e.Uncorrected, lhs = true, lhs[len(p):]
		}
	}
	numEnd := 0
	for numEnd < len(rhs) && (rhs[numEnd] >= '0' && rhs[numEnd] <= '9' || rhs[numEnd] == '.' || rhs[numEnd] == '-' || rhs[numEnd] == '+' || rhs[numEnd] == 'e' && numEnd > 0) {
		numEnd++
	}
	num, unit := rhs[:numEnd], rhs[numEnd:]
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return nil, fmt.Errorf("assert %q: bad number %q", src, num)
	}
	if m, ok := latencyMetrics[lhs]; ok {
		mult, ok := units[unit]
		if !ok {
			return nil, fmt.Errorf("assert %q: latency needs a unit (ns, us, ms, s), got %q", src, unit)
		}
		// A bound that overflows in microseconds would be +Inf: a gate nothing fails.
		if math.IsInf(v*mult, 0) {
			return nil, fmt.Errorf("assert %q: %s%s is out of range", src, num, unit)
		}
		e.Metric, e.Value = m, v*mult
		return e, nil
	}
	if e.Uncorrected {
		return nil, fmt.Errorf("assert %q: only latency metrics have an uncorrected form", src)
	}
	switch lhs {
	case "errors", "error_rate", "errors_pct", "slow":
		e.Metric = "errors"
		if lhs == "slow" {
			e.Metric = "slow"
		}
		switch {
		case unit == "%":
			e.Percent, e.Value = true, v
		case unit == "" && lhs == e.Metric:
			e.Value = v
		default:
			return nil, fmt.Errorf("assert %q: %s take a count or a percentage", src, e.Metric)
		}
	case "rps", "throughput":
		if unit != "" && unit != "/s" && unit != "rps" {
			return nil, fmt.Errorf("assert %q: throughput is per second, got unit %q", src, unit)
		}
		e.Metric, e.Value = "rps", v
	case "requests":
		if unit != "" {
			return nil, fmt.Errorf("assert %q: requests is a count", src)
		}
		e.Metric, e.Value = "requests", v
	case "late", "cpu":
		if unit != "%" {
			return nil, fmt.Errorf("assert %q: %s is a percentage", src, lhs)
		}
		if e.Scope != "" {
			return nil, fmt.Errorf("assert %q: %s is a property of the whole run", src, lhs)
		}
		e.Metric, e.Value = lhs, v
	default:
		return nil, fmt.Errorf("assert %q: unknown metric %q", src, lhs)
	}
	return e, nil
}

// ParseAll parses every expression, stopping at the first error.
func ParseAll(srcs []string) ([]*Expr, error) { return each.Map(srcs, Parse) }

// Check evaluates e against r.
func (e *Expr) Check(r *report.Report) report.Assertion {
	a := report.Assertion{Expr: e.Source}
	var st *report.Stats
	if e.Scope != "" {
		st = r.ByMethod[e.Scope]
		if st == nil {
			st = r.ByTool[e.Scope]
		}
		if st == nil {
			a.Unit = "missing"
			return a // an assertion about something the run never did fails
		}
	} else {
		st = &report.Stats{Requests: r.Requests, Errors: r.Errors, ThroughputRPS: r.ThroughputRPS,
			Latency: r.Latency, LatencyUncorrected: r.LatencyUncorrected, Slow: r.Slow}
	}
	hasData := true
	switch e.Metric {
	case "errors":
		if e.Percent {
			a.Unit = "%"
			if st.Requests > 0 {
				a.Actual = 100 * float64(st.Errors) / float64(st.Requests)
			} else {
				hasData = false
			}
		} else {
			a.Actual = float64(st.Errors)
		}
	case "slow":
		// Without a threshold (--slow) there is no count: the assertion fails.
		hasData = st.Slow != nil && st.Latency.Count > 0
		if hasData && e.Percent {
			a.Unit, a.Actual = "%", st.Slow.Pct
		} else if hasData {
			a.Actual = float64(st.Slow.Count)
		}
	case "rps":
		a.Unit, a.Actual = "/s", st.ThroughputRPS
	case "requests":
		a.Actual = float64(st.Requests)
	case "late":
		a.Unit, a.Actual = "%", r.Generator.LatePct
	case "cpu":
		a.Unit, a.Actual = "%", r.Generator.CPUAvgPct
	default:
		l := st.Latency
		if e.Uncorrected {
			l = st.LatencyUncorrected
		}
		a.Unit = "us"
		hasData = l.Count > 0
		a.Actual = map[string]float64{"min": l.Min, "mean": l.Mean, "p50": l.P50, "p75": l.P75, "p90": l.P90,
			"p95": l.P95, "p99": l.P99, "p999": l.P999, "p9999": l.P9999, "max": l.Max}[e.Metric]
	}
	a.Pass = hasData && compare(a.Actual, e.Op, e.Value)
	return a
}

func compare(x float64, op string, y float64) bool {
	switch op {
	case "<":
		return x < y
	case "<=":
		return x <= y
	case ">":
		return x > y
	case ">=":
		return x >= y
	case "==":
		return x == y
	case "!=":
		return x != y
	}
	return false
}

// CheckAll evaluates every expression, records the outcomes in r.Assertions and
// reports whether all passed.
func CheckAll(exprs []*Expr, r *report.Report) bool {
	ok := true
	r.Assertions = r.Assertions[:0]
	for _, e := range exprs {
		a := e.Check(r)
		ok = ok && a.Pass
		r.Assertions = append(r.Assertions, a)
	}
	return ok
}
