package compare

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Module is the main module's path; FindRoot looks for its go.mod.
const Module = "github.com/mcprouter/mcprouter"

// Options configure a comparison. The zero value of every field has a default, applied by
// Run (see each field); Quick changes the defaults of the timing fields only.
type Options struct {
	// Root is the main module's directory. Default: found from the working directory
	// with FindRoot.
	Root string
	// Duration is the measured window of every load run. Default 10s (2s with Quick).
	Duration time.Duration
	// Warmup runs at full load before each window, excluded from the figures (the
	// sessions are opened before it and are not measured either). Default 1s (500ms
	// with Quick).
	Warmup time.Duration
	// Sessions is the number of concurrent MCP sessions of every run (the closed-loop
	// concurrency; the pool that carries the arrivals in the open-loop runs). Default 32.
	Sessions int
	// OpenSessions is the number of sessions of the open-loop runs. A session carries
	// one call at a time, so the pool must hold rate × latency calls with room to spare,
	// or arrivals wait for a free session and the generator, not the server, sets the
	// latency. Default 4 × Sessions.
	OpenSessions int
	// Rounds is how many times every closed-loop and open-loop target is measured; the
	// order is reversed every other round and the figures are medians over rounds.
	// Default 2 (1 with Quick).
	Rounds int
	// Quick shortens the defaults for a run under a minute (a smoke test of the harness
	// and a rough picture, not figures to record).
	Quick bool
	// Targets selects targets by name (see TargetNames); empty means all. The servers a
	// target needs are started whether or not they are selected themselves.
	Targets []string
	// ServerGOMAXPROCS, when positive, sets GOMAXPROCS for every server process. By
	// default Go sizes it to the CPUs the process may use: 1 for a server pinned to one
	// CPU.
	ServerGOMAXPROCS int
	// NoPin disables pinning with taskset even where it is available.
	NoPin bool
	// Args is the echo tool's arguments object. Default {"text":"hello"}.
	Args string
	// OpenLoadFraction is the open-loop rate as a fraction of the direct target's
	// closed-loop maximum. Default 0.5. Negative disables the open-loop runs.
	OpenLoadFraction float64
	// CodecBench runs the codec's envelope micro-benchmarks. CodecCount (default 5, 1
	// with Quick) and CodecBenchtime (default 100ms, 50ms with Quick) set -count and
	// -benchtime. SkipCodec disables them.
	CodecCount     int
	CodecBenchtime string
	SkipCodec      bool
	// Profile adds one more closed-loop run through the router, not counted in the
	// figures, during which a CPU profile of the router process is taken from its admin
	// listener; its top functions go into the result.
	Profile bool
	// WorkDir holds the binaries, the logs and every raw report. Default: a new
	// temporary directory, removed at the end unless KeepWork.
	WorkDir  string
	KeepWork bool
	// ReportsDir receives one HTML and one JSON report per target (the round closest to
	// the median); empty means they are not copied out of WorkDir.
	ReportsDir string
	// Log receives progress lines. Default: discarded.
	Log io.Writer
}

// Target names.
const (
	TargetStub            = "stub"
	TargetDirect          = "direct"
	TargetRouter          = "router"
	TargetRouterPipelined = "router-pipelined"
	TargetGoSDKStateless  = "gosdk-stateless"
	TargetGoSDKSession    = "gosdk-session"
	TargetMCPGoSession    = "mcpgo-session"
	TargetMCPGoStateless  = "mcpgo-stateless"
	TargetHAProxy         = "haproxy"
	TargetNginx           = "nginx"
	TargetFastRelay       = "fasthttp-relay"
	TargetRouterStdio     = "router-stdio"
	TargetSupergateway    = "supergateway"
	TargetMCPProxy        = "mcp-proxy"
)

// TargetNames lists every target in the order they are measured in the first round.
func TargetNames() []string {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	return names
}

// FindRoot walks up from dir to the directory whose go.mod declares Module.
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for range 64 { // bounded: a path has far fewer levels
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && declaresModule(b, Module) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("no go.mod of module %s above the working directory; run from inside the repository or set the root", Module)
}

func declaresModule(gomod []byte, module string) bool {
	for _, line := range bytes.Split(gomod, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == module {
			return true
		}
	}
	return false
}

// defaults fills the zero fields and checks the rest.
func (o *Options) defaults() error {
	if o.Root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if o.Root, err = FindRoot(wd); err != nil {
			return err
		}
	}
	pick := func(full, quick time.Duration) time.Duration {
		if o.Quick {
			return quick
		}
		return full
	}
	if o.Duration <= 0 {
		o.Duration = pick(10*time.Second, 2*time.Second)
	}
	if o.Warmup <= 0 {
		o.Warmup = pick(time.Second, 500*time.Millisecond)
	}
	if o.Sessions <= 0 {
		o.Sessions = 32
	}
	if o.OpenSessions <= 0 {
		o.OpenSessions = 4 * o.Sessions
	}
	if o.Rounds <= 0 {
		o.Rounds = 2
		if o.Quick {
			o.Rounds = 1
		}
	}
	if o.Rounds > 20 {
		return errors.New("rounds: at most 20")
	}
	if o.Args == "" {
		o.Args = `{"text":"hello"}`
	}
	if o.OpenLoadFraction == 0 {
		o.OpenLoadFraction = 0.5
	}
	if o.OpenLoadFraction > 1 {
		return fmt.Errorf("open-loop fraction %g: at most 1 (a fraction of the direct maximum)", o.OpenLoadFraction)
	}
	if o.CodecCount <= 0 {
		o.CodecCount = 5
		if o.Quick {
			o.CodecCount = 1
		}
	}
	if o.CodecBenchtime == "" {
		o.CodecBenchtime = "100ms"
		if o.Quick {
			o.CodecBenchtime = "50ms"
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	known := TargetNames()
	for _, t := range o.Targets {
		if !slices.Contains(known, t) {
			return fmt.Errorf("unknown target %q (known: %s)", t, strings.Join(known, ", "))
		}
	}
	return nil
}

// selected reports whether target name is to be measured.
func (o *Options) selected(name string) bool {
	return len(o.Targets) == 0 || slices.Contains(o.Targets, name)
}
