package compare

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/report"
)

// SectionHeading is the heading of the section Markdown renders.
const SectionHeading = "## compare"

// Markdown renders the "## compare" section of bench/RESULTS.md. reportsLink is the path
// of Options.ReportsDir relative to the results file ("reports"); empty means the reports
// were not kept and are not named.
func (r *Result) Markdown(reportsLink string) string {
	o := r.Options
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("%s\n\n", SectionHeading)
	w("Side by side on one machine in one run: `%s` (package `bench/compare`) builds mcpload, "+
		"mcpbackend, mcprouter and the peer servers (`bench/peers`, a module of its own so that the "+
		"router does not depend on them), starts every server as a process on 127.0.0.1 and measures "+
		"each with mcpload under the same load: `tools/call echo` with `%s`, %d sessions, closed loop "+
		"(every session sends its next call as soon as the previous one is answered), %s warm-up then "+
		"%s measured, %d round(s), the order reversed in every other round; figures are medians over "+
		"the rounds and ratios are taken within a round. This section is generated: re-running the "+
		"command replaces it and leaves the other sections alone.\n\n",
		r.commandLine(), o.Args, o.Sessions, o.Warmup, o.Duration, o.Rounds)
	if o.Quick {
		w("**This was a -quick run** (short windows, one round): a smoke test of the harness, not figures to quote.\n\n")
	}
	w("Run %s, took %s.\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Elapsed.Round(time.Second))

	m := r.Machine
	w("**Machine.** %d CPUs (%s), %s, %s. Load average %s at the start, %s at the end. ",
		m.CPUs, m.Model, nonEmpty(m.Kernel, "unknown OS"), m.GoVersion, nonEmpty(m.LoadStart, "?"), nonEmpty(m.LoadEnd, "?"))
	if r.LoadCPUs != "" {
		w("mcpload was pinned to CPU %s and every server to CPU %s with `taskset` (%s), so the load generator and the servers did not take each other's "+
			"CPU time; they still share the machine (caches, memory, the kernel's loopback path). Through "+
			"the router, mcprouter and mcpbackend share the server CPU%s: the hop is paid out of the same "+
			"CPU budget the backend alone had. ", r.LoadCPUs, r.ServerCPUs, r.gomaxprocsNote(), plural(r.ServerCPUs))
	} else {
		w("Nothing was pinned (no taskset, or -nopin): the load generator and the servers shared every CPU. ")
	}
	w("The server CPU per call is read from /proc around each run (user + system time of the server " +
		"processes divided by the calls, warm-up included); on a shared machine it moves much less " +
		"than throughput does. \"Other processes\" is the share of the server CPU(s) and of mcpload's CPU(s) " +
		"that processes other than the ones measured used during the run (/proc/stat busy time minus ours): " +
		"what the rest of the machine took from that run. Neither figure includes softirq time, the kernel's " +
		"processing of loopback packets, which Linux charges to no process (it adds a few µs per call on " +
		"each side).\n\n")

	r.closedTable(&b, reportsLink)
	r.goalsTable(&b)
	r.openTable(&b, reportsLink)
	r.loadCost(&b)
	r.codecTable(&b)
	r.profileSection(&b)
	r.commands(&b, reportsLink)
	if len(r.Warnings) > 0 {
		w("### Warnings\n\n")
		for _, x := range r.Warnings {
			w("- %s\n", x)
		}
		w("\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

func (r *Result) gomaxprocsNote() string {
	if n := r.Options.ServerGOMAXPROCS; n > 0 {
		return fmt.Sprintf("servers run with GOMAXPROCS=%d", n)
	}
	return "Go sizes GOMAXPROCS to the CPUs a process may use: " + strconv.Itoa(len(parseCPUList(r.ServerCPUs))) + " for the servers"
}

func (r *Result) commandLine() string {
	o := r.Options
	parts := []string{"go run ./bench/cmd/compare"}
	if o.Quick {
		parts = append(parts, "-quick")
	}
	parts = append(parts, "-duration", o.Duration.String(), "-warmup", o.Warmup.String(),
		"-sessions", strconv.Itoa(o.Sessions), "-rounds", strconv.Itoa(o.Rounds))
	if o.OpenSessions != 4*o.Sessions {
		parts = append(parts, "-open-sessions", strconv.Itoa(o.OpenSessions))
	}
	if len(o.Targets) > 0 {
		parts = append(parts, "-targets", strings.Join(o.Targets, ","))
	}
	if o.Profile {
		parts = append(parts, "-profile")
	}
	if o.NoPin {
		parts = append(parts, "-nopin")
	}
	if o.ServerGOMAXPROCS > 0 {
		parts = append(parts, "-server-gomaxprocs", strconv.Itoa(o.ServerGOMAXPROCS))
	}
	return strings.Join(parts, " ")
}

func (r *Result) closedTable(b *strings.Builder, reportsLink string) {
	fmt.Fprintf(b, "### Closed loop, %d sessions\n\n", r.Options.Sessions)
	b.WriteString("| target | server | throughput (calls/s) | per round | p50 | p99 | server CPU per call | server CPU busy | mcpload CPU | mcpload waited for a CPU | other processes on the server / mcpload CPU | errors | report |\n")
	b.WriteString("|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	var bound []string
	for _, t := range r.Closed {
		if !t.Measured() {
			fmt.Fprintf(b, "| %s | %s | %s | | | | | | | | | | |\n", t.Name, t.Label, notMeasured(t))
			continue
		}
		var rounds []string
		for i := range t.Runs {
			rounds = append(rounds, formatRate(t.Runs[i].CallsPerSecond()))
		}
		tput := formatRate(t.Throughput())
		if t.GeneratorCPU() >= generatorBoundPct*float64(max(1, len(parseCPUList(r.LoadCPUs)))) {
			tput += " (mcpload-bound)"
			bound = append(bound, t.Name)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %.0f%% | %.0f%% | %s | %d | %s |\n",
			t.Name, t.Label, tput, strings.Join(rounds, ", "),
			report.FormatUS(t.P50()), report.FormatUS(t.P99()), cpuCell(t), r.busyCell(t), t.GeneratorCPU(), t.GeneratorWait(),
			otherCell(t), t.Errors(), reportFiles(t, reportsLink))
	}
	b.WriteString("\n")
	if len(bound) > 0 {
		fmt.Fprintf(b, "**mcpload-bound:** %s: mcpload ran at %.0f%% or more of its CPU: the load generator, not "+
			"the server, set that rate, so it is a lower bound of what the server can do, and so is every ratio "+
			"with it in the numerator (and an upper bound with it in the denominator). The \"server CPU per call\" "+
			"ratios below do not have this limit.\n\n", strings.Join(bound, " and "), generatorBoundPct)
	}
	untrusted := 0
	for _, t := range r.Closed {
		untrusted += t.Untrusted()
	}
	r.cpuBound(b)
	if r.measuredClosed(TargetRouterPipelined) != nil {
		fmt.Fprintf(b, "%s is the same router with `pipeline: %d` on its backend: HTTP/1.1 pipelining over %d "+
			"connections, so that calls arriving together share one write and their replies one read, on the "+
			"backend's side too, for every call. The default router pipelines only the calls known to be short "+
			"(`pipeline: auto`) because a slow call delays the calls queued behind it on its connection (see "+
			"README, \"Pipelining\").\n\n", TargetRouterPipelined, benchPipeline, benchPipeline)
	}
	b.WriteString("The stub runs once (round 1): it calibrates mcpload, it is not a server under test. ")
	if untrusted > 0 {
		fmt.Fprintf(b, "mcpload flagged %d closed-loop run(s) as not trustworthy (its threads waited for a CPU, "+
			"or it was saturated): their latencies include queueing in the generator, which is what "+
			"\"waited for a CPU\" measures; throughputs are still the calls completed.", untrusted)
	}
	b.WriteString("\n\n")
}

// cpuBound explains the router/direct ratio from the server CPU per call, which decides it
// whenever the servers' CPU is the bottleneck.
func (r *Result) cpuBound(b *strings.Builder) {
	d, rt := r.measuredClosed(TargetDirect), r.measuredClosed(TargetRouter)
	if d == nil || rt == nil || len(rt.Servers) != 2 {
		return
	}
	direct, router, backend := d.ServerCPUPerOp(0), rt.ServerCPUPerOp(0), rt.ServerCPUPerOp(1)
	if direct == 0 || router == 0 || backend == 0 {
		return
	}
	where := "the same CPU budget"
	if r.ServerCPUs != "" {
		where = "CPU " + r.ServerCPUs
	}
	fmt.Fprintf(b, "Server CPU per call: mcpbackend alone %.1f µs; through the router %.1f µs (mcprouter %.1f µs + mcpbackend %.1f µs). "+
		"With both paths on %s, the router path can reach at most %.2fx the direct rate when that CPU is the bottleneck "+
		"(%.1f / %.1f); for the 0.6x goal mcprouter would have to cost at most %.1f µs per call, %.2fx the backend's own cost. ",
		direct, router+backend, router, backend, where, direct/(router+backend), direct, router+backend,
		direct/goalRouterVsDirect-backend, (direct/goalRouterVsDirect-backend)/direct)
}

// generatorBoundPct is mcpload's CPU (percent of one of its CPUs) from which a closed-loop
// rate is taken to be set by the generator rather than by the server.
const generatorBoundPct = 90.0

// busyCell is how busy the target's servers kept the server CPUs: throughput times server
// CPU per call, in percent of the server CPUs (of one CPU when not pinned). Near 100% the
// servers were the bottleneck.
func (r *Result) busyCell(t *TargetResult) string {
	c := t.serverCPUPerCall()
	if c == 0 {
		return "?"
	}
	n := max(1, len(parseCPUList(r.ServerCPUs)))
	return fmt.Sprintf("%.0f%%", t.Throughput()*c/1e6/float64(n)*100)
}

// otherCell renders the median share of the server and load CPUs other processes took.
func otherCell(t *TargetResult) string {
	known := false
	for i := range t.Runs {
		if !math.IsNaN(t.Runs[i].OtherServerPct) || !math.IsNaN(t.Runs[i].OtherLoadPct) {
			known = true
		}
	}
	if !known {
		return "-"
	}
	srv := t.median(func(r *LoadRun) float64 { return r.OtherServerPct })
	load := t.median(func(r *LoadRun) float64 { return r.OtherLoadPct })
	return fmt.Sprintf("%.0f%% / %.0f%%", srv, load)
}

// cpuCell renders the server CPU per call, split per process when there are several.
func cpuCell(t *TargetResult) string {
	var parts []string
	total := 0.0
	for i, s := range t.Servers {
		v := t.ServerCPUPerOp(i)
		if v == 0 {
			return "?"
		}
		total += v
		parts = append(parts, fmt.Sprintf("%s %.1f µs", s, v))
	}
	if len(parts) == 1 {
		return fmt.Sprintf("%.1f µs", total)
	}
	return fmt.Sprintf("%.1f µs (%s)", total, strings.Join(parts, " + "))
}

// reportFiles names the target's report files. They are not links: the reports are
// generated output, not kept in git, and a link would point at nothing in a fresh clone;
// the section's last paragraph gives the command that writes them.
func reportFiles(t *TargetResult, reportsLink string) string {
	if reportsLink == "" || t.ReportHTML == "" {
		return ""
	}
	return fmt.Sprintf("`%s` `%s`", path.Join(reportsLink, t.ReportHTML), path.Join(reportsLink, t.ReportJSON))
}

func (r *Result) goalsTable(b *strings.Builder) {
	if len(r.Goals) == 0 {
		return
	}
	b.WriteString("### Goals\n\n")
	b.WriteString("| goal | measured | per round | target | result | from server CPU per call | note |\n|---|---:|---|---|---|---:|---|\n")
	for _, g := range r.Goals {
		var per []string
		for _, v := range g.PerRound {
			per = append(per, formatGoalValue(v, g.Unit))
		}
		op := "<="
		if g.AtLeast {
			op = ">="
		}
		res := g.Margin()
		if !g.Met {
			res = "**" + res + "**"
		}
		cpu := ""
		if g.CPURatio > 0 {
			cpu = formatGoalValue(g.CPURatio, g.Unit)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s %s | %s | %s | %s |\n", g.Name, formatGoalValue(g.Measured, g.Unit),
			strings.Join(per, ", "), op, formatGoalValue(g.Limit, g.Unit), res, cpu, g.Note)
	}
	b.WriteString("\n\"From server CPU per call\" is the same comparison made with the servers' CPU time per call " +
		"(the other side's divided by this side's): the throughput ratio the two would show if each had the " +
		"server CPU to itself and mcpload were never the bottleneck. It is much steadier than the throughputs " +
		"on a shared machine, but it leaves out the latency-bound cases (a server that idles between calls).\n\n")
}

func formatGoalValue(v float64, unit string) string {
	switch unit {
	case "x":
		return fmt.Sprintf("%.2fx", v)
	case "µs":
		if v < 0 {
			return "-" + report.FormatUS(-v)
		}
		return report.FormatUS(v)
	case "%":
		return fmt.Sprintf("%.0f%%", v)
	}
	return trimFloat(v)
}

func (r *Result) openTable(b *strings.Builder, reportsLink string) {
	for _, set := range r.Open {
		frac := 100 * r.Options.OpenLoadFraction
		basis := "the direct"
		if set.Basis == TargetRouter {
			basis = "the router's"
		}
		fmt.Fprintf(b, "### Open loop at %.0f%% of %s maximum\n\n", frac, basis)
		switch set.Basis {
		case TargetDirect:
			fmt.Fprintf(b, "Arrivals at a constant %s calls/s (%.0f%% of mcpbackend's closed-loop median), the load of the "+
				"p99 goal, sent whether or not earlier calls have returned; latency is measured from each call's "+
				"intended send time (corrected for coordinated omission), so a server that cannot keep up shows its "+
				"queue in the percentiles. The arrivals are carried by %d sessions, more than the closed loop's %d: a "+
				"session carries one call at a time, so the pool must hold every call in flight, or the generator "+
				"would be the bottleneck (\"late sends\" says when it was).%s\n\n",
				formatRate(set.Rate), frac, r.Options.OpenSessions, r.Options.Sessions, r.openGOMAXPROCSNote(set))
		case TargetRouter:
			fmt.Fprintf(b, "Both again at %s calls/s, %.0f%% of the router's own closed-loop median: the same load on both "+
				"sides, meant to leave both unsaturated so that the difference is the latency of the hop itself. Check "+
				"\"server CPU busy\": below saturation every call pays its own wake-ups (fewer calls share an epoll "+
				"wake-up or a thread switch), so the CPU per call is higher than in the closed loop, and a path "+
				"near 100%% is queueing again.\n\n", formatRate(set.Rate), frac)
		}
		b.WriteString("| target | achieved (calls/s) | p50 | p90 | p99 | p99 per round | p99.9 | late sends | server CPU per call | server CPU busy | other processes on the server / mcpload CPU | errors | report |\n")
		b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---|---:|---:|---:|---|\n")
		for _, t := range set.Targets {
			if !t.Measured() {
				fmt.Fprintf(b, "| %s | %s | | | | | | | | | | | |\n", t.Name, notMeasured(t))
				continue
			}
			var p99s []string
			for i := range t.Runs {
				p99s = append(p99s, report.FormatUS(t.Runs[i].Report.Latency.P99))
			}
			p90 := t.median(func(x *LoadRun) float64 { return x.Report.Latency.P90 })
			p999 := t.median(func(x *LoadRun) float64 { return x.Report.Latency.P999 })
			late := t.median(func(x *LoadRun) float64 { return x.Report.Generator.LatePct })
			fmt.Fprintf(b, "| %s (%s) | %s | %s | %s | %s | %s | %s | %.2f%% | %s | %s | %s | %d | %s |\n", t.Name, t.Label, formatRate(t.Throughput()),
				report.FormatUS(t.P50()), report.FormatUS(p90), report.FormatUS(t.P99()), strings.Join(p99s, ", "),
				report.FormatUS(p999), late, cpuCell(t), r.busyCell(t), otherCell(t), t.Errors(), reportFiles(t, reportsLink))
		}
		b.WriteString("\n")
		if d, rt := set.target(TargetDirect), set.target(TargetRouter); d.Measured() && rt.Measured() {
			fmt.Fprintf(b, "p99 through the router minus p99 direct: %s (median of the rounds' differences); p50: %s.\n\n",
				signedUS(rt.P99()-d.P99()), signedUS(rt.P50()-d.P50()))
		}
	}
}

// openGOMAXPROCSNote explains the GOMAXPROCS=2 of the open-loop mcpload runs, if used.
func (r *Result) openGOMAXPROCSNote(set *OpenSet) string {
	for _, t := range set.Targets {
		for i := range t.Runs {
			if len(t.Runs[i].Env) > 0 {
				return " mcpload ran these with GOMAXPROCS=2 on its one CPU: its pacer sleeps in a blocking " +
					"nanosleep system call, and with a single P the goroutines reading the replies wait until " +
					"the Go runtime's sysmon takes the P back, a delay that would land in every latency (see " +
					"\"compare notes\")."
			}
		}
	}
	return ""
}

func signedUS(v float64) string {
	if v < 0 {
		return "-" + report.FormatUS(-v)
	}
	return "+" + report.FormatUS(v)
}

// runEntry is a target with the key of its open-loop set ("" for closed loop).
type runEntry struct {
	key string
	t   *TargetResult
}

// allRuns lists the closed-loop targets, then the open-loop ones with their set's key.
func (r *Result) allRuns() []runEntry {
	var out []runEntry
	for _, t := range r.Closed {
		out = append(out, runEntry{"", t})
	}
	for _, s := range r.Open {
		for _, t := range s.Targets {
			out = append(out, runEntry{s.Key, t})
		}
	}
	return out
}

func (r *Result) loadCost(b *strings.Builder) {
	stub := r.measuredClosed(TargetStub)
	if stub == nil {
		return
	}
	g := stub.Runs[0].Report.Generator
	b.WriteString("### mcpload's own cost\n\n")
	fmt.Fprintf(b, "Against `mcpload stub` (a fasthttp endpoint answering every call with a fixed reply) "+
		"mcpload completed %s calls/s using %.0f%% of a CPU on average (peak %.0f%%; 100%% = one core), "+
		"%.1f µs of its own CPU per call, i.e. about %s calls/s if it had one core to itself. "+
		"Its threads waited for a CPU %.0f%% of the time. The stub itself used %s per call on the server CPU. "+
		"Across the runs above, mcpload's CPU per call was:\n\n",
		formatRate(stub.Throughput()), g.CPUAvgPct, g.CPUMaxPct, g.CPUPerOpUS, formatRate(safeDiv(1e6, g.CPUPerOpUS)),
		g.RunqueueWaitPct, cpuCell(stub))
	b.WriteString("| run | mcpload CPU per call (median) | calls/s that would be on one core |\n|---|---:|---:|\n")
	for _, e := range r.allRuns() {
		t := e.t
		if !t.Measured() {
			continue
		}
		c := t.median(func(x *LoadRun) float64 { return x.Report.Generator.CPUPerOpUS })
		name := t.Name
		if e.key != "" {
			name = e.key + " " + name
		}
		fmt.Fprintf(b, "| %s | %.1f µs | %s |\n", name, c, formatRate(safeDiv(1e6, c)))
	}
	b.WriteString("\n")
}

func (r *Result) codecTable(b *strings.Builder) {
	if len(r.Codec) == 0 {
		return
	}
	b.WriteString("### Codec envelope micro-benchmarks\n\n")
	fmt.Fprintf(b, "`%s` (run after the load runs, with the servers stopped). Medians of the runs; "+
		"`cpu-ns/op` is the benchmark thread's CPU time, which descheduling does not inflate; "+
		"\"codec faster by\" divides the library's cpu-ns/op by the codec's (see the codec section for "+
		"what each library validates).\n\n", r.CodecCommand)
	b.WriteString("| message | library | ns/op (wall) | cpu-ns/op | B/op | allocs/op | codec faster by |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Codec {
		m := row.Summary.Metrics
		speed := ""
		if row.Speedup > 0 && row.Lib != "codec" {
			speed = fmt.Sprintf("%.1fx", row.Speedup)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.Message, row.Lib, metric(m, "ns/op"),
			metric(m, "cpu-ns/op"), metric(m, "B/op"), metric(m, "allocs/op"), speed)
	}
	b.WriteString("\n")
}

func metric(m map[string]float64, unit string) string {
	v, ok := m[unit]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func (r *Result) profileSection(b *strings.Builder) {
	p := r.Profile
	if p == nil {
		return
	}
	b.WriteString("### Router CPU profile\n\n")
	fmt.Fprintf(b, "An extra closed-loop run through the router (not in the figures above; %s calls/s while profiled), "+
		"with a %d s CPU profile of the mcprouter process taken from its admin listener (`admin.pprof: true`): "+
		"`%s`. Percentages are of the profiled CPU time of the router process.\n\n", formatRate(p.Throughput), p.Seconds, p.Command)
	b.WriteString("By flat time:\n\n```\n" + p.Top + "```\n\nBy cumulative time:\n\n```\n" + p.TopCum + "```\n\n")
}

func (r *Result) commands(b *strings.Builder, reportsLink string) {
	b.WriteString("### Commands\n\n")
	b.WriteString("What the harness ran (binaries built into a temporary directory; `URL` is each server's " +
		"endpoint on an ephemeral loopback port, which the servers print once they listen):\n\n```\n")
	fmt.Fprintf(b, "%s\n", r.commandLine())
	for _, c := range r.Builds {
		fmt.Fprintf(b, "%s\n", c)
	}
	srvPin, loadPin := "", ""
	if r.ServerCPUs != "" {
		srvPin, loadPin = "taskset -c "+r.ServerCPUs+" ", "taskset -c "+r.LoadCPUs+" "
	}
	for _, s := range r.Servers {
		fmt.Fprintf(b, "%s%s    # %s\n", srvPin, shellJoin(s.Argv), s.Name)
	}
	if r.Servers != nil {
		for _, s := range r.Servers {
			if isRouter(s.Name) {
				fmt.Fprintf(b, "# %s.yaml:\n%s", s.Name, indentLines(routerConfig(s.Name, "URL-of-mcpbackend", r.Options.Profile), "#   "))
			}
		}
	}
	// One line per distinct command, naming every target it was run against.
	var lines []string
	users := map[string][]string{}
	for _, e := range r.allRuns() {
		t := e.t
		if len(t.Runs) == 0 {
			continue
		}
		line := loadPin + shellJoin(slicesReplaceURL(t.Runs[0].Argv)) + " --json F.json --html F.html --quiet"
		if len(t.Runs[0].Env) > 0 {
			line = strings.Join(t.Runs[0].Env, " ") + " " + line
		}
		if _, ok := users[line]; !ok {
			lines = append(lines, line)
		}
		name := t.Name
		if e.key != "" {
			name = e.key + " " + name
		}
		users[line] = append(users[line], name)
	}
	for _, line := range lines {
		fmt.Fprintf(b, "%s    # %s\n", line, strings.Join(users[line], ", "))
	}
	if r.CodecCommand != "" {
		fmt.Fprintf(b, "%s\n", r.CodecCommand)
	}
	b.WriteString("```\n\n")
	if reportsLink != "" {
		fmt.Fprintf(b, "The HTML and JSON reports of the run closest to each target's median (the \"report\" "+
			"column) are written to `%s/` next to this file by the command at the top of this section; they are "+
			"generated output, not kept in git, so run the command to get them. Any two can be put side by "+
			"side, for example `mcpload compare %s %s`.\n\n",
			reportsLink, path.Join("bench", reportsLink, "direct.json"), path.Join("bench", reportsLink, "router.json"))
	}
}

// slicesReplaceURL shows the --url value as URL (the port differs on every run).
func slicesReplaceURL(argv []string) []string {
	out := append([]string(nil), argv...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "--url" {
			out[i+1] = "URL"
		}
	}
	return out
}

// shellJoin quotes the arguments that need it for a POSIX shell.
func shellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\"'{}$*?[]|&;<>()\\`!#~") {
			parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			parts[i] = a
		}
	}
	return strings.Join(parts, " ")
}

func indentLines(s, prefix string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + line + "\n")
	}
	return b.String()
}

// formatRate renders a rate with thousands separators ("47,988").
func formatRate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	n := int64(math.Round(v))
	neg := n < 0
	if neg {
		n = -n
	}
	s := strconv.FormatInt(n, 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func safeDiv(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func plural(cpuList string) string {
	if strings.Contains(cpuList, ",") {
		return "s"
	}
	return ""
}

// notMeasured fills the row of a target without a successful call: its runs failed, or
// it had none.
func notMeasured(t *TargetResult) string {
	if n := t.Errors(); n > 0 {
		return fmt.Sprintf("no successful call (%d failed calls)", n)
	}
	return "not measured"
}

// measuredClosed returns the closed-loop result of a target, nil if it was not
// measured.
func (r *Result) measuredClosed(name string) *TargetResult {
	for _, t := range r.Closed {
		if t.Name == name && t.Measured() {
			return t
		}
	}
	return nil
}
