package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// FormatUS renders microseconds for humans: 850ns, 35.2µs, 1.23ms, 2.50s.
func FormatUS(us float64) string {
	switch {
	case us <= 0:
		return "0"
	case us < 1:
		return strconv.FormatFloat(us*1e3, 'f', 0, 64) + "ns"
	case us < 100:
		return strconv.FormatFloat(us, 'f', 1, 64) + "µs"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 0, 64) + "µs"
	case us < 100e3:
		return strconv.FormatFloat(us/1e3, 'f', 2, 64) + "ms"
	case us < 1e6:
		return strconv.FormatFloat(us/1e3, 'f', 0, 64) + "ms"
	default:
		return strconv.FormatFloat(us/1e6, 'f', 2, 64) + "s"
	}
}

// FormatRate renders a rate per second.
func FormatRate(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64) + "/s"
	default:
		return strconv.FormatFloat(v, 'f', 1, 64) + "/s"
	}
}

// WriteTable writes the final human-readable summary.
func (r *Report) WriteTable(w io.Writer) error {
	b := &strings.Builder{}
	where := r.Target.URL
	if where == "" {
		where = strings.Join(r.Target.Command, " ")
	}
	fmt.Fprintf(b, "mcpload %s (%s, protocol %s", where, r.Target.Transport, r.Target.Protocol)
	if r.Target.Server != "" {
		fmt.Fprintf(b, ", server %s", r.Target.Server)
	}
	b.WriteString(")\n")
	pacing := "closed loop"
	if r.Config.Pacing == "open" {
		pacing = "open loop at " + FormatRate(r.Config.Rate)
	}
	fmt.Fprintf(b, "mode %s, %s, %d sessions, %.3gs measured after %.3gs warm-up and %.3gs ramp\n\n",
		r.Config.Mode, pacing, r.Config.Sessions, r.DurationS, r.Config.WarmupS, r.Config.RampS)
	fmt.Fprintf(b, "requests %d   errors %d (%.2f%%)   throughput %s\n\n",
		r.Requests, r.Errors, 100*r.ErrorRate, FormatRate(r.ThroughputRPS))

	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency\tp50\tp90\tp99\tp99.9\tmax\tmean\t")
	row := func(name string, l Latency) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, FormatUS(l.P50), FormatUS(l.P90),
			FormatUS(l.P99), FormatUS(l.P999), FormatUS(l.Max), FormatUS(l.Mean))
	}
	row("corrected", r.Latency)
	row("uncorrected", r.LatencyUncorrected)
	tw.Flush()
	if r.Slow != nil {
		fmt.Fprintf(b, "slow (corrected latency %s or more): %s of %d\n", FormatUS(r.Slow.ThresholdUS), r.Slow.Cell(), r.Latency.Count)
	}

	b.WriteString("\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "by method\trequests\terrors\trate\tp50\tp90\tp99\tp99.9\tmax\t%s\n", r.slowHeader())
	anyFailed := false
	for _, k := range slices.Sorted(maps.Keys(r.ByMethod)) {
		s := r.ByMethod[k]
		name, rate := k, FormatRate(s.ThroughputRPS)
		if !s.Primary {
			name, rate = name+" *", "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, s.Requests, s.Errors,
			rate, FormatUS(s.Latency.P50), FormatUS(s.Latency.P90),
			FormatUS(s.Latency.P99), FormatUS(s.Latency.P999), FormatUS(s.Latency.Max), s.Slow.column())
		if l := s.ErrorLatency; l != nil && l.Count > 0 {
			anyFailed = true
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", "  failed", l.Count, l.Count,
				"-", FormatUS(l.P50), FormatUS(l.P90), FormatUS(l.P99), FormatUS(l.P999), FormatUS(l.Max))
		}
	}
	tw.Flush()
	b.WriteString("  (* not part of the headline figures")
	if anyFailed {
		b.WriteString("; failed: the method's failed calls, which took time too")
	}
	b.WriteString(")\n")
	if len(r.ByTool) > 1 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "by tool\trequests\terrors\tp50\tp99\tp99.9\tmax\t%s\n", r.slowHeader())
		for _, k := range slices.Sorted(maps.Keys(r.ByTool)) {
			s := r.ByTool[k]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", k, s.Requests, s.Errors,
				FormatUS(s.Latency.P50), FormatUS(s.Latency.P99), FormatUS(s.Latency.P999), FormatUS(s.Latency.Max), s.Slow.column())
		}
		tw.Flush()
	}
	if len(r.ErrorsByClass) > 0 {
		b.WriteString("\nerrors by class (with the first message of each):\n")
		for _, k := range slices.Sorted(maps.Keys(r.ErrorsByClass)) {
			fmt.Fprintf(b, "  %s=%d", k, r.ErrorsByClass[k])
			if msg := r.FirstErrors[k]; msg != "" {
				fmt.Fprintf(b, "  first: %s", msg)
			}
			b.WriteString("\n")
		}
	}
	s := r.Sessions
	fmt.Fprintf(b, "\nsessions: %d/%d opened", s.Opened, s.Target)
	if s.Failed > 0 {
		fmt.Fprintf(b, ", %d failed (%s)", s.Failed, s.FirstError)
	}
	if s.Streams > 0 {
		fmt.Fprintf(b, ", %d GET streams", s.Streams)
	}
	if s.Reconnects > 0 {
		fmt.Fprintf(b, ", %d re-established", s.Reconnects)
	}
	if s.Moved > 0 {
		fmt.Fprintf(b, ", %d moved to another instance", s.Moved)
	}
	if s.Connect.Count > 0 {
		fmt.Fprintf(b, ", connect p50 %s p99 %s", FormatUS(s.Connect.P50), FormatUS(s.Connect.P99))
	}
	b.WriteString("\n")
	if f := r.Fanout; f != nil {
		fmt.Fprintf(b, "fan-out %s: %d subscribers, %d triggers, delivered %d/%d (missing %d, duplicates %d)\n",
			f.URI, f.Subscribers, f.Triggers, f.Delivered, f.Expected, f.Missing, f.Duplicates)
		fmt.Fprintf(b, "  delivery p50 %s p99 %s max %s; worst session max p50 %s p99 %s\n",
			FormatUS(f.Latency.P50), FormatUS(f.Latency.P99), FormatUS(f.Latency.Max),
			FormatUS(f.PerSessionMax.P50), FormatUS(f.PerSessionMax.P99))
	}
	g := r.Generator
	fmt.Fprintf(b, "generator: cpu avg %.0f%% max %.0f%% of %.0f%%, waiting for a cpu %.0f%%", g.CPUAvgPct, g.CPUMaxPct, g.CPUAvailablePct, g.RunqueueWaitPct)
	if g.CPUPerOpUS > 0 {
		fmt.Fprintf(b, ", %s cpu per operation (%s on one core)", FormatUS(g.CPUPerOpUS), FormatRate(1e6/g.CPUPerOpUS))
	}
	if g.Pacing == "open" {
		fmt.Fprintf(b, ", late sends %d (%.2f%%, %d with every session busy)", g.LateSends, g.LatePct, g.StarvedSends)
	}
	if g.Trustworthy {
		b.WriteString(", figures trustworthy\n")
	} else {
		b.WriteString(", FIGURES NOT TRUSTWORTHY\n")
	}
	for _, w := range g.Warnings {
		fmt.Fprintf(b, "warning: %s\n", w)
	}
	for _, a := range r.Assertions {
		verdict := "ok  "
		if !a.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(b, "assert %s %s (actual %s)\n", verdict, a.Expr, formatActual(a))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Cell renders the count with its share: "673 (1.72%)".
func (s *Slow) Cell() string {
	return strconv.FormatInt(s.Count, 10) + " (" + strconv.FormatFloat(s.Pct, 'f', 2, 64) + "%)"
}

// slowHeader is the heading of the tables' slow column ("≥10.00ms\t"), empty
// without a threshold.
func (r *Report) slowHeader() string {
	if r.Slow == nil {
		return ""
	}
	return "≥" + FormatUS(r.Slow.ThresholdUS) + "\t"
}

// column is the tables' slow cell with its tab, empty without a threshold.
func (s *Slow) column() string {
	if s == nil {
		return ""
	}
	return s.Cell() + "\t"
}

func formatActual(a Assertion) string {
	switch a.Unit {
	case "us":
		return FormatUS(a.Actual)
	case "%":
		return strconv.FormatFloat(a.Actual, 'f', 3, 64) + "%"
	case "/s":
		return FormatRate(a.Actual)
	}
	return strconv.FormatFloat(a.Actual, 'f', -1, 64)
}
