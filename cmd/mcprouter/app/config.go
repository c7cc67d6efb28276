// Package app assembles a complete mcprouter from its configuration: transports, router,
// dispatcher, and (as they land) backends, NATS and the admin listener. cmd/mcprouter is
// a thin shell around it, and tests and benchmarks start real routers with it.
package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/tracing"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// Config is mcprouter's configuration file (YAML). Every field has a zero-value default,
// documented on it; Validate names the first bad key and why.
type Config struct {
	// Listen is the address of the MCP endpoints. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// Paths of the endpoints.
	Paths PathsConfig `yaml:"paths"`
	// Sessions bounds client sessions.
	Sessions SessionsConfig `yaml:"sessions"`
	// Limits bounds what one request may carry.
	Limits LimitsConfig `yaml:"limits"`
	// Security lists the Host and Origin values accepted.
	Security SecurityConfig `yaml:"security"`
	// Streams bounds SSE streams.
	Streams StreamsConfig `yaml:"streams"`
	// Workers sizes the dispatcher.
	Workers WorkersConfig `yaml:"workers"`
	// ShutdownGrace is how long in-flight requests get to finish on SIGINT/SIGTERM.
	// Default 10s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Backends are the MCP servers behind the router.
	Backends []BackendConfig `yaml:"backends"`
	// Health checks every backend instance with ping: an instance failing two in a row
	// is ejected from load balancing until it answers again.
	Health HealthConfig `yaml:"health"`
	// NATS is the distributed engine: embedded by default (nothing to install, no port),
	// or an existing cluster with nats.url.
	NATS natsbus.Config `yaml:"nats"`
	// Admin is the operator's listener: metrics, health, status page (admin.go).
	Admin AdminConfig `yaml:"admin"`
	// Connections bounds the MCP listener's connections: timeouts, per-address cap,
	// concurrency (edge.go).
	Connections ConnectionsConfig `yaml:"connections"`
	// MemoryLimit is the Go runtime's soft memory limit (GOMEMLIMIT), in bytes or with a
	// unit ("1536MiB", "2GiB"). Default: 90% of the cgroup's memory limit when there is
	// one; a GOMEMLIMIT environment variable wins over both (memlimit.go).
	MemoryLimit string `yaml:"memory_limit"`
	// HeapFloor lets the heap gather this much garbage ("32MiB") before a collection
	// while the live heap is small: fewer collections for more memory. Off by default
	// (heapfloor.go says why).
	HeapFloor string `yaml:"heap_floor"`
	// Stateless decides whether requests claiming MCP 2026-07-28 are served
	// statelessly: auto (the default: when every backend speaks 2026-07-28 over shared
	// connections, so nothing needs translating between generations), on (always) or
	// off (never: such clients fall back to initialize and a session).
	Stateless string `yaml:"stateless"`
	// Auth authenticates MCP clients on the MCP listener (transport/auth).
	Auth auth.Config `yaml:"auth"`
	// Policy says who may do what: CEL rules over the principal and the request, the
	// lists filtered from them, MCP-aware rate limits, audit (router/policy, policy.go).
	Policy policy.Config `yaml:"policy"`
	// Tracing exports OpenTelemetry traces of client requests and backend calls over
	// OTLP; off by default (the tracing package; OTEL_* variables fill in the rest).
	Tracing tracing.Config `yaml:"tracing"`
	// Reload says when the configuration file is read again besides SIGHUP (reload.go).
	Reload ReloadConfig `yaml:"reload"`
	// RequestState keys the requestState handed to 2026-07-28 clients: the same
	// secret on every instance routes a client's retry to the instance that owns its
	// state (requeststate.go).
	RequestState RequestStateConfig `yaml:"request_state"`
	// VirtualServers are more MCP endpoints, each at <paths.mcp>/<name> with its own
	// backends and tools, auth and policy (vserver.go).
	VirtualServers []VirtualServer `yaml:"virtual_servers"`
}

// HealthConfig times the backends' health checks.
type HealthConfig struct {
	Interval time.Duration `yaml:"interval"` // default 5s
	Timeout  time.Duration `yaml:"timeout"`  // default 2s
}

// PathsConfig names the HTTP endpoints.
type PathsConfig struct {
	MCP     string `yaml:"mcp"`     // Streamable HTTP. Default /mcp.
	SSE     string `yaml:"sse"`     // legacy HTTP+SSE stream. Default /sse.
	Message string `yaml:"message"` // legacy HTTP+SSE POST. Default /message.
}

