// Command mcprouter is the MCP router: one endpoint in front of many MCP servers.
//
//	mcprouter [--listen 127.0.0.1:8080] [--config FILE] [--backend NAME=URL|NAME=cmd:COMMAND ARGS]...
//	mcprouter stdio [same flags]    serve one client on stdin/stdout (logs on stderr)
//	mcprouter check --config FILE   validate a configuration and print it resolved
//	mcprouter --version
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
)

type backendFlags []string

func (b *backendFlags) String() string     { return strings.Join(*b, ",") }
func (b *backendFlags) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "check" {
		return check(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Println("mcprouter", version())
		return 0
	}
	stdio := false
	if len(args) > 0 && args[0] == "stdio" {
		stdio, args = true, args[1:]
	}
	fs := flag.NewFlagSet("mcprouter", flag.ContinueOnError)
	listen := fs.String("listen", "", "address of the MCP endpoints (default 127.0.0.1:8080)")
	adminListen := fs.String("admin", "", "address of the admin listener: /metrics, /healthz, /readyz, status page (default 127.0.0.1:8081; \"off\" disables)")
	configPath := fs.String("config", "", "YAML configuration file (read again on SIGHUP)")
	watch := fs.Bool("watch-config", false, "read the configuration file again when it changes (reload.watch)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logJSON := fs.Bool("log-json", false, "log as JSON lines")
	var backends backendFlags
	fs.Var(&backends, "backend", "a backend: NAME=URL or NAME=cmd:COMMAND ARGS (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "mcprouter: --log-level:", err)
		return 2
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts) // stderr always: stdout may be the MCP channel
	if *logJSON {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	log := slog.New(h)
	slog.SetDefault(log)

	var flagBackends []app.BackendConfig
	for _, b := range backends {
		bc, err := app.ParseBackendFlag(b)
		if err != nil {
			log.Error("bad --backend", "value", b, "err", err)
			return 2
		}
		flagBackends = append(flagBackends, bc)
	}
	// load reads the configuration with the flags over it: at start, and again at
	// every reload, so that the flags keep their meaning.
	load := func() (app.Config, error) {
		var cfg app.Config
		if *configPath != "" {
			c, err := app.LoadConfig(*configPath)
			if err != nil {
				return cfg, err
			}
			cfg = c
		}
		if *listen != "" {
			cfg.Listen = *listen
		}
		if *adminListen != "" {
			cfg.Admin.Listen = *adminListen
		}
		if *watch {
			cfg.Reload.Watch = true
		}
		cfg.Backends = append(cfg.Backends, flagBackends...)
		return cfg, nil
	}
	cfg, err := load()
	if err != nil {
		log.Error("cannot load configuration", "file", *configPath, "err", err)
		return 2
	}

	if *configPath == "" && len(backends) == 0 && len(cfg.Backends) == 0 {
		// Zero configuration: a working router from one command.
		stopRefs, err := app.ReferenceBackends(&cfg, 2, log)
		if err != nil {
			log.Error("cannot start the reference backends", "err", err)
			return 1
		}
		defer stopRefs()
	}
	a, err := app.New(cfg, log)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	if err := app.ApplyMemoryLimit(cfg, log); err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	stopFloor, err := app.ApplyHeapFloor(cfg, log)
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	defer stopFloor()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *configPath != "" {
		a.EnableReload(*configPath, load)
	}
	a.Start(10 * time.Second)

	if stdio {
		err := a.ServeStdio(ctx, os.Stdin, os.Stdout)
		a.Shutdown(context.Background())
		if err != nil && ctx.Err() == nil {
			log.Error("stdio", "err", err)
			return 1
		}
		return 0
	}
	if err := a.Listen(); err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	<-ctx.Done()
	log.Info("shutting down: finishing in-flight requests")
	if err := a.Shutdown(context.Background()); err != nil {
		log.Warn("shutdown", "err", err)
	}
	log.Info("stopped")
	return 0
}

// version is app.Version as set at build time, or, for a plain `go build`, the commit
// the binary was built from (and whether the tree had uncommitted changes).
func version() string {
	if app.Version != "dev" {
		return app.Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return app.Version
	}
	rev, dirty := "", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return app.Version
	}
	return app.Version + " (" + rev + dirty + ")"
}
