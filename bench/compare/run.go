package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// Result is everything one comparison measured.
type Result struct {
	// Options are the effective options (defaults filled in).
	Options Options
	Started time.Time
	Elapsed time.Duration
	Machine Machine
	// LoadCPUs and ServerCPUs are the taskset CPU lists of the load generator and of the
	// servers; both empty when nothing was pinned.
	LoadCPUs, ServerCPUs string
	// Servers are the server processes started, with their command lines.
	Servers []ServerRecord
	// Builds are the build commands run.
	Builds []string
	// Closed are the closed-loop targets in measuring order.
	Closed []*TargetResult
	// Open are the open-loop sets: first at OpenLoadFraction of the direct maximum (the
	// goal's load), then at the same fraction of the router's own maximum (the same load
	// for both sides, relative to the slower one).
	Open []*OpenSet
	// Codec are the envelope micro-benchmark rows, CodecCommand how they were run.
	Codec        []EnvelopeRow
	CodecCommand string
	Goals        []Goal
	Profile      *Profile
	// Warnings are problems that did not stop the run (a failed load run, a figure
	// that could not be read).
	Warnings []string
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int // usable by this process
	Model     string
	Kernel    string
	GoVersion string
	// LoadStart and LoadEnd are the 1, 5 and 15 minute load averages.
	LoadStart, LoadEnd string
}

// ServerRecord is one server process as started.
type ServerRecord struct {
	Name string
	Argv []string // binary base name first
	URL  string   // its MCP endpoint
}

// LoadRun is one mcpload run against one target.
type LoadRun struct {
	Round int
	// Report is mcpload's JSON report.
	Report *report.Report
	// ServerCPU is the CPU time each of the target's servers used from the start to the
	// end of the mcpload process (same order as TargetResult.Servers); nil when unknown.
	ServerCPU []time.Duration
	// Ops is every operation mcpload completed, warm-up included: the denominator of the
	// per-operation server CPU.
	Ops int64
	// OtherServerPct and OtherLoadPct are the share of the server CPUs and of the load
	// generator's CPUs that other processes (not the target's servers, not mcpload) used
	// during the run, in percent of those CPUs; NaN when unknown (not pinned, no /proc).
	// They say how much a run was disturbed by whatever else ran on the machine.
	OtherServerPct, OtherLoadPct float64
	// Argv is the mcpload command line (binary base name first), Env the variables added
	// to its environment.
	Argv, Env  []string
	JSON, HTML string // raw reports in the work directory
}

// TargetResult is one target's runs.
type TargetResult struct {
	Name, Label string
	Family      string
	Servers     []string
	Runs        []LoadRun
	// ReportJSON and ReportHTML are the file names (in Options.ReportsDir) of the copied
	// reports of the run closest to the median; empty when not copied.
	ReportJSON, ReportHTML string
}

// Throughput is the median over the runs of the successful calls per second.
func (t *TargetResult) Throughput() float64 {
	return t.median((*LoadRun).CallsPerSecond)
}

// CallsPerSecond is the run's rate of successful calls. mcpload's throughput counts
// failed calls too: a target that answers every call with a quick error must not look
// fast.
func (r *LoadRun) CallsPerSecond() float64 {
	rep := r.Report
	if rep == nil || rep.Requests <= 0 {
		return 0
	}
	return rep.ThroughputRPS * float64(rep.Requests-rep.Errors) / float64(rep.Requests)
}

// sampled reports whether the run measured at least one successful call.
func (r *LoadRun) sampled() bool {
	return r.Report != nil && r.Report.Requests > r.Report.Errors && r.Report.Latency.Count > 0 && r.Report.ThroughputRPS > 0
}

// problem says why the run cannot back a goal (failed calls, nothing measured); "" when
// it can.
func (r *LoadRun) problem() string {
	switch {
	case r.Report != nil && r.Report.Errors > 0:
		return fmt.Sprintf("%d failed calls", r.Report.Errors)
	case !r.sampled():
		return "no successful call measured"
	}
	return ""
}

