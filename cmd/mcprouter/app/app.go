package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcphttp"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/logsafe"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/readahead"
	"github.com/mcprouter/mcprouter/transport/sse"
	"github.com/mcprouter/mcprouter/workers"
)

// Version is the router's version, set at build time with -ldflags.
var Version = "dev"

// App is a running router: the transports, the router and what they need. It owns them
// all, builds them from the configuration (New), starts the listeners (Listen, Serve,
// ServeStdio) and stops them in order (Shutdown: intake first, then what is in flight,
// then streams and connections). The command's main goroutine calls New, Listen and
// Shutdown; Reload runs on the reload watcher's goroutine (SIGHUP, the file changed),
// one at a time (reload.go); every other goroutine is the parts' own.
type App struct {
	cfg    Config
	log    *slog.Logger
	Router *router.Router
	Reg    *transport.Registry
	HTTP   *transport.HTTPServer
	Fleet  *fleet.Fleet // never nil: empty without backends
	Bus    *natsbus.Bus
	// Auth authenticates MCP clients (not Enabled with auth.mode off).
	Auth          *auth.Authenticator
	observability // metrics and the admin listener (admin.go)
	tracingState  // OpenTelemetry traces (tracing.go)
	policyState   // the policy engine and its cluster-wide limits (policy.go)
	reloadState   // live configuration reload (reload.go)
	vservers      // the virtual servers (vserver_serve.go)

	ln     net.Listener
	srv    *fasthttp.Server
	served chan error
	once   sync.Once
}

// New builds a router from cfg without opening any listener.
func New(cfg Config, log *slog.Logger) (*App, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	a := &App{cfg: cfg, log: log}
	a.lastSuccess.Store(time.Now().UnixNano())
	authn, err := startAuth(&cfg, log)
	if err != nil {
		return nil, err
	}
	a.Auth = authn
	started := false
	defer func() {
		if !started {
			authn.Close() // its key refresh
		}
	}()
	// The router and the fleet log per-request warnings a client can provoke at will:
	// a few a second at most, with the count of those dropped.
	reqLog := logsafe.LimitWarnings(log, 10, 50)
	a.reqLog = reqLog
	rc := router.Config{
		Name: "mcprouter", Version: Version, Logger: reqLog, Stateless: cfg.Stateless, RunOnCaller: true,
		Workers: workers.Config{Shards: cfg.Workers.Shards, QueueDepth: cfg.Workers.QueueDepth, PoolSize: cfg.Workers.PoolSize},
	}
	bus, err := natsbus.Start(cfg.NATS, log)
	if err != nil {
		return nil, err
	}
	a.Bus = bus
	warnClearNATS(cfg.NATS, log)
	// The fleet is built even with no backends: a reload may add them, and clients
	// then hear list_changed like any other change of the lists.
	fc, err := fleetConfig(&cfg, reqLog, bus)
	if err != nil {
		bus.Close()
		return nil, err
	}
	if len(cfg.Backends) == 0 {
		log.Info("no backends configured: the lists are empty until a configuration reload adds some")
	}
	fc.Bus = bus
	a.Fleet = fleet.New(fc)
	rc.Fleet = a.Fleet
	var events transport.EventLog
	if bus.JS != nil && !cfg.Sessions.NoPersist && bus.Shared() { // records in a private embedded server would end with it, unread
		store, err := bus.Sessions(2 * cfg.Sessions.IdleTimeout)
		if err != nil {
			log.Warn("session records unavailable: sessions stay with their instance", "err", err)
		} else {
			rc.Store = store
		}
		if el, err := bus.Events(1024, cfg.Sessions.IdleTimeout); err != nil {
			log.Warn("event log unavailable: streams resume only on their instance", "err", err)
		} else {
			events = el
		}
	}
	a.initMetrics(&rc)
	if err := a.startTracing(&rc); err != nil {
		bus.Close()
		return nil, err
	}
	r, err := router.New(rc)
	if err != nil {
		bus.Close()
		return nil, err
	}
	a.Router = r
	a.vservers.reg = cfg.Sessions.registryConfig()
	a.Reg = transport.NewRegistry(a.vservers.reg, r)
	rules := transport.DefaultHTTPRules(cfg.Listen, router.HeaderVersions, router.V20250326)
	if len(cfg.Security.AllowedHosts) > 0 {
		rules.AllowedHosts = cfg.Security.AllowedHosts
	}
	if len(cfg.Security.AllowedOrigins) > 0 {
		rules.AllowedOrigins = cfg.Security.AllowedOrigins
	}
	hc := transport.HTTPConfig{
		Rules:          rules,
		MaxBatch:       cfg.Limits.MaxBatch,
		Stream:         sse.StreamConfig{RingBytes: cfg.Streams.RingBytes, QueueBytes: cfg.Streams.QueueBytes, Stats: a.StreamStats},
		KeepAlive:      cfg.Streams.KeepAlive,
		RetryMs:        cfg.Streams.RetryMs,
		LegacyEndpoint: cfg.Paths.Message,
		MaxPostStreams: cfg.Streams.MaxReplyStreams,
		InitRate:       cfg.Sessions.InitRate,
		InitBurst:      cfg.Sessions.InitBurst,
		Events:         events,
		Resolver:       resolver(r, rc.Store != nil),
		Auth:           a.Auth,
		StatusOf:       router.StatusOf,
		Audit:          auditLogger(log),
		TraceHeaders:   &a.traceHeaders,
		// The MCP listener keeps hijacked connections (newServer).
		KeepsHijackedConns: true,
	}
	a.HTTP = transport.NewHTTPServer(hc, a.Reg, r)
	if err := a.watchMetrics(); err != nil {
		bus.Close()
		return nil, err
	}
	if err := a.startPolicy(log); err != nil {
		bus.Close()
		return nil, err
	}
	if err := a.registerReloadMetrics(); err != nil {
		a.stopPolicy()
		bus.Close()
		return nil, err
	}
	if err := a.startVServers(hc, log); err != nil {
		a.stopPolicy()
		bus.Close()
		return nil, err
	}
	started = true
	return a, nil
}

