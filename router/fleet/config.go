package fleet

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/mcprouter/mcprouter/internal/defaults"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Separator joins a backend's prefix and an item's own name: "files__read". Two
// underscores are allowed in tool and prompt names by every revision and by the function
// name rules of the common LLM APIs (letters, digits, _ and -), unlike "/", ":" or ".",
// and are rare enough inside real names to make the split unambiguous.
const Separator = "__"

// BackendConfig describes one backend: one or more instances serving the same catalog.
type BackendConfig struct {
	// Name identifies the backend in logs, metrics and errors.
	Name string
	// Prefix is put before the backend's tool and prompt names (with Separator); ""
	// exposes them unchanged.
	Prefix string
	// Dialers open a connection to each instance (a replica URL, a child process).
	Dialers []Dialer
	// Timeout bounds each forwarded request. Default 60s.
	Timeout time.Duration
	// MaxConcurrency caps requests in flight to the backend (all instances). Default 256.
	MaxConcurrency int
	// PerClient opens one upstream session per client session and instance, initialized
	// with that client's own capabilities, instead of multiplexing every client over one
	// shared session per instance.
	PerClient bool
	// SessionIdle is how long the router keeps an upstream session it opened for some
	// clients only (a 2026-07-28 principal's, or one declaring a set of 2026 clients'
	// capabilities) unused before closing it: long enough for an agent's pauses between
	// tool calls, short enough that a client gone for good gives its backend session
	// (a child process, for stdio) back. Default 5m.
	SessionIdle time.Duration
	// Era pins the protocol generation spoken to the backend (EraAuto: discovered on
	// every connect, server/discover first and initialize as the fall-back).
	Era Era
	// Digest identifies the configuration the backend was built from (the caller's
	// choice: a hash of its configuration section). Reconfigure keeps a backend whose
	// name and Digest are unchanged and replaces one whose Digest changed; "" is never
	// unchanged.
	Digest string
}

// Era is the protocol generation a backend is spoken to in.
type Era uint8

const (
	// EraAuto discovers the era of each instance when it connects, and again after it
	// restarts: server/discover (2026-07-28) first, initialize when that fails.
	EraAuto Era = iota
	// Era2025 initializes an upstream session (2025-11-25 and earlier revisions).
	Era2025
	// Era2026 uses the backend statelessly (2026-07-28): no upstream session, a
	// per-request _meta on every request.
	Era2026
)

// String names the era as the configuration does.
func (e Era) String() string {
	switch e {
	case Era2025:
		return "2025"
	case Era2026:
		return "2026"
	}
	return "auto"
}

// Dialer opens one upstream connection to one instance of a backend, delivering what the
// backend sends to sink.
type Dialer struct {
	// Addr names the instance in logs (a URL, "stdio#2").
	Addr string
	Dial func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error)
}

// Config configures a Fleet. Zero values take the defaults.
type Config struct {
	Backends []BackendConfig
	// PageSize is the number of items per page of the merged lists. Default 100.
	PageSize int
	// HealthInterval is the period of the ping health checks. Default 5s.
	HealthInterval time.Duration
	// HealthTimeout bounds one health ping. Default 2s.
	HealthTimeout time.Duration
	// ClientName and ClientVersion are the clientInfo the router presents to backends.
	ClientName, ClientVersion string
	// Logger receives the fleet's logs. Default slog.Default().
	Logger *slog.Logger
	// Bus, when set, spreads subscriptions and catalog changes across every router
	// instance on the same NATS.
	Bus *natsbus.Bus
	// StateKey seals the requestState handed to 2026-07-28 clients (mrtr.go): 32
	// secret bytes shared by every router instance of the cluster, so that any of them
	// can verify a state and route its retry to the instance that owns it over Bus
	// (mrtr_owner.go). Nil: a random key of this process; a state another instance
	// sealed is then refused.
	StateKey []byte

	// Limits that keep one client from exhausting the router.

	// ServerRequestTimeout bounds how long a backend's request to a client (sampling,
	// roots, elicitation) waits for the answer; then the backend gets an error
	// (codec.CodeClientTimeout) and the client a notifications/cancelled. Default: the
	// backend's Timeout.
	ServerRequestTimeout time.Duration
	// MaxServerRequests caps the backends' requests waiting for one client session's
	// answer; beyond it the backend gets an error at once (codec.CodeSessionLimit).
	// Default 32.
	MaxServerRequests int
	// MaxSubscriptions caps the resources one client session may subscribe to (on
	// shared upstream sessions); beyond it resources/subscribe gets codec.CodeSessionLimit.
	// Default 256.
	MaxSubscriptions int
	// MaxUpstreamSessions caps the per-client upstream sessions (PerClient backends)
	// open at once, over every backend: for a stdio backend each is a child process.
	// Default 64.
	MaxUpstreamSessions int
	// UpstreamSessionWait bounds how long a request waits for a per-client upstream
	// session beyond MaxUpstreamSessions (within its own timeout) before it is refused
	// as overloaded. Default 10s.
	UpstreamSessionWait time.Duration
}

func (c *Config) defaults() {
	c.PageSize = defaults.Positive(c.PageSize, 100)
	c.HealthInterval = defaults.Positive(c.HealthInterval, 5*time.Second)
	c.HealthTimeout = defaults.Positive(c.HealthTimeout, 2*time.Second)
	c.ClientName = cmp.Or(c.ClientName, "mcprouter")
	c.ClientVersion = cmp.Or(c.ClientVersion, "dev")
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxServerRequests = defaults.Positive(c.MaxServerRequests, 32)
	c.MaxSubscriptions = defaults.Positive(c.MaxSubscriptions, 256)
	c.MaxUpstreamSessions = defaults.Positive(c.MaxUpstreamSessions, 64)
	c.UpstreamSessionWait = defaults.Positive(c.UpstreamSessionWait, 10*time.Second)
	for i := range c.Backends {
		c.Backends[i].defaults()
	}
}

func (b *BackendConfig) defaults() {
	b.Timeout = defaults.Positive(b.Timeout, 60*time.Second)
	b.MaxConcurrency = defaults.Positive(b.MaxConcurrency, 256)
	b.SessionIdle = defaults.Positive(b.SessionIdle, 5*time.Minute)
}