// P50 and P99 are medians over the runs of the corrected latency percentiles (µs).
func (t *TargetResult) P50() float64 {
	return t.median(func(r *LoadRun) float64 { return r.Report.Latency.P50 })
}

// P99 is the median over the runs of the corrected 99th percentile (µs).
func (t *TargetResult) P99() float64 {
	return t.median(func(r *LoadRun) float64 { return r.Report.Latency.P99 })
}

// ServerCPUPerOp is the median over the runs of server i's CPU microseconds per
// operation; 0 when unknown.
func (t *TargetResult) ServerCPUPerOp(i int) float64 {
	return t.median(func(r *LoadRun) float64 {
		if i >= len(r.ServerCPU) || r.Ops == 0 {
			return math.NaN()
		}
		return float64(r.ServerCPU[i].Microseconds()) / float64(r.Ops)
	})
}

// serverCPUPerCall is the total over the target's servers of ServerCPUPerOp; 0 when any
// is unknown.
func (t *TargetResult) serverCPUPerCall() float64 {
	total := 0.0
	for i := range t.Servers {
		v := t.ServerCPUPerOp(i)
		if v <= 0 {
			return 0
		}
		total += v
	}
	return total
}

// GeneratorCPU is the median over the runs of mcpload's average CPU (100 = one core).
func (t *TargetResult) GeneratorCPU() float64 {
	return t.median(func(r *LoadRun) float64 { return r.Report.Generator.CPUAvgPct })
}

// GeneratorWait is the median over the runs of the time mcpload's threads waited for a
// CPU, in percent of wall time.
func (t *TargetResult) GeneratorWait() float64 {
	return t.median(func(r *LoadRun) float64 { return r.Report.Generator.RunqueueWaitPct })
}

// Errors is the total of errors over the runs.
func (t *TargetResult) Errors() int64 {
	var n int64
	for i := range t.Runs {
		n += t.Runs[i].Report.Errors
	}
	return n
}

// Untrusted counts the runs mcpload flagged as not trustworthy.
func (t *TargetResult) Untrusted() int {
	n := 0
	for i := range t.Runs {
		if !t.Runs[i].Report.Generator.Trustworthy {
			n++
		}
	}
	return n
}

// Measured reports whether at least one run measured successful calls. A target whose
// runs all failed is not measured, however many runs it had.
func (t *TargetResult) Measured() bool {
	if t == nil {
		return false
	}
	for i := range t.Runs {
		if t.Runs[i].sampled() {
			return true
		}
	}
	return false
}

// problems lists, run by run, why the target's runs cannot back a goal; none when every
// run measured successful calls and none failed.
func (t *TargetResult) problems() []string {
	var out []string
	for i := range t.Runs {
		if p := t.Runs[i].problem(); p != "" {
			out = append(out, fmt.Sprintf("%s round %d: %s", t.Name, t.Runs[i].Round, p))
		}
	}
	return out
}

