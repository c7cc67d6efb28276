// Command fanout measures resource-update fan-out through two mcprouter instances,
// side by side with raw NATS, and records the figures in bench/RESULTS.md:
//
//	go run ./bench/cmd/fanout [-sessions 1,100,1000,10000] [-updates N] [-out bench/RESULTS.md]
//
// See package bench/fanout for what is measured and how.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/bench/fanout"
	"github.com/mcprouter/mcprouter/bench/results"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		sizes       = flag.String("sessions", "1,100,1000,10000", "comma-separated numbers of subscribed sessions, ascending")
		updates     = flag.Int("updates", 10, "measured updates per size")
		warmup      = flag.Int("warmup", 1, "unmeasured warm-up updates per size")
		concurrency = flag.Int("concurrency", 64, "sessions set up at once")
		timeout     = flag.Duration("timeout", 10*time.Second, "bound of one update's deliveries and of every request")
		gap         = flag.Duration("gap", 50*time.Millisecond, "pause after each update")
		out         = flag.String("out", "", "results file whose \"## fan-out\" section is written or replaced (e.g. bench/RESULTS.md)")
		servers     = flag.String("servers", "auto", "where the backend and routers run: auto, inprocess or child (auto: in this process when the file limit allows both ends)")
		noFloor     = flag.Bool("no-floor", false, "skip the TCP floor (bare TCP writes to as many connections, measured after the router)")
		noPersist   = flag.Bool("no-persist", false, "run the routers with sessions.no_persist (no session records or event log in JetStream)")
		cpuprofile  = flag.String("cpuprofile", "", "write a CPU profile of the servers' process during the largest size's measured updates")
		clientProf  = flag.String("client-cpuprofile", "", "write a CPU profile of the clients' (this) process over the same span as -cpuprofile")
		machine     = flag.String("machine", "", "machine note for the report (default: CPU count, model and load average)")
		verbose     = flag.Bool("v", false, "log the servers' warnings to stderr")
		serve       = flag.Bool("serve", false, "internal: run the servers for a parent fanout process (stdin/stdout protocol)")
		serveMax    = flag.Int("serve-sessions", 10000, "internal: with -serve, the largest number of sessions")
	)
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if !*verbose {
		logger = nil // discarded
	}
	limit, err := fanout.RaiseFileLimit()
	if err != nil {
		return fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if *serve {
		return fanout.ServeChild(fanout.ServerConfig{Sessions: *serveMax, NoPersist: *noPersist, Logger: logger}, os.Stdin, os.Stdout)
	}

	opts := fanout.Options{
		Updates: *updates, Warmup: *warmup, Concurrency: *concurrency, Timeout: *timeout, Gap: *gap,
		NoFloor: *noFloor,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
		},
	}
	if *warmup == 0 {
		opts.Warmup = -1
	}
	if *gap == 0 {
		opts.Gap = -1
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-sessions: %q is not a positive number", f)
		}
		opts.Sessions = append(opts.Sessions, n)
	}
	largest := opts.Sessions[len(opts.Sessions)-1]
	if *cpuprofile != "" {
		abs, err := filepath.Abs(*cpuprofile)
		if err != nil {
			return err
		}
		opts.CPUProfile = abs
	}

	if *clientProf != "" {
		abs, err := filepath.Abs(*clientProf)
		if err != nil {
			return err
		}
		opts.ClientCPUProfile = abs
	}

	// Each session holds one client socket, and one server socket where its router is;
	// a few hundred more for NATS, the backend, the POST connections and the runtime.
	const spare = 512
	mode := *servers
	if mode == "auto" {
		mode = "child"
		if uint64(2*largest+spare) <= limit {
			mode = "inprocess"
		}
	}
	var target fanout.Target
	var where string
	cfg := fanout.ServerConfig{Sessions: largest, NoPersist: *noPersist, Logger: logger}
	switch mode {
	case "inprocess":
		if need := uint64(2*largest + spare); need > limit {
			return fmt.Errorf("%d sessions in one process need about %d file descriptors; RLIMIT_NOFILE is %d (use -servers child)", largest, need, limit)
		}
		if opts.CPUProfile != "" && opts.ClientCPUProfile != "" {
			return errors.New("-cpuprofile and -client-cpuprofile profile the same process with -servers inprocess: use one")
		}
		s, err := fanout.StartServers(cfg)
		if err != nil {
			return err
		}
		target, where = s, "the benchmark process, with the clients"
	case "child":
		if need := uint64(largest + spare); need > limit {
			return fmt.Errorf("%d sessions need about %d file descriptors per process; RLIMIT_NOFILE is %d", largest, need, limit)
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		argv := []string{exe, "-serve", "-serve-sessions", strconv.Itoa(largest)}
		if *noPersist {
			argv = append(argv, "-no-persist")
		}
		if *verbose {
			argv = append(argv, "-v")
		}
		c, err := fanout.Spawn(argv, nil, time.Minute)
		if err != nil {
			return err
		}
		target = c
		where = fmt.Sprintf("a child process, the clients in the benchmark process (one process cannot hold both ends' %d sockets)", 2*largest)
	default:
		return fmt.Errorf("-servers: %q is not auto, inprocess or child", *servers)
	}
	defer target.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := fanout.Run(ctx, target, opts)
	if err != nil {
		return err
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	ratioOK, p99OK, p99Measured := rep.TargetsMet()
	fmt.Printf("targets: ratio >= %.1f: %v; p99 at %d < %v: %v (measured %v)\n",
		fanout.TargetRatio, ratioOK, fanout.TargetP99Sessions, fanout.TargetP99, p99OK, p99Measured)
	if cpuOK, fp99OK, cpuMeasured, fp99Measured, notes := rep.FloorTargetsMet(); cpuMeasured || fp99Measured {
		fmt.Printf("against the floor: CPU <= %.2fx: %v; p99 at %d <= %.1fx: %v (%s)\n",
			fanout.TargetFloorCPU, cpuOK, fanout.TargetP99Sessions, fanout.TargetFloorP99, fp99OK, strings.Join(notes, ", "))
	}
	if *out == "" {
		return target.Close()
	}
	env := fanout.Environment{
		Command:   "go run ./bench/cmd/fanout " + strings.Join(os.Args[1:], " "),
		Machine:   *machine,
		Servers:   where,
		Persist:   !*noPersist,
		FileLimit: limit,
	}
	if env.Machine == "" {
		env.Machine = machineNote()
	}
	if err := results.WriteSection(*out, "## fan-out", rep.Markdown(env)); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote the fan-out section of", *out)
	return target.Close()
}

// machineNote describes the machine from what Linux tells (elsewhere, the CPU count).
func machineNote() string {
	note := fmt.Sprintf("%d cores", runtime.NumCPU())
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				note += " (" + strings.TrimSpace(v) + ")"
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			note += ", shared with other jobs: load average " + strings.Join(f[:3], " ") + " at the end of the run"
		}
	}
	return note
}