// Handler is the fasthttp handler of every MCP endpoint, and of the protected resource
// metadata when clients are authenticated.
func (a *App) Handler() fasthttp.RequestHandler {
	p := a.cfg.Paths
	h := mcphttp.Handler(a.HTTP, mcphttp.Paths{MCP: p.MCP, SSE: p.SSE, Message: p.Message},
		"not found: the MCP endpoint is "+p.MCP)
	if a.Auth.Enabled() {
		h = withMetadata(h, a.HTTP, a.HTTP.MetadataPaths(p.MCP))
	}
	return a.withVServers(h)
}

// Start connects the backends, waiting up to wait for their catalogs.
func (a *App) Start(wait time.Duration) {
	a.Fleet.Start(wait)
	if a.load != nil {
		a.startReload()
	}
}

// Listen opens the MCP listener and serves on it in the background.
func (a *App) Listen() error {
	ln, err := listenMCP(a.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", a.cfg.Listen, err)
	}
	a.Serve(ln)
	a.log.Info("mcprouter listening", "addr", ln.Addr().String(), "mcp", a.cfg.Paths.MCP, "sse", a.cfg.Paths.SSE)
	return a.listenAdmin()
}

// Serve serves the MCP endpoints on ln in the background, with the limits of the
// configuration; Shutdown stops it. Listen uses it; tests and benchmarks give it an
// in-memory listener. Call it at most once.
func (a *App) Serve(ln net.Listener) {
	a.ln = ln
	a.srv = a.newServer()
	a.served = make(chan error, 1)
	go func() { a.served <- a.srv.Serve(readahead.Listen(ln)) }() // one read per request (transport/readahead)
}