func (t *TargetResult) median(f func(*LoadRun) float64) float64 {
	var v []float64
	for i := range t.Runs {
		if x := f(&t.Runs[i]); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	return median(v)
}

// inRound returns the target's run of round r, or nil.
func (t *TargetResult) inRound(r int) *LoadRun {
	if t == nil {
		return nil
	}
	for i := range t.Runs {
		if t.Runs[i].Round == r {
			return &t.Runs[i]
		}
	}
	return nil
}

// OpenSet is one open-loop arrival rate and the targets measured at it.
type OpenSet struct {
	// Key prefixes the report file names ("open", "open-eq").
	Key string
	// Basis is the target whose closed-loop median the rate derives from.
	Basis string
	// Rate is the arrival rate (operations per second).
	Rate    float64
	Targets []*TargetResult
}

// target returns the set's result for name, or nil.
func (s *OpenSet) target(name string) *TargetResult {
	for _, t := range s.Targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Profile is the router's CPU profile taken during an extra closed-loop run.
type Profile struct {
	Seconds int
	// Throughput of the profiled run (not in the figures: profiling costs CPU).
	Throughput float64
	// Top and TopCum are `go tool pprof -top` listings sorted by flat and cumulative time.
	Top, TopCum string
	// Command is how the listings were produced.
	Command string
}

// harness carries the state of one Run.
type harness struct {
	o        Options
	res      *Result
	bin      string // directory of the built binaries
	work     string
	loadCPUs string // taskset lists; empty when not pinned
	srvCPUs  string
	loadSet  []int
	srvSet   []int
	procs    map[string]*proc
	started  []string // servers in the order they were started
	urls     map[string]string
	admin    string // the router's admin address
	// skipped: external servers that could not be had, with the reason.
	skipped map[string]error
	// Package installs are tried once per run (see external.go).
	aptTried, npmTried bool
	aptErr, npmErr     error
}

// selected reports whether target name is to be measured: selected in the options and
// none of its servers skipped.
func (h *harness) selected(name string) bool {
	if !h.o.selected(name) {
		return false
	}
	if t := targetByName(name); t != nil {
		for _, s := range t.servers {
			if h.skipped[s] != nil {
				return false
			}
		}
	}
	return true
}

// Run measures every selected target and returns the result. It starts and stops its own
// processes only; on an error every process it started is stopped before it returns.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := &Result{Options: o, Started: time.Now()}
	res.Machine = Machine{CPUs: runtime.NumCPU(), Model: cpuModel(), Kernel: kernelRelease(), LoadStart: loadAverage()}
	h := &harness{o: o, res: res, procs: map[string]*proc{}, urls: map[string]string{}, skipped: map[string]error{}}

	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "mcprouter-compare-")
		if err != nil {
			return nil, err
		}
		h.o.WorkDir = dir
		res.Options.WorkDir = dir
		if !o.KeepWork {
			defer os.RemoveAll(dir)
		}
	}
	h.work = h.o.WorkDir
	h.bin = filepath.Join(h.work, "bin")
	for _, d := range []string{h.bin, filepath.Join(h.work, "runs"), filepath.Join(h.work, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if gv, err := runCommand(ctx, o.Root, nil, "go", "env", "GOVERSION"); err == nil {
		res.Machine.GoVersion = strings.TrimSpace(string(gv))
	} else {
		res.Machine.GoVersion = runtime.Version()
	}
	h.pin()
	if err := h.build(ctx); err != nil {
		return nil, err
	}
	defer h.stopAll()
	if err := h.startServers(ctx); err != nil {
		return nil, err
	}
	if err := h.closedLoop(ctx); err != nil {
		return nil, err
	}
	if err := h.openLoop(ctx); err != nil {
		return nil, err
	}
	if o.Profile && h.selected(TargetRouter) {
		p, err := h.profileRouter(ctx)
		if err != nil {
			h.warn("router profile: %v", err)
		}
		res.Profile = p
	}
	h.stopAll() // the codec benchmarks run on a machine without our servers
	if !o.SkipCodec {
		if err := h.codec(ctx); err != nil {
			h.warn("codec benchmarks: %v", err)
		}
	}
	res.Goals = evaluate(res)
	if o.ReportsDir != "" {
		if err := h.copyReports(); err != nil {
			return nil, err
		}
	}
	res.Machine.LoadEnd = loadAverage()
	res.Elapsed = time.Since(res.Started)
	return res, ctx.Err()
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(h.o.Log, format+"\n", args...)
}

func (h *harness) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.res.Warnings = append(h.res.Warnings, msg)
	h.logf("warning: %s", msg)
}

// pin splits the CPUs between the load generator and the servers when taskset exists.
func (h *harness) pin() {
	if h.o.NoPin {
		return
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		h.logf("taskset not found: nothing is pinned")
		return
	}
	load, srv := splitCPUs(allowedCPUs())
	if len(load) == 0 {
		h.logf("fewer than 2 usable CPUs: nothing is pinned")
		return
	}
	h.loadSet, h.srvSet = load, srv
	h.loadCPUs, h.srvCPUs = formatCPUList(load), formatCPUList(srv)
	h.res.LoadCPUs, h.res.ServerCPUs = h.loadCPUs, h.srvCPUs
	h.logf("mcpload pinned to CPU %s, servers to CPU %s", h.loadCPUs, h.srvCPUs)
}

