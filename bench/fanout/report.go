package fanout

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets of the fan-out issue.
const (
	// TargetRatio is the least router/NATS deliveries-per-second ratio accepted.
	TargetRatio = 0.5
	// TargetP99 bounds the router's p99 delivery latency at TargetP99Sessions.
	TargetP99         = 100 * time.Millisecond
	TargetP99Sessions = 10000
)

// Targets of issue 15, against the TCP floor measured in the same run: the router's CPU
// per delivery (servers and clients) at most TargetFloorCPU times the floor's at each of
// TargetFloorSizes, and its p99 at TargetP99Sessions at most TargetFloorP99 times the
// floor's.
const (
	TargetFloorCPU = 1.25
	TargetFloorP99 = 1.2
)

// TargetFloorSizes are the sizes TargetFloorCPU applies to.
var TargetFloorSizes = []int{1000, 10000}

// FloorTargetsMet reports issue 15's targets (see TargetFloorCPU) and the ratios they
// were judged on; measured is false for a target the run could not judge (no floor, or
// none of its sizes).
func (r *Report) FloorTargetsMet() (cpuOK, p99OK, cpuMeasured, p99Measured bool, notes []string) {
	if !r.Floor {
		return false, false, false, false, nil
	}
	cpuOK = true
	for _, s := range r.Sizes {
		for _, n := range TargetFloorSizes {
			if s.Sessions != n {
				continue
			}
			cpuMeasured = true
			ratio := cpuRatio(s.Router, s.Floor)
			cpuOK = cpuOK && ratio > 0 && ratio <= TargetFloorCPU && s.Router.Misses == 0
			notes = append(notes, fmt.Sprintf("CPU %.2fx at %d", ratio, n))
		}
		if s.Sessions == TargetP99Sessions && s.Floor.P99 > 0 {
			p99Measured = true
			ratio := float64(s.Router.P99) / float64(s.Floor.P99)
			p99OK = ratio <= TargetFloorP99 && s.Router.Misses == 0
			notes = append(notes, fmt.Sprintf("p99 %.2fx at %d", ratio, s.Sessions))
		}
	}
	return cpuOK && cpuMeasured, p99OK, cpuMeasured, p99Measured, notes
}

// Environment describes the run for the report: what a reader needs to judge the figures.
type Environment struct {
	Command   string // the command line, as a reader would type it
	Machine   string // e.g. "2 shared cores (AMD EPYC), other engineers' jobs running"
	Servers   string // where the servers ran: "this process" or "a child process"
	Persist   bool   // session records and event log in JetStream (the router default)
	FileLimit uint64 // RLIMIT_NOFILE of the client process
}

// Ratio is router/NATS deliveries per second at one size (0 when NATS delivered none).
func (s SizeResult) Ratio() float64 {
	if s.NATS.PerSec == 0 {
		return 0
	}
	return s.Router.PerSec / s.NATS.PerSec
}

// TargetsMet reports the targets: the ratio at every size, and the p99 at
// TargetP99Sessions when that size was measured (ok false with p99Measured false when
// it was not).
func (r *Report) TargetsMet() (ratioOK, p99OK, p99Measured bool) {
	ratioOK = len(r.Sizes) > 0
	for _, s := range r.Sizes {
		if s.Ratio() < TargetRatio || s.Router.Misses > 0 {
			ratioOK = false
		}
		if s.Sessions == TargetP99Sessions {
			p99Measured = true
			p99OK = s.Router.P99 < TargetP99 && s.Router.Misses == 0
		}
	}
	return ratioOK, p99OK, p99Measured
}

// FloorRatio is router/floor deliveries per second at one size (0 without a floor).
func (s SizeResult) FloorRatio() float64 {
	if s.Floor.PerSec == 0 {
		return 0
	}
	return s.Router.PerSec / s.Floor.PerSec
}

// cpuTotal is a side's CPU time per delivery, both processes.
func cpuTotal(r Result) time.Duration { return r.ServerCPU + r.ClientCPU }

// cpuRatio is a/b of CPU per delivery, 0 when b is.
func cpuRatio(a, b Result) float64 {
	if cpuTotal(b) == 0 {
		return 0
	}
	return float64(cpuTotal(a)) / float64(cpuTotal(b))
}