// SessionsConfig bounds client sessions.
type SessionsConfig struct {
	Max         int           `yaml:"max"`          // default 10000
	IdleTimeout time.Duration `yaml:"idle_timeout"` // default 30m
	// NoPersist keeps sessions in this process only. By default (with a JetStream other instances reach: nats.url, listen or cluster) session
	// records and recent GET stream events live in NATS, so that a client whose router
	// instance died carries on with another one.
	NoPersist bool `yaml:"no_persist"`
	// MaxPerClient caps the sessions of one client address (IPv4 address, IPv6 /64);
	// past it a new session replaces that address's longest-idle one, or is refused if
	// all are busy. Default 1000; -1: no cap.
	MaxPerClient int `yaml:"max_per_client"`
	// InitTimeout ends sessions that have not sent notifications/initialized this long
	// after they opened (legacy GET /sse streams included). Default 30s; -1s: never.
	InitTimeout time.Duration `yaml:"init_timeout"`
	// InitRate and InitBurst limit new sessions per client address (token bucket, per
	// second): 429 with Retry-After beyond. Defaults 100 and 200; init_rate -1: no limit.
	InitRate  float64 `yaml:"init_rate"`
	InitBurst int     `yaml:"init_burst"`
	// BudgetBytes is the memory budget of everything kept for clients (resumption rings,
	// retained reply streams, queued events, session records); ShareBytes is the most one
	// session may hold of it. Past its share a session's oldest retained data goes first.
	// Defaults 1 GiB and 16 MiB; budget_bytes -1: no budget.
	BudgetBytes int64 `yaml:"budget_bytes"`
	ShareBytes  int64 `yaml:"share_bytes"`
}

// LimitsConfig bounds requests.
type LimitsConfig struct {
	MaxBodyBytes   int `yaml:"max_body_bytes"`   // default 4 MiB: 413 beyond
	MaxHeaderBytes int `yaml:"max_header_bytes"` // default 16 KiB: 431 beyond
	MaxBatch       int `yaml:"max_batch"`        // default 256: -32600 beyond

	// What one client session may make the router hold for it (router/fleet).

	// MaxSubscriptionsPerSession caps resources/subscribe per session. Default 256.
	MaxSubscriptionsPerSession int `yaml:"max_subscriptions_per_session"`
	// MaxPendingServerRequests caps backends' requests (sampling, roots, elicitation)
	// waiting for one session's answer; the backend gets an error beyond. Default 32.
	MaxPendingServerRequests int `yaml:"max_pending_server_requests"`
	// ServerRequestTimeout bounds how long such a request waits for the client's
	// answer. Default 0: the backend's timeout.
	ServerRequestTimeout time.Duration `yaml:"server_request_timeout"`
	// MaxUpstreamSessions caps the upstream sessions of per-client backends over all
	// backends (for a stdio backend, its child processes). Default 64.
	MaxUpstreamSessions int `yaml:"max_upstream_sessions"`
	// UpstreamSessionWait bounds how long a request waits for one beyond the cap
	// before it is refused as overloaded. Default 10s.
	UpstreamSessionWait time.Duration `yaml:"upstream_session_wait"`
}

// SecurityConfig lists accepted Host and Origin values; empty lists take the defaults
// (loopback names when listening on loopback, anything otherwise).
type SecurityConfig struct {
	AllowedHosts   []string `yaml:"allowed_hosts"`
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowUnauthenticated is deprecated: auth.mode: off says the same. Without
	// auth.mode it lets the MCP listener listen on a non-loopback address with clients
	// unauthenticated, provided allowed_hosts and allowed_origins are set too (edge.go).
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
}

// StreamsConfig bounds SSE streams.
type StreamsConfig struct {
	RingBytes  int           `yaml:"ring_bytes"`  // recent events kept for resumption; default 1 MiB
	QueueBytes int           `yaml:"queue_bytes"` // unwritten bytes before a slow consumer is cut; default 512 KiB
	KeepAlive  time.Duration `yaml:"keepalive"`   // default 15s
	RetryMs    int           `yaml:"retry_ms"`    // default 1000
	// MaxReplyStreams bounds the finished POST reply streams a session keeps for
	// resumption. Default 8.
	MaxReplyStreams int `yaml:"max_reply_streams"`
}

// WorkersConfig sizes the dispatcher; zero values take the workers package defaults.
type WorkersConfig struct {
	Shards     int `yaml:"shards"`
	QueueDepth int `yaml:"queue_depth"`
	PoolSize   int `yaml:"pool_size"`
}

// PipelineSetting is an HTTP backend's pipeline key: "auto", which is also its zero
// value (unset), "off" (or 0, what the key meant before "auto" was the default), or
// a number of connections over which every call is pipelined.
type PipelineSetting struct {
	// Conns is N of "pipeline: N"; 0 is auto unless Off.
	Conns int
	// Off is "pipeline: off" (or 0, or false).
	Off bool
}