// build compiles the binaries the selected targets need.
func (h *harness) build(ctx context.Context) error {
	needPeers := false
	for _, t := range targets {
		if h.o.selected(t.name) && (t.family == familyGoSDK || t.family == familyMCPGo) {
			needPeers = true
		}
	}
	pkgs := []string{"./cmd/mcpload", "./cmd/mcpbackend", "./cmd/mcprouter"}
	if h.o.selected(TargetFastRelay) {
		pkgs = append(pkgs, "./bench/cmd/fastrelay")
	}
	main := append([]string{"go", "build", "-o", h.bin + string(filepath.Separator)}, pkgs...)
	h.logf("building: %s", strings.Join(main, " "))
	if _, err := runCommand(ctx, h.o.Root, nil, main...); err != nil {
		return err
	}
	h.res.Builds = append(h.res.Builds, "go build "+strings.Join(pkgs, " "))
	if needPeers {
		// The peers module is built on its own (GOWORK=off: a workspace must not pull
		// it into the main module's build list).
		peers := []string{"go", "build", "-o", filepath.Join(h.bin, binPeers), "."}
		h.logf("building the peers: (cd bench/peers && %s)", strings.Join(peers, " "))
		if _, err := runCommand(ctx, filepath.Join(h.o.Root, "bench", "peers"), []string{"GOWORK=off"}, peers...); err != nil {
			return err
		}
		h.res.Builds = append(h.res.Builds, "(cd bench/peers && go build -o peers .)")
	}
	return nil
}

// neededServers lists the servers of the selected targets, dependencies first.
func (h *harness) neededServers() []string {
	var out []string
	var add func(name string)
	add = func(name string) {
		if slices.Contains(out, name) {
			return
		}
		for _, dep := range serverByName(name).needs {
			add(dep)
		}
		out = append(out, name)
	}
	for _, t := range targets {
		if h.selected(t.name) {
			for _, s := range t.servers {
				add(s)
			}
		}
	}
	return out
}

// readyTimeout bounds a server's start-up (build caches are warm by then).
const readyTimeout = 30 * time.Second

// startServers starts every needed server, pinned to the server CPUs, and waits until
// each accepts requests. An external server that cannot be had is skipped with a warning,
// and so are the targets that need it.
func (h *harness) startServers(ctx context.Context) error {
	for _, name := range h.neededServers() {
		spec := serverByName(name)
		if spec.external {
			if err := h.startExternal(ctx, name); err != nil {
				return err
			}
			continue
		}
		args := spec.args
		if name == srvFastRelay {
			args = append(slices.Clip(args), "--upstream", h.urls[srvBackend])
		}
		if isRouter(name) {
			backend := h.urls[srvBackend]
			if name == srvRouterStdio {
				backend = filepath.Join(h.bin, binBackend)
			}
			cfg := filepath.Join(h.work, name+".yaml")
			if err := os.WriteFile(cfg, []byte(routerConfig(name, backend, h.o.Profile)), 0o644); err != nil {
				return err
			}
			args = []string{"--config", cfg}
		}
		argv := append([]string{filepath.Join(h.bin, spec.binary)}, args...)
		patterns := []*regexp.Regexp{spec.pattern}
		if spec.admin {
			patterns = append(patterns, reAdminAddr)
		}
		var env []string
		if h.o.ServerGOMAXPROCS > 0 {
			env = []string{"GOMAXPROCS=" + strconv.Itoa(h.o.ServerGOMAXPROCS)}
		}
		p, err := startProc(name, h.work, filepath.Join(h.work, "logs", name+".log"), h.srvCPUs, env, argv, patterns...)
		if err != nil {
			return err
		}
		h.procs[name] = p
		h.started = append(h.started, name)
		m, err := p.waitMatches(readyTimeout)
		if err != nil {
			return err
		}
		url := m[0]
		if spec.addrOnly {
			url = "http://" + url + "/mcp"
		}
		if spec.admin {
			if name == srvRouter {
				h.admin = m[1]
			}
			if err := waitReady("http://"+m[1]+"/readyz", readyTimeout); err != nil {
				return fmt.Errorf("%s: %w; see %s", name, err, p.out.path())
			}
		}
		h.urls[name] = url
		shown := append([]string{spec.binary}, args...)
		if isRouter(name) {
			shown = []string{spec.binary, "--config", name + ".yaml"}
		}
		h.res.Servers = append(h.res.Servers, ServerRecord{Name: name, Argv: shown, URL: url})
		h.logf("%s ready at %s (pid %d)", name, url, p.pid())
	}
	return nil
}