// rejectRequest answers a request fasthttp refused before any handler saw it: a body
// past limits.max_body_bytes (413), headers past limits.max_header_bytes (431), a read
// timeout (408), or broken HTTP (400). The body is a JSON-RPC error that names the
// limit, so that MCP clients can show what went wrong.
func (a *App) rejectRequest(ctx *fasthttp.RequestCtx, err error) {
	status, msg := fasthttp.StatusBadRequest, "malformed HTTP request"
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status = fasthttp.StatusRequestEntityTooLarge
		msg = fmt.Sprintf("request body too large: the limit is %d bytes (limits.max_body_bytes)", a.cfg.Limits.MaxBodyBytes)
	case errors.As(err, &small):
		status = fasthttp.StatusRequestHeaderFieldsTooLarge
		msg = fmt.Sprintf("request headers too large: the limit is %d bytes (limits.max_header_bytes)", a.cfg.Limits.MaxHeaderBytes)
	case errors.As(err, &netErr) && netErr.Timeout():
		status, msg = fasthttp.StatusRequestTimeout, "request not received in time"
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(codec.AppendError(nil, nil, codec.CodeInvalidRequest, msg, nil))
}

// Addr is the listener's address (useful with port 0).
func (a *App) Addr() string {
	if a.ln == nil {
		return ""
	}
	return a.ln.Addr().String()
}

// URL is the Streamable HTTP endpoint's URL.
func (a *App) URL() string { return "http://" + a.Addr() + a.cfg.Paths.MCP }

// ServeStdio serves one client on r/w until r ends.
func (a *App) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	return transport.ServeStdio(ctx, transport.StdioConfig{MaxMessage: a.cfg.Limits.MaxBodyBytes, MaxBatch: a.cfg.Limits.MaxBatch, Grace: a.cfg.ShutdownGrace}, a.Reg, a.Router, r, w)
}

// Shutdown stops accepting connections, lets in-flight requests finish within the grace
// period, ends streams with a retry hint, and releases everything.
func (a *App) Shutdown(ctx context.Context) error {
	var err error
	a.once.Do(func() {
		a.stopping.Store(true) // /readyz turns away new traffic while the rest drains
		a.stopReload()         // no reload starts now, and one under way is over
		grace, cancel := context.WithTimeout(ctx, a.cfg.ShutdownGrace)
		defer cancel()
		// Stop accepting connections at once (the listener closes; idle keep-alive
		// connections close; busy ones close after their response). The server's
		// shutdown then waits, within the grace period, for the connections still open.
		var stopped chan error
		if a.srv != nil {
			stopped = make(chan error, 1)
			go func() { stopped <- a.srv.ShutdownWithContext(grace) }()
		}
		// Stop intake of new messages and finish those in flight first, so their replies
		// still reach the clients, then close streams and connections.
		if rerr := a.Router.Close(grace); rerr != nil && !errors.Is(rerr, context.Canceled) {
			err = rerr
		}
		// Requests forwarded to backends whose replies come asynchronously (stdio,
		// legacy SSE) are still in the fleet's table: give them the rest of the grace.
		a.Fleet.WaitIdle(grace)
		a.HTTP.Shutdown()
		a.Reg.Close()
		a.stopVServers()
		a.Fleet.Close()
		a.stopPolicy()
		a.Bus.Close()
		a.stopTracing()
		a.Auth.Close()
		if stopped != nil {
			if serr := <-stopped; serr != nil && err == nil {
				err = serr
			}
			// The server closes only the listeners its Serve has taken up: a shutdown
			// right after Serve (a SIGTERM as the router starts) could come before
			// Serve's goroutine has, and leave it serving for ever. Closed again here
			// (the error of a second close is nothing), Serve ends either way.
			a.ln.Close()
			<-a.served
		}
		if aerr := a.shutdownAdmin(); aerr != nil && err == nil {
			err = aerr
		}
	})
	return err
}

// slogPrinter adapts fasthttp's logger to slog. The server's SecureErrorLogMessage
// keeps request bytes out of what it prints.
type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, args ...any) {
	p.l.Warn("fasthttp", "msg", fmt.Sprintf(format, args...))
}

// resolver gives the transport the router as its session resolver when there is a
// session store to resolve from.
func resolver(r *router.Router, enabled bool) transport.SessionResolver {
	if !enabled {
		return nil
	}
	return r
}