// UnmarshalYAML reads auto, off, false, or an integer (0 is off; a negative one is
// kept for Validate to name).
func (p *PipelineSetting) UnmarshalYAML(n *yaml.Node) error {
	*p = PipelineSetting{}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: pipeline is auto, off, or a number of connections", n.Line)
	}
	switch n.Value {
	case "auto":
		return nil
	case "off", "false":
		p.Off = true
		return nil
	}
	c, err := strconv.Atoi(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: pipeline: %q is neither auto, off, nor a number of connections", n.Line, n.Value)
	}
	p.Conns, p.Off = c, c == 0
	return nil
}

// MarshalYAML writes the setting as it is read (backendDigest compares the YAML).
func (p PipelineSetting) MarshalYAML() (any, error) {
	switch {
	case p.Off:
		return "off", nil
	case p.Conns != 0:
		return p.Conns, nil
	}
	return "auto", nil
}

// BackendConfig is one MCP server (or a set of replicas) behind the router.
type BackendConfig struct {
	// Name is unique, and the default prefix of the backend's tool and prompt names.
	Name string `yaml:"name"`
	// URL of a Streamable HTTP endpoint, or of a legacy /sse endpoint.
	URL string `yaml:"url"`
	// URLs are replicas of one backend.
	URLs []string `yaml:"urls"`
	// Command runs a stdio server as child processes.
	Command []string `yaml:"command"`
	// Instances of Command to run, or upstream sessions to a NATS backend. Default 1.
	Instances int `yaml:"instances"`
	// Prefix of the backend's names; nil means Name, "" exposes names unchanged.
	Prefix *string `yaml:"prefix"`
	// NATS is the service name of a backend that joined over NATS.
	NATS string `yaml:"nats"`
	// Timeout per request. Default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxConcurrency caps requests in flight to this backend. Default 256.
	MaxConcurrency int `yaml:"max_concurrency"`
	// Pipeline, for HTTP backends: HTTP/1.1 pipelining of POSTs, fewer system calls per
	// call under load. "auto" (default): over 2 connections, for calls whose kind (tool,
	// prompt, resource, method) was recently short on this backend, so that no call
	// waits behind a slow one it could have been told from; a number N: every call,
	// over at most N connections (a slow call delays the ones queued behind it); "off"
	// or 0: never.
	Pipeline PipelineSetting `yaml:"pipeline"`
	// Sessions: "shared" (default) multiplexes clients over upstream sessions;
	// "per-client" opens one upstream session per client session.
	Sessions string `yaml:"sessions"`
	// SessionIdle is how long an upstream session the router opened for some clients
	// only (a 2026-07-28 principal's with a per-client backend, or one declaring a set
	// of 2026 clients' capabilities to a 2025 backend) stays open unused. Default 5m.
	SessionIdle time.Duration `yaml:"session_idle"`
	// Era pins the protocol generation spoken to the backend: "2026" uses it statelessly
	// (2026-07-28, per-request _meta, no upstream session), "2025" initializes an
	// upstream session, "auto" (default) discovers it on every connect (server/discover
	// first, initialize as the fall-back) and again after the backend restarts.
	Era string `yaml:"era"`
	// Env holds "KEY=value" entries for the child processes of command.
	Env []string `yaml:"env"`
	// EnvAllow names the router's environment variables a child process sees (a name,
	// or a prefix ending in *), besides env. Default: PATH, HOME, USER, LOGNAME, SHELL,
	// LANG, LANGUAGE, LC_*, TZ, TMPDIR, TERM (upstream.DefaultEnvAllow): never the
	// router's secrets.
	EnvAllow []string `yaml:"env_allow"`
	// Auth is the backend's own credentials (backendauth.go): never the client's token.
	Auth BackendAuthConfig `yaml:"auth"`
}

