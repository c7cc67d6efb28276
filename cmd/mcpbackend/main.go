// Command mcpbackend is a fast reference MCP server for demos, tests and benchmarks:
// tools echo, sleep, payload, fail, fail_rpc, progress, sample, touch and log; resources
// that change on a timer or on request; templates; prompts with completions. It speaks
// Streamable HTTP (/mcp), legacy HTTP+SSE (/sse, /message) and stdio.
//
//	mcpbackend [--listen 127.0.0.1:8090] [--name NAME] [--tools N] [--resources N]
//	           [--page-size 50] [--tick 1s] [--sample-timeout 1m] [--max-inflight 10000]
//	           [--log-level info] [--eras both|legacy|modern] [--keep-alive 15s]
//	           [--fault KIND[,KIND]]
//	mcpbackend stdio [same flags]     serve one client on stdin/stdout (logs on stderr)
//
// --eras chooses the protocol generations: the 2025 revisions (initialize, sessions), MCP
// 2026-07-28 (stateless: server/discover, per-request _meta, input_required sampling,
// subscriptions/listen), or both on the same endpoints (the default), decided per request.
//
// --fault makes the backend hostile on purpose, for tests of a router: each KIND (slow-bytes,
// oversize, flood-notifications, invalid-json, unknown-id, double-answer, never-answer, or
// all) adds a tool fault_<kind> that misbehaves that way, beside the well-behaved tools.
//
// The HTTP server logs "mcpbackend listening" with addr= once it accepts connections
// (--listen with port 0 picks a free port; read it there).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/transport"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stdio := false
	if len(args) > 0 && args[0] == "stdio" {
		stdio, args = true, args[1:]
	}
	fs := flag.NewFlagSet("mcpbackend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8090", "address of the HTTP endpoints (/mcp, /sse, /message)")
	name := fs.String("name", "mcpbackend", "server name announced at initialize (identification only)")
	tools := fs.Int("tools", 0, "add N generated echo-like tools tool_0001... (catalog and pagination tests)")
	resources := fs.Int("resources", 0, "add N resources item://0001...")
	pageSize := fs.Int("page-size", 50, "entries per page of every */list")
	tick := fs.Duration("tick", time.Second, "period at which counter://tick changes (0 or negative: never)")
	sampleTimeout := fs.Duration("sample-timeout", time.Minute, "how long the sample tool waits for the client's answer")
	maxInFlight := fs.Int("max-inflight", 10000, "bound on concurrent sleep/progress/sample calls")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	erasFlag := fs.String("eras", "both", "protocol generations served: both, legacy (2024-11-05..2025-11-25) or modern (2026-07-28)")
	natsURL := fs.String("nats", "", "also join this NATS server (nats://host:port) as the service --service")
	keepAlive := fs.Duration("keep-alive", 15*time.Second, "interval of SSE comments on a 2026-07-28 response stream with nothing to say; a client that went away is noticed at the next one or two")
	faultFlag := fs.String("fault", "", "hostile tools to add, comma-separated: "+strings.Join(server.FaultNames(), ", ")+", or all (tests only)")
	service := fs.String("service", "mcpbackend", "NATS service name (with --nats): routers reach it with backends[].nats")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "mcpbackend: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *pageSize < 1 { // the Config would read 0 as "default"; a flag of 0 is a mistake
		fmt.Fprintln(stderr, "mcpbackend: --page-size must be at least 1")
		return 2
	}
	eras, err := server.ParseEras(*erasFlag)
	if err != nil {
		fmt.Fprintln(stderr, "mcpbackend: --eras:", err)
		return 2
	}
	faults, err := server.ParseFaults(*faultFlag)
	if err != nil {
		fmt.Fprintln(stderr, "mcpbackend: --fault:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "mcpbackend: --log-level:", err)
		return 2
	}
	// Logs go to stderr always: stdout may be the MCP channel.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	if *tick <= 0 {
		*tick = -1 // Config: negative disables
	}
	// Host/Origin checks follow the listener: loopback names for a loopback address,
	// anything otherwise (see transport.DefaultHTTPRules).
	rules := transport.DefaultHTTPRules(*listen, nil, "")
	srv, err := server.New(server.Config{
		Name: *name, ExtraTools: *tools, ExtraResources: *resources, PageSize: *pageSize,
		Tick: *tick, SampleTimeout: *sampleTimeout, MaxInFlight: *maxInFlight, Logger: log,
		AllowedHosts: rules.AllowedHosts, AllowedOrigins: rules.AllowedOrigins, Eras: eras,
		Faults: faults, KeepAlive: *keepAlive,
	})
	if err != nil {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	closeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 5*time.Second)
	}

	if stdio {
		// On a signal the backend does not wait for ServeStdio's grace period (which
		// lets replies in flight out, possibly a long sleep): Close ends the calls in
		// flight and the process exits, whatever the state of the stdin read.
		served := make(chan error, 1)
		go func() { served <- srv.ServeStdio(ctx, stdin, stdout) }()
		var err error
		select {
		case err = <-served:
		case <-ctx.Done():
			log.Info("shutting down")
		}
		cctx, cancel := closeCtx()
		defer cancel()
		srv.Close(cctx)
		if err != nil && ctx.Err() == nil {
			log.Error("stdio", "err", err)
			return 1
		}
		return 0
	}
	if err := srv.Listen(*listen); err != nil {
		log.Error("cannot listen", "err", err)
		return 1
	}
	log.Info("mcpbackend listening", "addr", srv.Addr(), "mcp", server.PathMCP, "sse", server.PathSSE, "name", *name, "eras", eras, "faults", faults)
	if *natsURL != "" {
		// A fleet of backend processes scales by starting more of them: each joins the
		// service's queue group, and new upstream sessions spread over them.
		nc, err := nats.Connect(*natsURL, nats.Name("mcpbackend "+*name), nats.MaxReconnects(-1))
		if err != nil {
			log.Error("cannot connect to NATS", "url", *natsURL, "err", err)
			return 1
		}
		defer nc.Close()
		ns, err := transport.ServeNATS(nc, transport.NATSServeConfig{Service: *service, Description: "mcpbackend reference MCP server"}, srv.Registry(), srv)
		if err != nil {
			log.Error("cannot serve on NATS", "err", err)
			return 1
		}
		defer ns.Stop()
		log.Info("mcpbackend joined NATS", "service", *service, "subject", "mcp."+*service, "direct", ns.Direct())
	}
	<-ctx.Done()
	log.Info("shutting down")
	cctx, cancel := closeCtx()
	defer cancel()
	if err := srv.Close(cctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	return 0
}
