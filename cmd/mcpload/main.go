// Command mcpload measures any MCP server or gateway under load: many concurrent
// sessions, a weighted mix of calls, closed-loop concurrency or an open-loop arrival
// rate with coordinated-omission-corrected latencies, per-method and per-tool
// histograms, errors by class, a per-second series, and a self-check that flags runs
// whose own timing cannot be trusted.
//
//	mcpload --url http://127.0.0.1:8080/mcp --sessions 64 --duration 30s --tool echo --args '{"text":"hi"}'
//	mcpload --url http://127.0.0.1:8080/mcp --tool echo   # arguments built from its inputSchema
//	mcpload --url http://127.0.0.1:8080/mcp               # lists the tools; asks which on a terminal
//	mcpload --url http://a:8080/mcp --url http://b:8080/mcp --tool echo   # instances of one service:
//	                                                       # a session moves on when its own stops answering
//	mcpload --url ... --rate 5000 --warmup 5s --json run.json --html run.html --assert 'p99<5ms' --assert 'errors<0.1%'
//	mcpload --scenario mix.yaml
//	mcpload --url ... --protocol 2026-07-28 --tool echo   # stateless: no initialize, _meta and Mcp-Method/Mcp-Name on every request
//	mcpload --url ... --mode fanout --fanout-uri memo://board --fanout-tool touch --fanout-args '{"uri":"memo://board"}' --sessions 2000
//	                                                       # GET streams; with --protocol 2026-07-28, subscriptions/listen streams
//	mcpload --transport stdio -- ./my-server --stdio
//	mcpload compare before.json after.json
//	mcpload stub --listen 127.0.0.1:9000      # a trivial endpoint to measure mcpload itself
//	mcpload hold --url ... --sessions 15000 --uri memo://board --source-addrs 127.0.0.2-127.0.0.9
//	                                           # hold idle subscribed sessions; time one update's arrival (see hold.go)
//
// When calls fail, the report gives the first message of each error class and the
// latency of the failed calls, and the live line warns once more than half fail.
//
// Exit status: 0 success, 1 an --assert failed, 2 usage or run error, 3 the run was
// flagged as not trustworthy and --strict was given.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/assert"
	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/loadtest"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// Exit statuses.
