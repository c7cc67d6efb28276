package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/logsafe"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/readahead"
)

// ConnectionsConfig bounds the MCP listener's connections, so that slow or greedy
// clients cannot hold the router's memory or sockets. Zero values take the defaults;
// a negative value (-1, -1s) turns a cap or timeout off.
type ConnectionsConfig struct {
	// HeaderTimeout is the time a new request's headers have to arrive, from its first
	// byte (from the connection's opening for the first request). Default 10s.
	HeaderTimeout time.Duration `yaml:"header_timeout"`
	// ReadTimeout is the time the body has to arrive once the headers are in.
	// Default 60s; off (-1s), the header deadline covers the body too.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout is the time a reply that is not a stream has to be written: a
	// client that does not read its reply is cut off after it. SSE streams are not
	// bound by it (their slow consumers are cut by streams.queue_bytes). Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long. Default 2m.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxPerAddress caps the open connections of one client IP address; more are
	// refused with 429. Default 512.
	MaxPerAddress int `yaml:"max_per_address"`
	// Concurrency caps the connections served at once, all clients together; more are
	// refused. Default 32768.
	Concurrency int `yaml:"concurrency"`
	// KeepIdleBuffers keeps the read and write buffers of idle keep-alive connections
	// instead of releasing them to pools (fasthttp's ReduceMemoryUsage, on by default):
	// measured, an idle connection holds about 27 KB with its buffers and 4.7 KB
	// without, while a request costs the same within noise (BenchmarkReduceMemory).
	// Default false.
	KeepIdleBuffers bool `yaml:"keep_idle_buffers"`
	// PipelinedReplyWait is how long a reply may wait for the replies of the requests
	// a client pipelined after it (sent before it had the reply), so that they leave in
	// one write: a session's opening pipelines three requests, and each write of the
	// router's own was a system call and a wake-up of the client. The wait ends sooner
	// when the pipelined requests are answered (the common case: microseconds), and
	// never holds a reply back longer than this from a slow request. Default 1ms; off
	// (-1ms), each reply leaves before the next pipelined request is handled.
	PipelinedReplyWait time.Duration `yaml:"pipelined_reply_wait"`
}

func (c *ConnectionsConfig) defaults() {
	defDur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defDur(&c.HeaderTimeout, 10*time.Second)
	defDur(&c.ReadTimeout, 60*time.Second)
	defDur(&c.WriteTimeout, 30*time.Second)
	defDur(&c.IdleTimeout, 2*time.Minute)
	defDur(&c.PipelinedReplyWait, time.Millisecond)
	if c.MaxPerAddress == 0 {
		c.MaxPerAddress = 512
	}
	if c.Concurrency == 0 {
		c.Concurrency = 32768
	}
}

// off maps the "-1 means off" convention to fasthttp's zero.
func off[T int | time.Duration](v T) T { return max(v, 0) }

// validateEdge checks what faces the network: connection limits, a listener exposed
// beyond loopback, the memory limit, the children's environment.
func (c *Config) validateEdge() error {
	if c.Connections.Concurrency < 0 {
		return fmt.Errorf("connections.concurrency: must be positive (got %d)", c.Connections.Concurrency)
	}
	if err := c.validateExposure(); err != nil {
		return err
	}
	if err := c.validateAuth(); err != nil {
		return err
	}
	if _, err := parseBytes(c.MemoryLimit); err != nil {
		return fmt.Errorf("memory_limit: %w", err)
	}
	if _, err := parseBytes(c.HeapFloor); err != nil {
		return fmt.Errorf("heap_floor: %w", err)
	}
	for i, b := range c.Backends {
		for _, e := range b.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return fmt.Errorf("backends[%d].env: %q is not KEY=value", i, e)
			}
		}
	}
	return nil
}

// validateExposure refuses an MCP listener reachable from other machines whose
// configuration does not say how MCP clients are authenticated: auth.mode must be set,
// to bearer or jwt, or to off knowingly. The deprecated security.allow_unauthenticated
// (the explicit off from before auth.mode) still works with the Host and Origin
// allowlists it always required.
func (c *Config) validateExposure() error {
	if isLoopback(c.Listen) {
		return nil
	}
	s := c.Security
	if s.AllowUnauthenticated && c.Auth.Mode == auth.ModeOff && (len(s.AllowedHosts) == 0 || len(s.AllowedOrigins) == 0) {
		return fmt.Errorf("security.allow_unauthenticated: %s is reachable beyond this machine and it serves MCP clients unauthenticated only with "+
			"security.allowed_hosts (the names clients use for the router) and security.allowed_origins (the web origins allowed, "+
			"or [\"null\"] for none) set; better, set auth.mode (bearer or jwt) to authenticate them", c.Listen)
	}
	if c.Auth.Mode == "" {
		return fmt.Errorf("listen: %s is reachable beyond this machine and MCP clients would not be authenticated: "+
			"set auth.mode to bearer or jwt (see auth in the README), or to off to serve them unauthenticated knowingly; "+
			"or listen on 127.0.0.1", c.Listen)
	}
	return nil
}

