package scale

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"
)

// Report is what a run measured.
type Report struct {
	Sessions int // asked for
	Protocol string
	Persist  bool
	// SessionStorage is where the records were kept ("": the router's default).
	SessionStorage string `json:",omitempty"`

	Held, Failed   int
	FirstOpenError string `json:",omitempty"`
	// OpenTime is the first dial of any loader to the last session held.
	OpenTime time.Duration

	// The updates: receipts at the held sessions (all updates together), latency from
	// the trigger call; and each update's own.
	Received, Missing, Duplicates int64
	P50, P99, Max                 time.Duration
	Updates                       []UpdateStats

	// The closed loop of tools/call while the sessions opened, and over the update.
	CallsSetup, CallsUpdate CallStats
	FirstCallError          string `json:",omitempty"`

	Routers, Loaders []ProcStats
	// Warnings counts the routers' logged warnings and errors by message.
	Warnings map[string]int `json:",omitempty"`
}

// UpdateStats are one update's receipts.
type UpdateStats struct {
	Received, Missing int64
	P50, P99, Max     time.Duration
}

// ProcStats are one process's figures.
type ProcStats struct {
	Name string
	// Sessions: a router's open streams (its metrics); a loader's sessions held.
	Sessions, Failed int
	// RSSBefore is a router's resident memory once warm and empty (0 for a loader);
	// RSSAfter is with the sessions held.
	RSSBefore, RSSAfter int64
	FDs                 int
	// CPU is the CPU time used over the update; Received the loader's receipts.
	CPU      time.Duration
	Received int64
	// OpenTime is a loader's time to open its sessions; OpenCPU the CPU time the
	// process used meanwhile, OpenSyscalls its system calls.
	OpenTime, OpenCPU time.Duration
	OpenSyscalls      sysc
}

// sysc counts a process's system calls of the read and write families (on Linux).
type sysc struct{ Reads, Writes int64 }

func (s sysc) minus(o sysc) sysc { return sysc{s.Reads - o.Reads, s.Writes - o.Writes} }

// per is s per opened session, as "reads, writes".
func (s sysc) per(n int) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f reads, %.2f writes", float64(s.Reads)/float64(n), float64(s.Writes)/float64(n))
}

// perSession is the memory per held session above the empty process.
func (p ProcStats) perSession() float64 {
	if p.Sessions <= 0 {
		return 0
	}
	return float64(p.RSSAfter-p.RSSBefore) / float64(p.Sessions)
}