const (
	exitOK        = 0
	exitAssert    = 1
	exitError     = 2
	exitUntrusted = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runWith(ctx, os.Args[1:], terminalInput(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process and without a terminal: it parses args, does the
// work and returns the exit status. Tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, nil, stdout, stderr)
}

// runWith is run with in, the terminal mcpload may ask its user on (nil: none).
func runWith(ctx context.Context, args []string, in io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return compareCmd(args[1:], stdout, stderr)
		case "stub":
			return stubCmd(ctx, args[1:], stdout, stderr)
		case "hold":
			return holdCmd(ctx, args[1:], os.Stdin, stdout, stderr)
		case "version":
			fmt.Fprintln(stdout, "mcpload", version)
			return exitOK
		}
	}
	return loadCmd(ctx, args, in, stdout, stderr)
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ", ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// addHeaders adds the --header values of l ('Name: value') to *into.
func (l listFlag) addHeaders(into *map[string]string) error {
	for _, h := range l {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return fmt.Errorf("--header %q: want 'Name: value'", h)
		}
		if *into == nil {
			*into = map[string]string{}
		}
		(*into)[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

// urlsFlag is --url: the first value is the target's URL, further values (repeated
// flags, or commas) are further instances of it.
type urlsFlag struct {
	t   *client.Options
	set bool // a value was given on this flag set: the next one adds, not replaces
}

func (u *urlsFlag) String() string {
	if u.t == nil {
		return ""
	}
	return strings.Join(append([]string{u.t.URL}, u.t.URLs...), ",")
}

func (u *urlsFlag) Set(v string) error {
	for _, one := range strings.Split(v, ",") {
		one = strings.TrimSpace(one)
		switch {
		case one == "":
		case !u.set:
			u.t.URL, u.t.URLs, u.set = one, nil, true
		default:
			u.t.URLs = append(u.t.URLs, one)
		}
	}
	return nil
}

// sourceAddrsFlag is --source-addrs: local addresses (and ranges of them) to open
// connections from, in turn.
type sourceAddrsFlag struct{ t *client.Options }

func (f sourceAddrsFlag) String() string {
	if f.t == nil {
		return ""
	}
	return strings.Join(f.t.SourceAddrs, ",")
}

func (f sourceAddrsFlag) Set(v string) error {
	addrs, err := client.ParseSourceAddrs(v)
	if err != nil {
		return err
	}
	f.t.SourceAddrs = addrs
	return nil
}

// loadFlags holds the parsed command line. The flags that map one to one onto a
// config field are bound to cfg directly, so that applying them to a scenario's
// config is one re-parse (withGivenFlags) instead of a field-by-field copy.
type loadFlags struct {
	cfg                      loadgen.Config
	scenario                 string
	cmd                      string
	headers                  listFlag
	tool, args, method, uri  string
	prompt, params           string
	pages                    int
	fanURI, fanTool, fanArgs string
	jsonOut, htmlOut         string
	asserts                  listFlag
	quiet, strict            bool
	cpuProfile               string
}

func newLoadFlagSet(f *loadFlags, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("mcpload", "usage: mcpload [flags] [-- stdio server command]\n       mcpload compare A.json B.json\n       mcpload stub [flags]\n\nflags:", stderr)
	fs.StringVar(&f.scenario, "scenario", "", "YAML scenario file (flags given explicitly override it)")
	fs.Var(&urlsFlag{t: &f.cfg.Target}, "url", "MCP endpoint (http) or SSE stream URL (sse); repeat it (or separate by commas) "+
		"for instances of one service: sessions spread over them and move to the next when theirs stops answering")
	fs.Var(sourceAddrsFlag{&f.cfg.Target}, "source-addrs", "local addresses to connect from, in turn, e.g. 127.0.0.2-127.0.0.9 "+
		"(each adds ~28k ephemeral ports: more connections to one destination than one address allows)")
	fs.StringVar(&f.cfg.Target.Transport, "transport", "http", "http (Streamable HTTP), sse (legacy HTTP+SSE) or stdio")
	fs.StringVar(&f.cfg.Target.Protocol, "protocol", "", "protocol revision to request (default 2025-11-25; 2024-11-05 for sse; 2026-07-28 is stateless)")
	fs.StringVar(&f.cmd, "command", "", "stdio server command line (or give it after --)")
	fs.Var(&f.headers, "header", "extra HTTP header 'Name: value' (repeatable)")
	fs.IntVar(&f.cfg.Sessions, "sessions", 16, "concurrent sessions")
	fs.DurationVar(&f.cfg.Ramp, "ramp", 0, "spread session openings over this long (never measured)")
	fs.DurationVar(&f.cfg.Warmup, "warmup", time.Second, "full load before measuring, excluded from the figures")
	fs.DurationVar(&f.cfg.Duration, "duration", 10*time.Second, "measured duration")
	fs.Float64Var(&f.cfg.Rate, "rate", 0, "open loop: operations per second (latency from intended send times); 0 = closed loop")
	fs.DurationVar(&f.cfg.Timeout, "timeout", 10*time.Second, "per-call timeout")
	fs.DurationVar(&f.cfg.LateThreshold, "late-threshold", time.Millisecond, "an open-loop send starting later than this is late")
	fs.DurationVar(&f.cfg.Slow, "slow", 0, "count the calls whose corrected latency is this or more, overall, per method and per tool or label (0: not counted)")
	fs.StringVar((*string)(&f.cfg.Mode), "mode", "steady", "steady, churn (connect, call, close) or fanout (subscribe, trigger, measure delivery; on 2026-07-28 each session holds a subscriptions/listen stream)")
	fs.StringVar(&f.tool, "tool", "", "tool to call (tools/call)")
	fs.StringVar(&f.args, "args", "", "tool or prompt arguments, JSON template ({{seq}}, {{session}}, {{rand A B}}, {{randstr N}}, {{uuid}}, {{now}})")
	fs.StringVar(&f.method, "method", "", "method to call when not a tool: ping, tools/list, resources/list, ...")
	fs.StringVar(&f.uri, "uri", "", "resource to read (resources/read), a template")
	fs.StringVar(&f.prompt, "prompt", "", "prompt to get (prompts/get)")
	fs.StringVar(&f.params, "params", "", "raw params for --method, JSON template")
	fs.IntVar(&f.pages, "pages", 1, "pages per */list operation (-1: follow nextCursor to the end)")
	fs.BoolVar(&f.cfg.Target.Stream, "get-stream", false, "hold each session's GET stream open")
	fs.IntVar(&f.cfg.ChurnCalls, "churn-calls", 1, "calls per session in churn mode")
	fs.StringVar(&f.fanURI, "fanout-uri", "", "fanout: resource every session subscribes to")
	fs.StringVar(&f.fanTool, "fanout-tool", "", "fanout: tool that updates the resource")
	fs.StringVar(&f.fanArgs, "fanout-args", "", "fanout: arguments of the trigger tool")
	fs.Float64Var(&f.cfg.Fanout.Rate, "fanout-rate", 10, "fanout: triggers per second")
	fs.Uint64Var(&f.cfg.Seed, "seed", 1, "random seed (mix choices, template values)")
	fs.StringVar(&f.jsonOut, "json", "", "write the report as JSON to this file")
	fs.StringVar(&f.htmlOut, "html", "", "write a self-contained HTML report to this file")
	fs.Var(&f.asserts, "assert", "pass/fail expression, e.g. 'p99<5ms', 'errors<0.1%', 'rps>=1000' (repeatable)")
	fs.BoolVar(&f.quiet, "quiet", false, "no live progress")
	fs.BoolVar(&f.strict, "strict", false, "exit 3 when the generator flags its own figures as not trustworthy")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write mcpload's own CPU profile to this file (to study the generator's cost)")
	return fs
}

func loadCmd(ctx context.Context, args []string, in io.Reader, stdout, stderr io.Writer) int {
	var f loadFlags
	fs := newLoadFlagSet(&f, stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, asserts, err := buildConfig(&f, fs)
	if err == nil {
		err = explainCall(&f, &cfg, in, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	exprs, err := assert.ParseAll(asserts)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}

	if f.cpuProfile != "" {
		stop, err := startProfile(f.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitError
		}
		defer stop()
	}
	var progress func(loadgen.Progress)
	var pp *progressPrinter
	if !f.quiet {
		pp = newProgressPrinter(stderr)
		progress = pp.update
	}
	rep, err := loadgen.Run(ctx, cfg, progress)
	if pp != nil {
		pp.finish()
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	passed := assert.CheckAll(exprs, rep)
	if err := rep.WriteTable(stdout); err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	if f.jsonOut != "" {
		if err := rep.WriteJSONFile(f.jsonOut); err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitError
		}
	}
	if f.htmlOut != "" {
		if err := rep.WriteHTMLFile(f.htmlOut); err != nil {
			fmt.Fprintln(stderr, "mcpload:", err)
			return exitError
		}
	}
	switch {
	case !passed:
		return exitAssert
	case f.strict && !rep.Generator.Trustworthy:
		return exitUntrusted
	}
	return exitOK
}

// startProfile starts a CPU profile of mcpload itself into path; stop ends it.
func startProfile(path string) (stop func(), err error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// buildConfig merges the scenario file (if any) with the flags that were given:
// without a scenario every flag (given or default) makes the config; with one, only
// the flags given on the command line override it.
func buildConfig(f *loadFlags, fs *flag.FlagSet) (loadgen.Config, []string, error) {
	cfg := f.cfg
	var asserts []string
	if f.scenario != "" {
		sc, err := loadgen.LoadScenario(f.scenario)
		if err != nil {
			return cfg, nil, err
		}
		if cfg, err = withGivenFlags(sc.Config(f.scenario), fs); err != nil {
			return cfg, nil, err
		}
		asserts = sc.Assert
	}
	t := &cfg.Target
	if rest := fs.Args(); len(rest) > 0 {
		t.Command = rest
		if f.scenario == "" && !given(fs, "transport") {
			t.Transport = client.Stdio
		}
	} else if (f.scenario == "" || given(fs, "command")) && f.cmd != "" {
		t.Command = strings.Fields(f.cmd)
	}
	if err := f.headers.addHeaders(&t.Headers); err != nil {
		return cfg, nil, err
	}
	// A call given on the command line replaces the scenario's mix.
	if f.tool != "" || f.method != "" || f.uri != "" || f.prompt != "" {
		cfg.Mix = []loadgen.OpSpec{{Tool: f.tool, Method: f.method, URI: f.uri, Prompt: f.prompt,
			Args: f.args, Params: f.params, Pages: f.pages}}
	} else if f.args != "" || f.params != "" {
		return cfg, nil, errors.New("--args and --params need --tool, --prompt or --method")
	}
	if (f.scenario == "" || given(fs, "fanout-uri")) && f.fanURI != "" {
		cfg.Fanout.URI = f.fanURI
	}
	if f.fanTool != "" {
		cfg.Fanout.Trigger = loadgen.OpSpec{Tool: f.fanTool, Args: f.fanArgs}
	}
	if t.Transport != client.Stdio && t.URL == "" {
		return cfg, nil, errors.New("--url is required (or --scenario, or --transport stdio with a command)")
	}
	return cfg, append(asserts, f.asserts...), nil
}

// withGivenFlags applies the flags given on the command line (fs) to a scenario's
// config: a second flag set is bound to a copy of that config, and every given
// flag is set on it again from its parsed value, so the scenario keeps every field
// the command line left alone.
func withGivenFlags(sc loadgen.Config, fs *flag.FlagSet) (loadgen.Config, error) {
	var g loadFlags
	again := newLoadFlagSet(&g, io.Discard)
	g.cfg = sc // after the definitions, which wrote their defaults into g.cfg
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if err == nil {
			err = again.Set(fl.Name, fl.Value.String())
		}
	})
	return g.cfg, err
}

// given reports whether the flag name was given on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

func compareCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: mcpload compare A.json B.json")
		return exitError
	}
	a, err := report.ReadJSONFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	b, err := report.ReadJSONFile(args[1])
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	if err := report.Compare(stdout, a, b, args[0], args[1]); err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	return exitOK
}

// stubCmd serves the trivial calibration endpoint until interrupted.
func stubCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("mcpload stub", "usage: mcpload stub [flags]\n\nServes a trivial MCP endpoint (one fixed tools/call result) to measure mcpload's own ceiling.", stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	var o loadtest.Options
	fs.DurationVar(&o.ServiceTime, "service-time", 0, "delay of every tools/call")
	fs.IntVar(&o.StallEvery, "stall-every", 0, "every n-th tools/call stalls")
	fs.DurationVar(&o.StallFor, "stall-for", 50*time.Millisecond, "how long a stall lasts")
	fs.BoolVar(&o.SSE, "sse", false, "answer requests as text/event-stream")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	srv, err := loadtest.Start(*listen, o)
	if err != nil {
		fmt.Fprintln(stderr, "mcpload:", err)
		return exitError
	}
	fmt.Fprintln(stdout, "serving", srv.URL())
	<-ctx.Done()
	srv.Close()
	fmt.Fprintf(stdout, "served %d requests (%d tools/call)\n", srv.Requests(), srv.Calls())
	return exitOK
}
