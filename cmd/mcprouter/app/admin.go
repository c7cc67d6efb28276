package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/metrics"
	"github.com/mcprouter/mcprouter/transport/admin"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// AdminConfig is the operator's listener, off the MCP port: /metrics (Prometheus),
// /healthz, /readyz, the live status page at / and, when enabled, /debug/pprof/.
type AdminConfig struct {
	// Listen is the admin listener's address, or "off" (no listener and no metrics
	// recorded). Default 127.0.0.1:8081, loopback only; when the MCP listener asks for
	// an ephemeral port (listen with port 0) the default is an ephemeral loopback port
	// too, so that routers started side by side (tests, benchmarks) do not fight over
	// one port. The "admin listening" log line says which. An address given explicitly
	// must be free (the router does not start otherwise); when the implicit default is
	// taken, the router warns and runs without its admin listener.
	Listen string `yaml:"listen"`
	// Pprof serves /debug/pprof/ on the admin listener. Default false.
	Pprof bool `yaml:"pprof"`
	// AllowedHosts are the Host names (without port) the admin listener answers besides
	// the loopback names and its own listen host, e.g. the name Prometheus scrapes it
	// by; any other Host gets 421. Default: security.allowed_hosts.
	AllowedHosts []string `yaml:"allowed_hosts"`

	// defaulted is the value defaults chose; Listen still equal to it is implicit (a
	// flag applied after the defaults replaces it).
	defaulted string
}

// AdminOff is the admin.listen value that disables the admin listener and metrics.
const AdminOff = "off"

func (c *AdminConfig) defaults(mcpListen string) {
	if c.Listen != "" && !c.implicit() {
		return
	}
	// Unset, or set by an earlier call: follow the MCP listener as it is now (a --listen
	// flag may have changed it since the configuration file was read).
	c.Listen = admin.DefaultAddr
	if _, port, err := net.SplitHostPort(mcpListen); err == nil && port == "0" {
		c.Listen = "127.0.0.1:0"
	}
	c.defaulted = c.Listen
}

// implicit reports whether Listen is the default rather than configured.
func (c *AdminConfig) implicit() bool { return c.defaulted != "" && c.Listen == c.defaulted }

// Enabled reports whether the admin listener (and metrics) are on.
func (c *AdminConfig) Enabled() bool { return c.Listen != AdminOff }

func (c *AdminConfig) validate(mcpListen string) error {
	if !c.Enabled() {
		return nil
	}
	_, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("admin.listen: %q is neither host:port nor %q: %v", c.Listen, AdminOff, err)
	}
	if c.Listen == mcpListen && port != "0" {
		return fmt.Errorf("admin.listen: %q is the MCP listener's address; the admin listener needs its own", c.Listen)
	}
	return nil
}

// observability is the App's instrumentation: metrics, their registry and the admin
// listener. Embedded in App.
type observability struct {
	// Metrics records and exports the router's figures; nil with admin.listen: off.
	Metrics *metrics.Metrics
	// Prometheus is the registry the admin /metrics serves; nil with admin.listen: off.
	Prometheus *prometheus.Registry
	// StreamStats are the counters shared by every SSE stream of the router.
	StreamStats *sse.Stats

	admin    *admin.Server
	stopping atomic.Bool // Shutdown began: /readyz says no
}

// initMetrics creates the metrics (before the router, which reports to them).
func (a *App) initMetrics(rc *router.Config) {
	a.StreamStats = new(sse.Stats)
	if !a.cfg.Admin.Enabled() {
		return
	}
	opts := metrics.Options{Version: Version}
	if a.Fleet != nil {
		// Backends a reload adds get figures of their own too, up to reloadSpare.
		opts.Backends, opts.Spare, opts.Name = a.Fleet.BackendNames(), reloadSpare, a.Fleet.BackendName
	}
	a.Metrics = metrics.New(opts)
	rc.Observer = a.Metrics
}

// watchMetrics points the metrics at the components once they exist and prepares the
// admin listener.
func (a *App) watchMetrics() error {
	if a.Fleet != nil {
		// The router's observer: the debug request log and the metrics, or nil.
		a.Fleet.SetObserver(a.Router.Observer())
	}
	if a.Metrics == nil {
		return nil
	}
	a.Metrics.Watch(metrics.Sources{
		Router: a.Router, HTTP: a.HTTP, Sessions: a.Reg, Streams: a.StreamStats,
		Fleet: a.Fleet, Bus: a.Bus,
		Ready: func() bool { return a.ready() == nil },
	})
	a.Prometheus = prometheus.NewRegistry()
	if err := a.Metrics.Register(a.Prometheus); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := a.Prometheus.Register(newAuthCollector(a.authEndpoints)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	a.admin = admin.New(admin.Config{
		Addr:     a.cfg.Admin.Listen,
		Gatherer: a.Prometheus,
		Ready:    a.ready,
		Notes:    a.reloadNote,
		Pprof:    a.cfg.Admin.Pprof,
		Status: func() func([]byte) []byte {
			return a.Metrics.NewStatusFeed().AppendJSON
		},
		Logger:       a.log,
		AllowedHosts: a.adminHosts(),
	})
	return nil
}

// adminHosts are the Host names the admin listener answers besides its own.
func (a *App) adminHosts() []string {
	if len(a.cfg.Admin.AllowedHosts) > 0 {
		return a.cfg.Admin.AllowedHosts
	}
	return a.cfg.Security.AllowedHosts
}

// ready says whether the router should receive traffic (the admin /readyz): not while
// shutting down, not while the NATS connection is lost, not while a backend has no
// healthy instance.
func (a *App) ready() error {
	if a.stopping.Load() {
		return errors.New("shutting down")
	}
	if a.Bus != nil && a.Bus.NC != nil && !a.Bus.Connected.Load() {
		return errors.New("NATS connection lost")
	}
	if a.Fleet != nil && !a.Fleet.Ready() {
		var down []string
		a.Fleet.BackendHealth(func(name string, healthy, _ int) {
			if healthy == 0 {
				down = append(down, name)
			}
		})
		return fmt.Errorf("no healthy instance of backend %s", strings.Join(down, ", "))
	}
	return nil
}

// listenAdmin opens the admin listener (when enabled).
func (a *App) listenAdmin() error {
	if a.admin == nil {
		return nil
	}
	if err := a.admin.Listen(); err != nil {
		if a.cfg.Admin.implicit() {
			a.log.Warn("admin listener not started: its default address is taken; set admin.listen (or --admin) to another address",
				"addr", a.cfg.Admin.Listen, "err", err)
			a.admin = nil
			return nil
		}
		return fmt.Errorf("admin listener %s (set admin.listen, or %q): %w", a.cfg.Admin.Listen, AdminOff, err)
	}
	a.log.Info("admin listening", "addr", a.admin.Addr(), "metrics", "/metrics", "status", "/", "pprof", a.cfg.Admin.Pprof)
	return nil
}

// AdminAddr is the admin listener's address ("" when off or not listening).
func (a *App) AdminAddr() string {
	if a.admin == nil {
		return ""
	}
	return a.admin.Addr()
}

// AdminURL is the admin listener's base URL ("" when off or not listening).
func (a *App) AdminURL() string {
	if addr := a.AdminAddr(); addr != "" {
		return "http://" + addr
	}
	return ""
}

// shutdownAdmin stops the admin listener last, so that the drain can be watched.
func (a *App) shutdownAdmin() error {
	if a.admin == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return a.admin.Shutdown(ctx)
}