// Defaults fills every zero field with its default.
func (c *Config) Defaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defInt := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	def(&c.Listen, "127.0.0.1:8080")
	def(&c.Stateless, router.StatelessAuto)
	def(&c.Paths.MCP, "/mcp")
	def(&c.Paths.SSE, "/sse")
	def(&c.Paths.Message, "/message")
	defInt(&c.Sessions.Max, 10000)
	if c.Sessions.IdleTimeout == 0 {
		c.Sessions.IdleTimeout = 30 * time.Minute
	}
	c.Sessions.defaults()
	defInt(&c.Limits.MaxBodyBytes, 4<<20)
	defInt(&c.Limits.MaxHeaderBytes, 16<<10)
	defInt(&c.Limits.MaxBatch, 256)
	defInt(&c.Limits.MaxSubscriptionsPerSession, 256)
	defInt(&c.Limits.MaxPendingServerRequests, 32)
	defInt(&c.Limits.MaxUpstreamSessions, 64)
	if c.Limits.UpstreamSessionWait == 0 {
		c.Limits.UpstreamSessionWait = 10 * time.Second
	}
	defInt(&c.Streams.RingBytes, 1<<20)
	defInt(&c.Streams.QueueBytes, 512<<10)
	if c.Streams.KeepAlive == 0 {
		c.Streams.KeepAlive = 15 * time.Second
	}
	defInt(&c.Streams.RetryMs, 1000)
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	c.Admin.defaults(c.Listen)
	c.Reload.defaults()
	c.Connections.defaults()
	c.authDefaults()
	c.vserverDefaults()
	for i := range c.Backends {
		b := &c.Backends[i]
		defInt(&b.Instances, 1)
		if b.Timeout == 0 {
			b.Timeout = 60 * time.Second
		}
		defInt(&b.MaxConcurrency, 256)
		def(&b.Sessions, "shared")
		if b.Prefix == nil {
			p := b.Name
			b.Prefix = &p
		}
	}
}

// Validate checks c (after Defaults) and names the first bad key.
func (c *Config) Validate() error {
	if err := c.Policy.Validate(); err != nil {
		return err // each problem says policy.rules[i] or policy.limits[i] itself
	}
	if err := c.Tracing.Validate(); err != nil {
		return err
	}
	if err := c.RequestState.validate(); err != nil {
		return err
	}
	switch c.Stateless {
	case router.StatelessAuto, router.StatelessOn, router.StatelessOff:
	default:
		return fmt.Errorf("stateless: %q must be auto, on or off", c.Stateless)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %q is not host:port: %v", c.Listen, err)
	}
	for key, p := range map[string]string{"paths.mcp": c.Paths.MCP, "paths.sse": c.Paths.SSE, "paths.message": c.Paths.Message} {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%s: %q must start with /", key, p)
		}
	}
	if c.Paths.MCP == c.Paths.SSE || c.Paths.MCP == c.Paths.Message || c.Paths.SSE == c.Paths.Message {
		return errors.New("paths: mcp, sse and message must differ")
	}
	positive := []struct {
		key string
		v   int
	}{
		{"sessions.max", c.Sessions.Max}, {"limits.max_body_bytes", c.Limits.MaxBodyBytes},
		{"limits.max_header_bytes", c.Limits.MaxHeaderBytes}, {"limits.max_batch", c.Limits.MaxBatch},
		{"limits.max_subscriptions_per_session", c.Limits.MaxSubscriptionsPerSession},
		{"limits.max_pending_server_requests", c.Limits.MaxPendingServerRequests},
		{"limits.max_upstream_sessions", c.Limits.MaxUpstreamSessions},
		{"streams.ring_bytes", c.Streams.RingBytes}, {"streams.queue_bytes", c.Streams.QueueBytes},
		{"streams.retry_ms", c.Streams.RetryMs}, {"streams.max_reply_streams", c.Streams.MaxReplyStreams},
		{"sessions.init_burst", c.Sessions.InitBurst},
		{"workers.shards", c.Workers.Shards}, {"workers.queue_depth", c.Workers.QueueDepth},
		{"workers.pool_size", c.Workers.PoolSize},
	}
	for _, p := range positive {
		if p.v < 0 {
			return fmt.Errorf("%s: must not be negative (got %d)", p.key, p.v)
		}
	}
	for key, d := range map[string]time.Duration{
		"limits.server_request_timeout": c.Limits.ServerRequestTimeout,
		"limits.upstream_session_wait":  c.Limits.UpstreamSessionWait,
		// The components take a negative value for their default: refused here, so
		// that a sign typo is not a silent 30m, 10s, 15s, 5s or 2s.
		"sessions.idle_timeout": c.Sessions.IdleTimeout,
		"shutdown_grace":        c.ShutdownGrace,
		"streams.keepalive":     c.Streams.KeepAlive,
		"health.interval":       c.Health.Interval,
		"health.timeout":        c.Health.Timeout,
	} {
		if d < 0 {
			return fmt.Errorf("%s: must not be negative (got %v)", key, d)
		}
	}
	if err := c.Sessions.validate(); err != nil {
		return err
	}
	if c.Streams.RingBytes < c.Streams.QueueBytes {
		return fmt.Errorf("streams.ring_bytes (%d) must be at least streams.queue_bytes (%d): events cut from a slow consumer must stay for resumption", c.Streams.RingBytes, c.Streams.QueueBytes)
	}
	if err := c.NATS.Validate(); err != nil {
		return err
	}
	if err := c.Admin.validate(c.Listen); err != nil {
		return err
	}
	if err := c.Reload.validate(); err != nil {
		return err
	}
	if err := c.validateEdge(); err != nil {
		return err
	}
	if err := c.validateVServers(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, b := range c.Backends {
		key := fmt.Sprintf("backends[%d]", i)
		if b.Name == "" {
			return fmt.Errorf("%s.name: required", key)
		}
		if seen[b.Name] {
			return fmt.Errorf("%s.name: %q is used twice", key, b.Name)
		}
		seen[b.Name] = true
		kinds := 0
		for _, set := range []bool{b.URL != "", len(b.URLs) > 0, len(b.Command) > 0, b.NATS != ""} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			return fmt.Errorf("%s (%s): exactly one of url, urls, command, nats must be set", key, b.Name)
		}
		for _, u := range append([]string{b.URL}, b.URLs...) {
			if u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				return fmt.Errorf("%s.url: %q must be an http:// or https:// URL", key, u)
			}
		}
		if b.Timeout < 0 {
			return fmt.Errorf("%s.timeout: must not be negative (got %s)", key, b.Timeout)
		}
		if b.MaxConcurrency < 0 {
			return fmt.Errorf("%s.max_concurrency: must not be negative (got %d)", key, b.MaxConcurrency)
		}
		if b.Instances < 1 {
			return fmt.Errorf("%s.instances: must be at least 1", key)
		}
		if b.Pipeline.Conns < 0 {
			return fmt.Errorf("%s.pipeline: must not be negative (got %d)", key, b.Pipeline.Conns)
		}
		if b.Pipeline.Conns > 0 && b.URL == "" && len(b.URLs) == 0 {
			return fmt.Errorf("%s.pipeline: only HTTP backends (url, urls) pipeline", key)
		}
		if err := commandOnly(key, b); err != nil {
			return err
		}
		if b.Sessions != "shared" && b.Sessions != "per-client" {
			return fmt.Errorf("%s.sessions: %q is neither shared nor per-client", key, b.Sessions)
		}
		if b.SessionIdle < 0 {
			return fmt.Errorf("%s.session_idle: must not be negative (got %s)", key, b.SessionIdle)
		}
		if b.Era != "" && b.Era != "auto" && b.Era != "2025" && b.Era != "2026" {
			return fmt.Errorf("%s.era: %q is none of auto, 2025, 2026", key, b.Era)
		}
		if b.Prefix != nil && strings.Contains(*b.Prefix, "__") {
			return fmt.Errorf("%s.prefix: %q must not contain the separator __", key, *b.Prefix)
		}
	}
	return c.validateBackendAuth()
}