// WriteTable prints the results as aligned text tables.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	head := "sessions\trouter p50\trouter p99\trouter max\trouter/s\tNATS p50\tNATS p99\tNATS/s\trouter/NATS\t"
	if r.Floor {
		head += "floor p50\tfloor p99\tfloor/s\trouter/floor\t"
	}
	fmt.Fprintln(tw, head+"touch RTT\tmisses\tsetup\t")
	for _, s := range r.Sizes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t",
			s.Sessions, fmtDur(s.Router.P50), fmtDur(s.Router.P99), fmtDur(s.Router.Max), fmtRate(s.Router.PerSec),
			fmtDur(s.NATS.P50), fmtDur(s.NATS.P99), fmtRate(s.NATS.PerSec), s.Ratio())
		if r.Floor {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t", fmtDur(s.Floor.P50), fmtDur(s.Floor.P99), fmtRate(s.Floor.PerSec), s.FloorRatio())
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t\n", fmtDur(s.Router.SendRTT),
			s.Router.Misses+s.NATS.Misses+s.Floor.Misses, s.Setup.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	head = "sessions\trouter CPU/delivery\tNATS CPU/delivery\t"
	if r.Floor {
		head += "floor CPU/delivery\t"
	}
	head += "router/NATS\t"
	if r.Floor {
		head += "router/floor\t"
	}
	fmt.Fprintln(tw, head)
	for _, s := range r.Sizes {
		fmt.Fprintf(tw, "%d\t%s\t%s\t", s.Sessions, fmtCPU(s.Router, r.InProcess), fmtCPU(s.NATS, r.InProcess))
		if r.Floor {
			fmt.Fprintf(tw, "%s\t", fmtCPU(s.Floor, r.InProcess))
		}
		fmt.Fprintf(tw, "%.1f\t", cpuRatio(s.Router, s.NATS))
		if r.Floor {
			fmt.Fprintf(tw, "%.1f\t", cpuRatio(s.Router, s.Floor))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// Markdown renders the "## fan-out" section of bench/RESULTS.md.
func (r *Report) Markdown(env Environment) string {
	var b strings.Builder
	b.WriteString("## fan-out\n\n")
	b.WriteString("One `" + updateMethod + "` delivered to N subscribed sessions spread evenly over two\n" +
		"router instances (each session's GET stream open on its own loopback TCP connection, real\n" +
		"HTTP/1.1), side by side with raw NATS: the same payload bytes published on one subject to N\n" +
		"nats.go subscriptions spread over two connections to the same NATS server the routers use.\n")
	if r.Floor {
		b.WriteString("The TCP floor is the same event written by one goroutine to N plain TCP connections, one\n" +
			"write each (no HTTP, no session): what any server must spend when every client holds a\n" +
			"connection of its own, as MCP GET streams do.\n")
	}
	b.WriteString("Generated by the command below (this section is replaced on every run; notes that should\n" +
		"survive go in another section). Command:\n\n")
	b.WriteString("    " + env.Command + "\n\n")
	cols := []string{"sessions", "router p50", "router p99", "router deliveries/s", "NATS p50", "NATS p99",
		"NATS deliveries/s", "router/NATS deliveries/s"}
	if r.Floor {
		cols = append(cols, "TCP floor p50", "TCP floor p99", "TCP floor deliveries/s", "router/floor deliveries/s")
	}
	writeHeader(&b, append(cols, "touch RTT p50", "misses"))
	for _, s := range r.Sizes {
		row := []string{strconv.Itoa(s.Sessions), fmtDur(s.Router.P50), fmtDur(s.Router.P99), fmtRate(s.Router.PerSec),
			fmtDur(s.NATS.P50), fmtDur(s.NATS.P99), fmtRate(s.NATS.PerSec), fmt.Sprintf("%.2f", s.Ratio())}
		if r.Floor {
			row = append(row, fmtDur(s.Floor.P50), fmtDur(s.Floor.P99), fmtRate(s.Floor.PerSec), fmt.Sprintf("%.2f", s.FloorRatio()))
		}
		writeRow(&b, append(row, fmtDur(s.Router.SendRTT), strconv.Itoa(s.Router.Misses+s.NATS.Misses+s.Floor.Misses)))
	}
	cpuHead := "servers + clients"
	if r.InProcess {
		cpuHead = "one process"
	}
	b.WriteString("\nCPU time per delivery (" + cpuHead + "):\n\n")
	cols = []string{"sessions", "router", "NATS", "router/NATS"}
	if r.Floor {
		cols = []string{"sessions", "router", "NATS", "TCP floor", "router/NATS", "router/floor"}
	}
	writeHeader(&b, cols)
	for _, s := range r.Sizes {
		router, nats, ratio := fmtCPU(s.Router, r.InProcess), fmtCPU(s.NATS, r.InProcess), fmt.Sprintf("%.1f", cpuRatio(s.Router, s.NATS))
		row := []string{strconv.Itoa(s.Sessions), router, nats, ratio}
		if r.Floor {
			row = []string{strconv.Itoa(s.Sessions), router, nats, fmtCPU(s.Floor, r.InProcess), ratio,
				fmt.Sprintf("%.1f", cpuRatio(s.Router, s.Floor))}
		}
		writeRow(&b, row)
	}
	ratioOK, p99OK, p99Measured := r.TargetsMet()
	b.WriteString("\nTargets: router/NATS deliveries/s at least " + strconv.FormatFloat(TargetRatio, 'f', -1, 64) +
		" at every size: " + metWord(ratioOK) + "; router p99 at " + strconv.Itoa(TargetP99Sessions) +
		" sessions under " + TargetP99.String() + ": ")
	if p99Measured {
		b.WriteString(metWord(p99OK))
	} else {
		b.WriteString("not measured in this run")
	}
	if cpuOK, fp99OK, cpuMeasured, fp99Measured, notes := r.FloorTargetsMet(); cpuMeasured || fp99Measured {
		fmt.Fprintf(&b, ".\nAgainst the TCP floor (issue 15): router/floor CPU per delivery at most %.2f at %s sessions: %s;"+
			" router p99 at %d sessions at most %.1fx the floor's: %s (%s)",
			TargetFloorCPU, joinInts(TargetFloorSizes), floorWord(cpuOK, cpuMeasured), TargetP99Sessions, TargetFloorP99,
			floorWord(fp99OK, fp99Measured), strings.Join(notes, ", "))
	}
	b.WriteString(".\n\nHow it is measured:\n")
	fmt.Fprintf(&b, "- Per size, %d warm-up update(s), then %d measured updates, one at a time, alternating\n"+
		"  router and NATS update by update (so both see the same background load), with a pause\n"+
		"  between updates. Sessions and subscriptions are added from one size to the next.\n", r.Warmup, r.Updates)
	b.WriteString("- Router: t0 is taken just before one session POSTs `tools/call touch`; the reference backend\n" +
		"  then notifies its one upstream subscription (held by one instance), that instance publishes\n" +
		"  the update once on NATS, and both instances write it to their sessions' GET streams. Latency\n" +
		"  is receipt - t0, so it includes the touch call's way in (client -> router -> backend); the\n" +
		"  call's whole round trip is the \"touch RTT\" column (median).\n" +
		"- NATS: t0 is taken just before `Publish` on a third connection.\n" +
		"- p50/p99 are over every delivery of the measured updates (N x updates values, nearest rank);\n" +
		"  deliveries/s of one update is N / (last receipt - t0), and the table shows the median over\n" +
		"  the updates. A receipt missing when the update's wait ended (bounded) is a miss.\n" +
		"- CPU/delivery is the CPU time (user + system, getrusage) of the servers' process and of the\n" +
		"  clients' process from just before each update until after the pause that follows it,\n" +
		"  divided by the deliveries. On a shared machine latencies and rates depend on what else\n" +
		"  runs; CPU per delivery much less, so it is the steadier figure to compare. At small N\n" +
		"  it is mostly background work during the pause (timers, lease heartbeats), not delivery.\n")
	if r.Floor {
		b.WriteString("- The TCP floor is measured after the router and NATS sizes, with the GET streams closed\n" +
			"  (one process may not hold both sets of sockets); same warm-up, updates and pause.\n")
	}
	fmt.Fprintf(&b, "- Machine: %s.\n  GOMAXPROCS %d. Clients, routers, the NATS server and the backend share those cores; the\n"+
		"  raw NATS side runs under the same conditions (same processes, same moment).\n", env.Machine, r.GOMAXPROCS)
	fmt.Fprintf(&b, "- Servers (backend, both routers, embedded NATS, TCP floor) ran in %s;\n  RLIMIT_NOFILE %d.", env.Servers, env.FileLimit)
	if env.Persist {
		b.WriteString(" Router defaults, session records and the GET stream event log in\n  JetStream included.\n")
	} else {
		b.WriteString(" Routers with sessions.no_persist (no session records, no event log\n  in JetStream).\n")
	}
	fmt.Fprintf(&b, "- Payload (%d bytes): `%s`.\n", len(r.Payload), r.Payload)
	fmt.Fprintf(&b, "- Router counters at the end: %d updates handed to sessions, %d slow consumers cut off,\n"+
		"  upstream subscriptions per instance %v; GET streams ended early: %d; stray deliveries: %d.\n",
		r.Server.FanOut, r.Server.SlowConsumers, r.Server.Upstream, r.StreamErrors, r.Stray)
	fmt.Fprintf(&b, "- Whole run: %v.\n", r.Duration.Round(time.Second))
	return b.String()
}

// writeHeader writes a Markdown table's header row and its separator; every column
// holds a figure, so every column is right-aligned.
func writeHeader(b *strings.Builder, cols []string) {
	writeRow(b, cols)
	b.WriteString(strings.Repeat("|---:", len(cols)) + "|\n")
}

// writeRow writes one Markdown table row.
func writeRow(b *strings.Builder, cells []string) {
	for _, c := range cells {
		b.WriteString("| " + c + " ")
	}
	b.WriteString("|\n")
}

// floorWord is metWord for a target that may not have been measured.
func floorWord(ok, measured bool) string {
	if !measured {
		return "not measured in this run"
	}
	return metWord(ok)
}

// joinInts spells sizes as "1000 and 10000".
func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

func metWord(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

// fmtDur prints a latency with a precision that suits its size.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + " µs"
	case d < 100*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
	default:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64) + " ms"
	}
}

// fmtCPU prints a side's CPU time per delivery: servers + clients, or the one process's
// total when both ends share it.
func fmtCPU(r Result, inProcess bool) string {
	us := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) }
	if inProcess {
		return us(r.ServerCPU) + " µs"
	}
	return us(r.ServerCPU) + " + " + us(r.ClientCPU) + " µs"
}

// fmtRate prints deliveries per second with thousands separators.
func fmtRate(v float64) string {
	n := int64(v + 0.5)
	s := strconv.FormatInt(n, 10)
	var b []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}
