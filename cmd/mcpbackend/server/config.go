package server

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Server. The zero value is a working backend: every field has a
// default, applied by New.
type Config struct {
	// Name and Version are the serverInfo announced at initialize. Name only identifies
	// the instance (several backends behind one router); it prefixes nothing.
	// Default "mcpbackend", "dev".
	Name    string
	Version string

	// ExtraTools adds that many generated echo-like tools, tool_0001..., to the catalog,
	// for catalog-size and pagination tests. Default 0.
	ExtraTools int
	// ExtraResources adds that many resources item://0001..., which change when the touch
	// tool names them. Default 0.
	ExtraResources int
	// UnlistedResources keeps the resources and templates out of resources/list and
	// resources/templates/list (they still read). For a second reference backend beside a
	// first: a URI names one resource, and two backends listing the same URIs make a
	// router hide one of them (with a warning).
	UnlistedResources bool
	// PageSize is the number of entries per page of every */list. Default 50.
	PageSize int
	// Tick is the period at which counter://tick changes (and its subscribers are told).
	// Default 1s; negative disables the timer.
	Tick time.Duration

	// MaxInFlight bounds the asynchronous tool calls (sleep, progress, sample) running at
	// once across all sessions; beyond it calls fail fast with an overload error.
	// Default 10000.
	MaxInFlight int
	// MaxSleep bounds the time one sleep or progress call may take. Default 10m.
	MaxSleep time.Duration
	// SampleTimeout bounds how long the sample tool waits for the client's answer.
	// Default 60s.
	SampleTimeout time.Duration
	// MaxSteps bounds the steps of one progress call. Default 100000.
	MaxSteps int
	// MaxPayload bounds the bytes the payload tool and bytes://{n} may produce.
	// Default 16 MiB.
	MaxPayload int

	// MaxSessions and IdleTimeout bound the sessions kept (see transport.RegistryConfig).
	MaxSessions int
	IdleTimeout time.Duration
	// InitTimeout ends a session whose client has not sent notifications/initialized
	// this long after initialize (transport.RegistryConfig.InitTimeout). Default 30s.
	InitTimeout time.Duration
	// MaxBody bounds one incoming HTTP body or stdio message. Default 4 MiB.
	MaxBody int
	// AllowedHosts and AllowedOrigins override the Host/Origin checks; by default a
	// loopback listener accepts loopback names only (see transport.DefaultHTTPRules).
	AllowedHosts   []string
	AllowedOrigins []string

	// Eras selects the protocol generations served: both (the zero value), the 2025
	// revisions only (initialize and sessions), or 2026-07-28 only (stateless, per-request
	// _meta). A dual-era server decides per request: one that claims 2026-07-28 (its _meta
	// or MCP-Protocol-Version) is served statelessly, initialize opens a 2025 session.
	Eras Eras
	// ListTTL is the ttlMs of 2026-07-28 list results (the catalog never changes while
	// the server runs). Default 5m. Reads say 0: counter://tick changes every Tick.
	ListTTL time.Duration
	// KeepAlive is the interval of SSE comments on a 2026-07-28 response stream that has
	// nothing to say; a request unanswered that long becomes a stream, so that a client
	// that went away is noticed (its disconnect cancels the request). Default 15s.
	KeepAlive time.Duration

	// Faults turns on hostile behaviour for router tests: each fault adds a tool
	// fault_<name> that plays it (see Faults). Default none: never in a fleet that is
	// meant to work.
	Faults Faults

	// Logger receives the server's own logs (never the MCP channel). Default slog.Default().
	Logger *slog.Logger
}

// Eras selects the protocol generations a server speaks.
type Eras uint8

const (
	ErasBoth   Eras = iota // 2025 sessions and 2026-07-28 requests on the same endpoints
	ErasLegacy             // 2024-11-05 to 2025-11-25 only
	ErasModern             // 2026-07-28 only
)

var erasNames = [...]string{"both", "legacy", "modern"}

func (e Eras) String() string {
	if int(e) < len(erasNames) {
		return erasNames[e]
	}
	return "invalid"
}

// ParseEras reads "both", "legacy" or "modern".
func ParseEras(s string) (Eras, error) {
	for i, n := range erasNames {
		if s == n {
			return Eras(i), nil
		}
	}
	return 0, fmt.Errorf("eras %q: want both, legacy or modern", s)
}

func (e Eras) legacy() bool { return e != ErasModern }
func (e Eras) modern() bool { return e != ErasLegacy }

// Limits on flag-settable sizes, so that a typo cannot make the backend build a catalog
// that exhausts memory.
const (
	maxExtra    = 1_000_000
	maxPageSize = 10_000
)

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "mcpbackend"
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.PageSize == 0 {
		c.PageSize = 50
	}
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 10000
	}
	if c.MaxSleep == 0 {
		c.MaxSleep = 10 * time.Minute
	}
	if c.SampleTimeout == 0 {
		c.SampleTimeout = time.Minute
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = 100_000
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = 16 << 20
	}
	if c.MaxBody == 0 {
		c.MaxBody = 4 << 20
	}
	if c.ListTTL == 0 {
		c.ListTTL = 5 * time.Minute
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports settings that cannot be what was meant. It checks the configuration
// as given, after defaults are applied (New does both).
func (c *Config) Validate() error {
	var errs []error
	if c.ExtraTools < 0 || c.ExtraTools > maxExtra {
		errs = append(errs, fmt.Errorf("extra tools %d: want 0..%d", c.ExtraTools, maxExtra))
	}
	if c.ExtraResources < 0 || c.ExtraResources > maxExtra {
		errs = append(errs, fmt.Errorf("extra resources %d: want 0..%d", c.ExtraResources, maxExtra))
	}
	if c.PageSize < 1 || c.PageSize > maxPageSize {
		errs = append(errs, fmt.Errorf("page size %d: want 1..%d", c.PageSize, maxPageSize))
	}
	if c.Tick > 0 && c.Tick < time.Millisecond {
		errs = append(errs, fmt.Errorf("tick %v: want at least 1ms (or negative to disable)", c.Tick))
	}
	if c.MaxInFlight < 1 {
		errs = append(errs, errors.New("max in-flight must be positive"))
	}
	if c.MaxSleep < 0 || c.SampleTimeout < 0 {
		errs = append(errs, errors.New("max sleep and sample timeout must not be negative"))
	}
	if c.MaxPayload < 0 || c.MaxBody < 0 || c.MaxSteps < 0 {
		errs = append(errs, errors.New("max payload, max body and max steps must not be negative"))
	}
	if c.Eras > ErasModern {
		errs = append(errs, fmt.Errorf("eras %d: want ErasBoth, ErasLegacy or ErasModern", c.Eras))
	}
	if c.Faults&^FaultsAll != 0 {
		errs = append(errs, fmt.Errorf("faults %#x: unknown bits", uint16(c.Faults&^FaultsAll)))
	}
	if c.ListTTL < 0 || c.KeepAlive < 0 {
		errs = append(errs, errors.New("list TTL and keep-alive must not be negative"))
	}
	return errors.Join(errs...)
}