// commandOnly refuses the keys that a backend ignores: env and env_allow shape child
// processes, which only command backends start, and instances counts child processes
// or (nats) upstream sessions; an operator who set instances: 4 on a URL backend
// believes four replicas serve it.
func commandOnly(key string, b BackendConfig) error {
	if b.Instances > 1 && len(b.Command) == 0 && b.NATS == "" {
		return fmt.Errorf("%s.instances: only command and nats backends have instances (list an HTTP backend's replicas in urls)", key)
	}
	if len(b.Command) > 0 {
		return nil
	}
	switch {
	case len(b.Env) > 0:
		return fmt.Errorf("%s.env: only command backends start processes", key)
	case len(b.EnvAllow) > 0:
		return fmt.Errorf("%s.env_allow: only command backends start processes", key)
	}
	return nil
}

// LoadConfig reads a YAML file; unknown keys are errors (a typo must not pass silently).
func LoadConfig(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	return ParseConfig(data)
}

// ParseConfig parses YAML configuration, applies defaults and validates.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("config: %w", err)
	}
	c.Defaults()
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// ParseBackendFlag reads the quick form of a backend: NAME=URL or NAME=cmd:COMMAND ARGS.
func ParseBackendFlag(v string) (BackendConfig, error) {
	name, target, ok := strings.Cut(v, "=")
	if !ok || name == "" || target == "" {
		return BackendConfig{}, errors.New("want NAME=URL or NAME=cmd:COMMAND ARGS")
	}
	b := BackendConfig{Name: name}
	if cmd, isCmd := strings.CutPrefix(target, "cmd:"); isCmd {
		b.Command = strings.Fields(cmd)
		if len(b.Command) == 0 {
			return b, errors.New("cmd: needs a command")
		}
	} else {
		b.URL = target
	}
	return b, nil
}
