// Command compare measures mcprouter side by side with its own backend and with other MCP
// server implementations, in one run on one machine, and records the figures in the
// "## compare" section of bench/RESULTS.md (other sections are left alone):
//
//	go run ./bench/cmd/compare [-duration 10s] [-sessions 32] [-rounds 2] [-profile]
//	go run ./bench/cmd/compare -quick     # under a minute; prints the section, writes nothing
//
// It builds mcpload, mcpbackend, mcprouter and the peer servers (bench/peers), finds or
// installs haproxy and nginx (apt-get) and the stdio bridges supergateway and mcp-proxy
// (npm, into the user's cache directory), skipping with a warning what cannot be had,
// starts each server as a process on loopback, drives each with mcpload (closed loop, then open loop at
// half of the direct maximum for mcpbackend alone and through the router), runs the codec
// micro-benchmarks and writes the tables, the goals met or missed and the commands. The
// HTML and JSON reports go to bench/reports/. See package bench/compare.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/bench/compare"
	"github.com/mcprouter/mcprouter/bench/results"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run() error {
	var o compare.Options
	flag.DurationVar(&o.Duration, "duration", 0, "measured window of every load run (default 10s; 2s with -quick)")
	flag.DurationVar(&o.Warmup, "warmup", 0, "warm-up before every window, not measured (default 1s; 500ms with -quick)")
	flag.IntVar(&o.Sessions, "sessions", 32, "concurrent MCP sessions of every run")
	flag.IntVar(&o.OpenSessions, "open-sessions", 0, "sessions of the open-loop runs (default 4 x -sessions)")
	flag.IntVar(&o.Rounds, "rounds", 0, "rounds; every target runs once per round, order reversed every other round (default 2; 1 with -quick)")
	flag.BoolVar(&o.Quick, "quick", false, "short run (under a minute): a smoke test, not figures to record")
	targets := flag.String("targets", "", "comma-separated subset of targets: "+strings.Join(compare.TargetNames(), ","))
	flag.IntVar(&o.ServerGOMAXPROCS, "server-gomaxprocs", 0, "GOMAXPROCS of the server processes (default: Go's, the number of CPUs they are pinned to)")
	flag.BoolVar(&o.NoPin, "nopin", false, "do not pin mcpload and the servers to separate CPUs with taskset")
	flag.BoolVar(&o.Profile, "profile", false, "also take a CPU profile of the router during an extra run and include its top functions")
	flag.BoolVar(&o.SkipCodec, "nocodec", false, "skip the codec micro-benchmarks")
	flag.StringVar(&o.Args, "args", "", `arguments of the echo tool (default {"text":"hello"})`)
	out := flag.String("out", "", "results file whose \"## compare\" section is replaced (default bench/RESULTS.md, or \"-\" with -quick; \"-\" prints the section instead)")
	reports := flag.String("reports", "", "directory for the HTML and JSON reports (default bench/reports next to -out)")
	flag.StringVar(&o.WorkDir, "work", "", "work directory for binaries, logs and raw reports (default: a temporary directory)")
	flag.BoolVar(&o.KeepWork, "keep", false, "keep the work directory")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	if *targets != "" {
		o.Targets = strings.Split(*targets, ",")
	}

	root, err := compare.FindRoot(".")
	if err != nil {
		return err
	}
	o.Root = root
	switch {
	case *out == "" && o.Quick:
		// A quick run is a smoke test: it must not replace recorded figures unless asked.
		*out = "-"
	case *out == "":
		*out = filepath.Join(root, "bench", "RESULTS.md")
	}
	reportsLink := ""
	if *out != "-" {
		if *reports == "" {
			*reports = filepath.Join(filepath.Dir(*out), "reports")
		}
		o.ReportsDir = *reports
		if rel, err := filepath.Rel(filepath.Dir(*out), *reports); err == nil {
			reportsLink = filepath.ToSlash(rel)
		}
	}
	if o.KeepWork && o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "mcprouter-compare-")
		if err != nil {
			return err
		}
		o.WorkDir = dir
		fmt.Fprintln(os.Stderr, "work directory:", dir)
	}
	o.Log = os.Stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The whole run is bounded: a wedged server must not hold the machine forever.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()

	start := time.Now()
	res, err := compare.Run(ctx, o)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; nothing written")
		}
		return err
	}
	section := res.Markdown(reportsLink)
	if *out == "-" {
		fmt.Print(section)
		return nil
	}
	if err := results.WriteSection(*out, compare.SectionHeading, section); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote the %q section of %s and the reports in %s (%s)\n", compare.SectionHeading, *out, o.ReportsDir, time.Since(start).Round(time.Second))
	for _, g := range res.Goals {
		fmt.Fprintf(os.Stderr, "  %-100s %s\n", g.Name, g.Margin())
	}
	return nil
}