// startExternal starts an external server on a port it picks; one that cannot be found
// or installed is skipped (a warning), one that fails to start is an error.
func (h *harness) startExternal(ctx context.Context, name string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	argv, shown, err := h.externalArgv(ctx, name, port)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.skipped[name] = err
		var skipped []string
		for _, t := range targets {
			if h.o.selected(t.name) && slices.Contains(t.servers, name) {
				skipped = append(skipped, t.name)
			}
		}
		h.warn("%s skipped (targets %s): %v", name, strings.Join(skipped, ", "), err)
		return nil
	}
	var env []string
	if h.o.ServerGOMAXPROCS > 0 {
		env = []string{"GOMAXPROCS=" + strconv.Itoa(h.o.ServerGOMAXPROCS)}
	}
	p, err := startProc(name, h.work, filepath.Join(h.work, "logs", name+".log"), h.srvCPUs, env, argv)
	if err != nil {
		return err
	}
	h.procs[name] = p
	h.started = append(h.started, name)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if err := waitListening(p, addr, readyTimeout); err != nil {
		return err
	}
	url := "http://" + addr + "/mcp"
	h.urls[name] = url
	h.res.Servers = append(h.res.Servers, ServerRecord{Name: name, Argv: shown, URL: url})
	h.logf("%s ready at %s (pid %d)", name, url, p.pid())
	return nil
}

// waitReady polls url until it answers 200, at most timeout.
func waitReady(url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := c.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s: %s", url, resp.Status)
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", timeout, last)
}

// stopAll stops every server, the last started first (the router before its backend).
func (h *harness) stopAll() {
	for i := len(h.started) - 1; i >= 0; i-- {
		if p := h.procs[h.started[i]]; p != nil {
			p.stop()
			delete(h.procs, h.started[i])
		}
	}
	h.started = nil
}

// closedLoop runs every selected target once per round. The stub (mcpload's own ceiling)
// runs in the first round only; the others reverse their order every other round.
func (h *harness) closedLoop(ctx context.Context) error {
	byName := map[string]*TargetResult{}
	var order []string
	for _, t := range targets {
		if !h.selected(t.name) {
			continue
		}
		tr := &TargetResult{Name: t.name, Label: t.label, Family: t.family, Servers: t.servers}
		byName[t.name] = tr
		h.res.Closed = append(h.res.Closed, tr)
		order = append(order, t.name)
	}
	for round := 1; round <= h.o.Rounds; round++ {
		seq := slices.Clone(order)
		if round%2 == 0 {
			slices.Reverse(seq)
		}
		for _, name := range seq {
			if name == TargetStub && round > 1 {
				continue
			}
			if err := h.measure(ctx, byName[name], round, 0, "closed"); err != nil {
				return err
			}
		}
	}
	return nil
}

