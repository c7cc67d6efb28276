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
	// MaxBody bounds one incoming HTTP body or stdio message. Default 4 MiB.
	MaxBody int
	// AllowedHosts and AllowedOrigins override the Host/Origin checks; by default a
	// loopback listener accepts loopback names only (see transport.DefaultHTTPRules).
	AllowedHosts   []string
	AllowedOrigins []string

	// Logger receives the server's own logs (never the MCP channel). Default slog.Default().
	Logger *slog.Logger
}

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
	return errors.Join(errs...)
}
