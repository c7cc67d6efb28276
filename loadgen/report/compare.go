package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// Compare writes a side-by-side table of two reports with B/A ratios. Ratios above 1
// mean B has more of the thing: more throughput is better, more latency is worse.
func Compare(w io.Writer, a, b *Report, nameA, nameB string) error {
	sb := &strings.Builder{}
	nameA, nameB = label(nameA, a), label(nameB, b)
	tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\tB/A\t\n", nameA, nameB)
	num := func(name string, x, y float64, format func(float64) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, format(x), format(y), ratio(x, y))
	}
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	pct := func(v float64) string { return fmt.Sprintf("%.3f%%", 100*v) }
	num("requests", float64(a.Requests), float64(b.Requests), count)
	num("throughput", a.ThroughputRPS, b.ThroughputRPS, FormatRate)
	num("errors", float64(a.Errors), float64(b.Errors), count)
	num("error rate", a.ErrorRate, b.ErrorRate, pct)
	if x, y := a.Slow, b.Slow; x != nil && y != nil && x.ThresholdUS == y.ThresholdUS {
		num("slow ≥"+FormatUS(x.ThresholdUS), float64(x.Count), float64(y.Count), count)
	}
	lat := func(prefix string, x, y Latency) {
		num(prefix+"p50", x.P50, y.P50, FormatUS)
		num(prefix+"p90", x.P90, y.P90, FormatUS)
		num(prefix+"p99", x.P99, y.P99, FormatUS)
		num(prefix+"p99.9", x.P999, y.P999, FormatUS)
		num(prefix+"max", x.Max, y.Max, FormatUS)
		num(prefix+"mean", x.Mean, y.Mean, FormatUS)
	}
	lat("", a.Latency, b.Latency)
	lat("uncorrected ", a.LatencyUncorrected, b.LatencyUncorrected)
	num("generator cpu", a.Generator.CPUAvgPct, b.Generator.CPUAvgPct, func(v float64) string { return fmt.Sprintf("%.0f%%", v) })
	tw.Flush()

	var common []string
	for _, k := range slices.Sorted(maps.Keys(a.ByMethod)) {
		if _, ok := b.ByMethod[k]; ok {
			common = append(common, k)
		}
	}
	if len(common) > 0 {
		sb.WriteString("\n")
		tw = tabwriter.NewWriter(sb, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "by method\trate A\trate B\tB/A\tp50 A\tp50 B\tB/A\tp99 A\tp99 B\tB/A\t\n")
		for _, k := range common {
			x, y := a.ByMethod[k], b.ByMethod[k]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k,
				FormatRate(x.ThroughputRPS), FormatRate(y.ThroughputRPS), ratio(x.ThroughputRPS, y.ThroughputRPS),
				FormatUS(x.Latency.P50), FormatUS(y.Latency.P50), ratio(x.Latency.P50, y.Latency.P50),
				FormatUS(x.Latency.P99), FormatUS(y.Latency.P99), ratio(x.Latency.P99, y.Latency.P99))
		}
		tw.Flush()
	}
	for _, r := range []struct {
		name string
		rep  *Report
	}{{nameA, a}, {nameB, b}} {
		if !r.rep.Generator.Trustworthy {
			fmt.Fprintf(sb, "warning: %s was flagged as not trustworthy: %s\n", r.name, strings.Join(r.rep.Generator.Warnings, "; "))
		}
	}
	if a.Config.Pacing != b.Config.Pacing || a.Config.Rate != b.Config.Rate || a.Config.Sessions != b.Config.Sessions {
		fmt.Fprintf(sb, "note: the runs used different workloads (%s %d sessions rate %g vs %s %d sessions rate %g)\n",
			a.Config.Pacing, a.Config.Sessions, a.Config.Rate, b.Config.Pacing, b.Config.Sessions, b.Config.Rate)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func label(name string, r *Report) string {
	if name == "" {
		return r.Target.URL
	}
	return strings.TrimSuffix(filepath.Base(name), ".json")
}

// ratio formats y/x, or "-" when undefined.
func ratio(x, y float64) string {
	if x == 0 || math.IsNaN(x) || math.IsNaN(y) {
		if y == 0 {
			return "="
		}
		return "-"
	}
	return fmt.Sprintf("%.2fx", y/x)
}