// openLoop runs direct and router at OpenLoadFraction of direct's closed-loop maximum,
// then both at the same fraction of the router's maximum. The other hops (haproxy, the
// pipelined router, the bare fasthttp relay), when selected, run beside them at the same
// rates: the relay's tail is what the router's HTTP library alone leaves at that load.
func (h *harness) openLoop(ctx context.Context) error {
	if h.o.OpenLoadFraction < 0 {
		return nil
	}
	closed := map[string]*TargetResult{}
	for _, t := range h.res.Closed {
		closed[t.Name] = t
	}
	var names []string
	for _, name := range []string{TargetDirect, TargetHAProxy, TargetFastRelay, TargetRouter, TargetRouterPipelined} {
		if h.selected(name) {
			names = append(names, name)
		}
	}
	for _, basis := range []struct{ key, name string }{{"open", TargetDirect}, {"open-eq", TargetRouter}} {
		b := closed[basis.name]
		if !b.Measured() {
			continue
		}
		set := &OpenSet{Key: basis.key, Basis: basis.name, Rate: math.Round(b.Throughput() * h.o.OpenLoadFraction)}
		if set.Rate < 1 {
			continue
		}
		for _, name := range names {
			t := targetByName(name)
			set.Targets = append(set.Targets, &TargetResult{Name: name, Label: t.label, Family: t.family, Servers: t.servers})
		}
		h.res.Open = append(h.res.Open, set)
		for round := 1; round <= h.o.Rounds; round++ {
			for i := range set.Targets {
				j := i
				if round%2 == 0 {
					j = len(set.Targets) - 1 - i
				}
				if err := h.measure(ctx, set.Targets[j], round, set.Rate, set.Key); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// loadTimeout is the slack a load run gets beyond its warm-up and window (session
// set-up, late completions, writing the reports).
const loadTimeout = 2 * time.Minute

// measure runs mcpload once against t (open loop when rate > 0) and appends the run. A
// failed mcpload run is a warning; a server that died is an error. kind names the run in
// file names and logs.
func (h *harness) measure(ctx context.Context, t *TargetResult, round int, rate float64, kind string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	spec := targetByName(t.Name)
	base := filepath.Join(h.work, "runs", fmt.Sprintf("%s-%s-r%d", kind, t.Name, round))
	p, run, err := h.startLoad(spec, base, rate)
	if err != nil {
		return err
	}
	run.Round = round
	defer p.stop() // only if an error below left it running
	before := h.serverCPU(spec)
	srvBusy0, srvTotal0, srvErr0 := cpuTimes(h.srvSet)
	loadBusy0, loadTotal0, loadErr0 := cpuTimes(h.loadSet)
	werr := p.wait(ctx, h.o.Warmup+h.o.Duration+loadTimeout)
	after := h.serverCPU(spec)
	srvBusy1, srvTotal1, srvErr1 := cpuTimes(h.srvSet)
	loadBusy1, loadTotal1, loadErr1 := cpuTimes(h.loadSet)
	for _, s := range spec.servers {
		if err := h.procs[s].exitedEarly(); err != nil {
			return err
		}
	}
	if werr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.warn("%s (%s, round %d): mcpload failed: %v; see %s", t.Name, kind, round, werr, p.out.path())
		return nil
	}
	rep, err := report.ReadJSONFile(run.JSON)
	if err != nil {
		h.warn("%s (%s, round %d): %v", t.Name, kind, round, err)
		return nil
	}
	run.Report = rep
	run.Ops = rep.Requests + rep.Excluded
	run.OtherServerPct, run.OtherLoadPct = math.NaN(), math.NaN()
	if before != nil && after != nil {
		run.ServerCPU = make([]time.Duration, len(before))
		var own time.Duration
		for i := range before {
			run.ServerCPU[i] = after[i] - before[i]
			own += run.ServerCPU[i]
		}
		if h.srvSet != nil && srvErr0 == nil && srvErr1 == nil && srvTotal1 > srvTotal0 {
			run.OtherServerPct = otherPct(srvBusy1-srvBusy0, own, srvTotal1-srvTotal0)
		}
	}
	if own, ok := p.cpuUsed(); ok && h.loadSet != nil && loadErr0 == nil && loadErr1 == nil && loadTotal1 > loadTotal0 {
		run.OtherLoadPct = otherPct(loadBusy1-loadBusy0, own, loadTotal1-loadTotal0)
	}
	t.Runs = append(t.Runs, *run)
	h.logf("[%-7s round %d/%d] %-16s %s  p50 %s  p99 %s  errors %d  server cpu %s µs/op  mcpload cpu %.0f%% (waited for a CPU %.0f%%)  others on server/load CPUs %.0f%%/%.0f%%%s",
		kind, round, h.o.Rounds, t.Name, report.FormatRate(rep.ThroughputRPS), report.FormatUS(rep.Latency.P50),
		report.FormatUS(rep.Latency.P99), rep.Errors, cpuPerOpText(run), rep.Generator.CPUAvgPct,
		rep.Generator.RunqueueWaitPct, run.OtherServerPct, run.OtherLoadPct, untrustedText(rep))
	return nil
}

// otherPct is the part of a CPU set's busy time that is not ours, in percent of the set's
// time (clamped at 0: the counters tick at 10 ms and do not add up exactly).
func otherPct(busy, ours, total time.Duration) float64 {
	return max(0, 100*float64(busy-ours)/float64(total))
}

func untrustedText(rep *report.Report) string {
	if rep.Generator.Trustworthy {
		return ""
	}
	return "  [mcpload: not trustworthy]"
}

func cpuPerOpText(run *LoadRun) string {
	if run.ServerCPU == nil || run.Ops == 0 {
		return "?"
	}
	parts := make([]string, len(run.ServerCPU))
	for i, c := range run.ServerCPU {
		parts[i] = strconv.FormatFloat(float64(c.Microseconds())/float64(run.Ops), 'f', 1, 64)
	}
	return strings.Join(parts, "+")
}

// startLoad starts mcpload against spec's endpoint, pinned to the load CPUs.
func (h *harness) startLoad(spec *targetSpec, base string, rate float64) (*proc, *LoadRun, error) {
	run := &LoadRun{JSON: base + ".json", HTML: base + ".html"}
	sessions := h.o.Sessions
	if rate > 0 {
		sessions = h.o.OpenSessions
	}
	args := []string{
		"--url", h.urls[spec.servers[0]],
		"--sessions", strconv.Itoa(sessions),
		"--duration", h.o.Duration.String(),
		"--warmup", h.o.Warmup.String(),
		"--tool", spec.tool,
		"--args", h.o.Args,
	}
	if rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(rate, 'f', -1, 64))
	}
	run.Argv = append([]string{binLoad}, args...)
	args = append(args, "--json", run.JSON, "--html", run.HTML, "--quiet")
	argv := append([]string{filepath.Join(h.bin, binLoad)}, args...)
	var env []string
	if rate > 0 && len(h.loadSet) == 1 {
		// mcpload's open-loop pacer sleeps in a blocking nanosleep system call. With one
		// P (what Go picks on one CPU) the goroutines reading replies then wait until
		// sysmon takes the P back, up to 10 ms later, and that wait lands in every
		// latency. A second P on the same CPU lets them run while the pacer sleeps.
		env = []string{"GOMAXPROCS=2"}
		run.Env = env
	}
	p, err := startProc("mcpload "+spec.name, h.work, base+".txt", h.loadCPUs, env, argv)
	if err != nil {
		return nil, nil, err
	}
	return p, run, nil
}

// serverCPU reads the CPU time of spec's servers; nil when it cannot be read.
func (h *harness) serverCPU(spec *targetSpec) []time.Duration {
	out := make([]time.Duration, len(spec.servers))
	for i, s := range spec.servers {
		c, err := procCPU(h.procs[s].pid())
		if err != nil {
			return nil
		}
		out[i] = c
	}
	return out
}

// profileRouter measures the router once more while its admin listener records a CPU
// profile, then summarises the profile with go tool pprof.
func (h *harness) profileRouter(ctx context.Context) (*Profile, error) {
	if h.admin == "" {
		return nil, errors.New("the router has no admin listener")
	}
	spec := targetByName(TargetRouter)
	base := filepath.Join(h.work, "runs", "profile-router")
	p, run, err := h.startLoad(spec, base, 0)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	secs := max(1, int(h.o.Duration.Seconds())-1)
	if !ctxtime.Sleep(ctx, h.o.Warmup+500*time.Millisecond) {
		return nil, ctx.Err()
	}
	c := &http.Client{Timeout: time.Duration(secs)*time.Second + 30*time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", h.admin, secs))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/debug/pprof/profile: %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	file := filepath.Join(h.work, "router.cpu.pprof")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return nil, err
	}
	if err := p.wait(ctx, h.o.Warmup+h.o.Duration+loadTimeout); err != nil {
		return nil, fmt.Errorf("mcpload during the profile: %w", err)
	}
	prof := &Profile{Seconds: secs}
	if rep, err := report.ReadJSONFile(run.JSON); err == nil {
		prof.Throughput = rep.ThroughputRPS
	}
	routerBin := filepath.Join(h.bin, binRouter)
	top, err := runCommand(ctx, h.o.Root, nil, "go", "tool", "pprof", "-top", "-nodecount=25", routerBin, file)
	if err != nil {
		return nil, err
	}
	cum, err := runCommand(ctx, h.o.Root, nil, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", routerBin, file)
	if err != nil {
		return nil, err
	}
	prof.Top, prof.TopCum = trimPprof(top), trimPprof(cum)
	prof.Command = fmt.Sprintf("curl http://ADMIN/debug/pprof/profile?seconds=%d > router.cpu.pprof; go tool pprof -top [-cum] mcprouter router.cpu.pprof", secs)
	return prof, nil
}

// trimPprof drops pprof's header lines that name local files and times.
func trimPprof(out []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(line, "File: ") || strings.HasPrefix(line, "Time: ") || strings.HasPrefix(line, "Build ID: ") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// codec runs the envelope micro-benchmarks and keeps their medians.
func (h *harness) codec(ctx context.Context) error {
	argv := []string{"go", "test", "-run", "^$", "-bench", "BenchmarkEnvelope", "-benchtime", h.o.CodecBenchtime,
		"-count", strconv.Itoa(h.o.CodecCount), "./codec"}
	h.res.CodecCommand = fmt.Sprintf("go test -run '^$' -bench BenchmarkEnvelope -benchtime %s -count %d ./codec", h.o.CodecBenchtime, h.o.CodecCount)
	h.logf("codec: %s", h.res.CodecCommand)
	out, err := runCommand(ctx, h.o.Root, nil, argv...)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.work, "codec-bench.txt"), out, 0o644); err != nil {
		return err
	}
	lines, err := ParseBench(bytes.NewReader(out))
	if err != nil {
		return err
	}
	h.res.Codec = EnvelopeRows(Summarize(lines))
	if len(h.res.Codec) == 0 {
		return errors.New("no BenchmarkEnvelope results in the output")
	}
	return nil
}

// copyReports copies, per target, the HTML and JSON reports of the run closest to the
// median throughput into ReportsDir under stable names, so that re-running replaces
// them.
func (h *harness) copyReports() error {
	if err := os.MkdirAll(h.o.ReportsDir, 0o755); err != nil {
		return err
	}
	copyOne := func(t *TargetResult, prefix string) error {
		if !t.Measured() {
			return nil
		}
		med := t.Throughput()
		best := 0
		for i := range t.Runs {
			if math.Abs(t.Runs[i].CallsPerSecond()-med) < math.Abs(t.Runs[best].CallsPerSecond()-med) {
				best = i
			}
		}
		r := &t.Runs[best]
		t.ReportJSON, t.ReportHTML = prefix+t.Name+".json", prefix+t.Name+".html"
		if err := copyFile(filepath.Join(h.o.ReportsDir, t.ReportJSON), r.JSON); err != nil {
			return err
		}
		return copyFile(filepath.Join(h.o.ReportsDir, t.ReportHTML), r.HTML)
	}
	for _, t := range h.res.Closed {
		if err := copyOne(t, ""); err != nil {
			return err
		}
	}
	for _, set := range h.res.Open {
		for _, t := range set.Targets {
			if err := copyOne(t, set.Key+"-"); err != nil {
				return err
			}
		}
	}
	return nil
}