// isLoopback reports whether a host:port listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// warnClearNATS warns of an embedded NATS server reachable beyond this machine without
// TLS: its credentials and the session records it carries cross the network in clear.
func warnClearNATS(c natsbus.Config, log *slog.Logger) {
	for _, l := range []struct{ key, addr, cert string }{{"nats", c.Listen, c.TLS.Cert}, {"nats.cluster", c.Cluster.Listen, c.Cluster.TLS.Cert}} {
		if l.addr != "" && l.cert == "" && !isLoopback(l.addr) {
			log.Warn("embedded NATS listens beyond loopback without TLS: credentials and session records cross the network in clear; set "+l.key+".tls",
				"listen", l.addr)
		}
	}
}

// listenMCP opens the MCP listener on addr. Its connections get no TCP keep-alive,
// which Go turns on for every accepted connection with four setsockopt calls (1.5% of
// a router's CPU while sessions open, bench/RESULTS.md, OPEN2) and which nothing here
// needs: an idle keep-alive connection is closed after connections.idle_timeout, and a
// held stream writes an SSE keep-alive every streams.keepalive, whose bytes, left
// unacknowledged by a client gone without a word, make TCP give up on it (the kernel
// sends no keep-alive probe while bytes are unacknowledged anyway).
func listenMCP(addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	return lc.Listen(context.Background(), "tcp", addr)
}

// newServer is the MCP listener's HTTP server, with the connection limits of the
// configuration.
func (a *App) newServer() *fasthttp.Server {
	cc := a.cfg.Connections
	bodyTimeout := off(cc.ReadTimeout)
	s := &fasthttp.Server{
		Handler:              holdPlainReplies(a.streamsUnbounded(a.Handler()), off(cc.PipelinedReplyWait)),
		ErrorHandler:         a.rejectRequest,
		Name:                 "mcprouter",
		MaxRequestBodySize:   a.cfg.Limits.MaxBodyBytes,
		ReadBufferSize:       a.cfg.Limits.MaxHeaderBytes,
		ReadTimeout:          off(cc.HeaderTimeout),
		WriteTimeout:         off(cc.WriteTimeout),
		IdleTimeout:          off(cc.IdleTimeout),
		MaxConnsPerIP:        off(cc.MaxPerAddress),
		Concurrency:          cc.Concurrency,
		ReduceMemoryUsage:    !cc.KeepIdleBuffers,
		CloseOnShutdown:      true,
		KeepHijackedConns:    true, // GET streams own their connections (transport.HTTPConfig.KeepsHijackedConns)
		NoDefaultContentType: true,
		// Nothing asks a request for its time (RequestCtx.Time): no clock read per
		// request for it.
		LazyRequestTime: true,
		// Malformed requests are logged without their bytes: they may carry tokens.
		SecureErrorLogMessage: true,
		// A client can provoke these lines at will: a few a second at most.
		Logger: slogPrinter{logsafe.Logger(a.log, 5, 20)},
	}
	// ReadTimeout covers a request's headers; once they are in, the body gets its own
	// deadline (none set: the header deadline covers the body too).
	if bodyTimeout > 0 {
		s.HeaderReceived = func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: bodyTimeout}
		}
	}
	return s
}

// holdPlainReplies lets the listener's connections (transport/readahead) send a reply
// that is not a stream from the read that waits for the connection's next request,
// which saves that read a system call that could only find nothing
// (readahead.ReplyHolder). A request fasthttp read together with the one before it (a
// pipelining client) finds that one's reply still held: it waits for this one's, up to
// wait (connections.pipelined_reply_wait) from the first of the run, and the run's
// replies leave in one write, or with a hijacked stream's first bytes (wait 0: it is
// sent before this request is handled). The bound is the connection's timer, not this
// handler's: a handler that blocks cannot hold an earlier reply back longer.
func holdPlainReplies(h fasthttp.RequestHandler, wait time.Duration) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		rh := readahead.HolderOf(ctx.Conn())
		if rh == nil {
			h(ctx)
			return
		}
		_ = rh.Pipelined(wait) // a failed write fails this reply's too
		h(ctx)
		if !ctx.Response.IsBodyStream() && !ctx.Hijacked() &&
			!ctx.Request.Header.ConnectionClose() && !ctx.Response.ConnectionClose() {
			rh.HoldReply()
		}
	}
}

// streamsUnbounded lifts the write timeout from SSE replies: fasthttp applies it to the
// whole response, and a stream lives as long as its client wants it. A deadline the
// handler sets itself (here: none) takes precedence over the server's.
func (a *App) streamsUnbounded(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	if a.cfg.Connections.WriteTimeout <= 0 {
		return h
	}
	return func(ctx *fasthttp.RequestCtx) {
		h(ctx)
		if ctx.Response.IsBodyStream() || ctx.Hijacked() {
			ctx.SetWriteDeadline(time.Time{})
		}
	}
}