// OpenRate is the sessions held per second of opening, all loaders together.
func (r *Report) OpenRate() float64 { return rate(r.Held, r.OpenTime) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// sum adds up the processes' figures.
func sum(ps []ProcStats, name string) ProcStats {
	t := ProcStats{Name: name}
	for _, p := range ps {
		t.Sessions += p.Sessions
		t.Failed += p.Failed
		t.RSSBefore += p.RSSBefore
		t.RSSAfter += p.RSSAfter
		t.FDs += p.FDs
		t.CPU += p.CPU
		t.OpenCPU += p.OpenCPU
		t.OpenSyscalls.Reads += p.OpenSyscalls.Reads
		t.OpenSyscalls.Writes += p.OpenSyscalls.Writes
		t.Received += p.Received
		t.OpenTime = max(t.OpenTime, p.OpenTime)
	}
	return t
}

// RouterCPUPerDelivery and LoaderCPUPerDelivery are the CPU time of the routers (of the
// loaders) over the update divided by the updates received.
func (r *Report) RouterCPUPerDelivery() time.Duration {
	return perDelivery(sum(r.Routers, "").CPU, r.Received)
}

// LoaderCPUPerDelivery: see RouterCPUPerDelivery.
func (r *Report) LoaderCPUPerDelivery() time.Duration {
	return perDelivery(sum(r.Loaders, "").CPU, r.Received)
}

func perDelivery(cpu time.Duration, n int64) time.Duration {
	if n <= 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

// WriteTable prints the report as Markdown tables.
func (r *Report) WriteTable(w io.Writer) error {
	streams := "GET streams"
	if r.Protocol >= "2026-07-28" {
		streams = "subscriptions/listen streams"
	}
	persist := "session records in JetStream"
	if r.SessionStorage != "" {
		persist += " (" + r.SessionStorage + " storage)"
	}
	if !r.Persist {
		persist = "no_persist"
	}
	fmt.Fprintf(w, "%d sessions asked, %d held (%d failed), %s (%s), %s; %d routers, %d loaders\n\n",
		r.Sessions, r.Held, r.Failed, streams, r.Protocol, persist, len(r.Routers), len(r.Loaders))
	if r.FirstOpenError != "" {
		fmt.Fprintf(w, "first failure to open: %s\n\n", r.FirstOpenError)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| process\t sessions\t RSS empty\t RSS held\t per session\t fds\t CPU per session opened\t CPU over the update\t CPU per delivery\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t---\t")
	row := func(p ProcStats, delivered int64) {
		before := "-"
		if p.RSSBefore > 0 {
			before = mib(p.RSSBefore)
		}
		fmt.Fprintf(tw, "| %s\t %d\t %s\t %s\t %s\t %d\t %s\t %v\t %s\t\n", p.Name, p.Sessions, before, mib(p.RSSAfter),
			kib(p.perSession()), p.FDs, us(perDelivery(p.OpenCPU, int64(p.Sessions))), p.CPU.Round(time.Millisecond), us(perDelivery(p.CPU, delivered)))
	}
	for _, p := range r.Routers {
		row(p, int64(p.Sessions)*r.Received/max(int64(r.Held), 1))
	}
	row(sum(r.Routers, "routers"), r.Received)
	for _, p := range r.Loaders {
		row(p, p.Received)
	}
	row(sum(r.Loaders, "loaders"), r.Received)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n- opening: %d sessions in %v: %.0f sessions/s (per loader:", r.Held, r.OpenTime.Round(time.Millisecond), r.OpenRate())
	for _, p := range r.Loaders {
		fmt.Fprintf(w, " %.0f", rate(p.Sessions, p.OpenTime))
	}
	fmt.Fprintln(w, ")")
	rt, ld := sum(r.Routers, ""), sum(r.Loaders, "")
	fmt.Fprintf(w, "- opening per CPU-second (what the code does on any machine): routers %.0f sessions/s (%s each), loaders %.0f/s (%s each)\n",
		perCPUSecond(rt.OpenCPU, r.Held), us(perDelivery(rt.OpenCPU, int64(r.Held))), perCPUSecond(ld.OpenCPU, r.Held), us(perDelivery(ld.OpenCPU, int64(r.Held))))
	fmt.Fprintf(w, "- system calls per opened session (/proc/PID/io syscr, syscw): routers %s; loaders %s\n",
		rt.OpenSyscalls.per(r.Held), ld.OpenSyscalls.per(r.Held))
	if len(r.Updates) <= 1 {
		fmt.Fprintf(w, "- one update: received by %d of %d (%d missing, %d duplicates); from the trigger call p50 %v, p99 %v, max %v\n",
			r.Received, r.Held, r.Missing, r.Duplicates, ms(r.P50), ms(r.P99), ms(r.Max))
	} else {
		fmt.Fprintf(w, "- %d updates: %d deliveries of %d (%d missing, %d duplicates); from the trigger calls p50 %v, p99 %v, max %v; each update's p99:",
			len(r.Updates), r.Received, int64(r.Held)*int64(len(r.Updates)), r.Missing, r.Duplicates, ms(r.P50), ms(r.P99), ms(r.Max))
		for _, u := range r.Updates {
			fmt.Fprintf(w, " %v", ms(u.P99))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "- CPU per delivery: routers %s, loaders %s (%.2fx the routers')\n", us(r.RouterCPUPerDelivery()), us(r.LoaderCPUPerDelivery()),
		ratio(r.LoaderCPUPerDelivery(), r.RouterCPUPerDelivery()))
	for _, ph := range []struct {
		name string
		st   CallStats
	}{{"while opening", r.CallsSetup}, {"over the update", r.CallsUpdate}} {
		fmt.Fprintf(w, "- calls %s: %d, %d errors, p50 %v, p99 %v, max %v\n", ph.name, ph.st.Calls, ph.st.Errors, ms(ph.st.P50), ms(ph.st.P99), ms(ph.st.Max))
	}
	if r.FirstCallError != "" {
		fmt.Fprintf(w, "- first failed call: %s\n", r.FirstCallError)
	}
	msgs := make([]string, 0, len(r.Warnings))
	for m := range r.Warnings {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool { return r.Warnings[msgs[i]] > r.Warnings[msgs[j]] })
	for _, m := range msgs {
		fmt.Fprintf(w, "- routers logged %d× %q\n", r.Warnings[m], m)
	}
	return nil
}

// perCPUSecond is how many of n one CPU-second would do at the cost cpu for all n.
func perCPUSecond(cpu time.Duration, n int) float64 {
	if cpu <= 0 {
		return 0
	}
	return float64(n) / cpu.Seconds()
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f KiB", b/1024)
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }

func ms(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
