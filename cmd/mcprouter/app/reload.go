package app

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/router/policy"
)

// Live reload: on SIGHUP, or when the configuration file changes (reload.watch), the
// router reads its configuration again and applies what may change while it runs
// (reloadParts): backends (added, removed, changed: fleet.Reconfigure drains what
// goes), the policy (rules, limits) and tracing (reload_tracing.go). The new
// configuration is checked in full first, as `mcprouter check` does, and everything
// that can fail is built before anything changes: one that does not pass is refused,
// logged, and shown in /readyz's body (the old one keeps running, and readiness is
// unaffected) until a later reload succeeds. Settings that only a
// restart can change (listen addresses, NATS, sessions...) are named in a warning and
// kept as they are.

// ReloadConfig says when the router reads its configuration file again; SIGHUP always
// does.
type ReloadConfig struct {
	// Watch reloads when the configuration file changes. Its directory is watched, so
	// that a file replaced by a rename (editors, orchestrators' mounted files) is seen.
	// Default false.
	Watch bool `yaml:"watch"`
	// Debounce is how long the file must stay unchanged before it is read: one save is
	// often several events. Default 250ms.
	Debounce time.Duration `yaml:"debounce"`
}

func (c *ReloadConfig) defaults() {
	if c.Debounce == 0 {
		c.Debounce = 250 * time.Millisecond
	}
}

func (c *ReloadConfig) validate() error {
	if c.Debounce < 0 {
		return fmt.Errorf("reload.debounce: must not be negative (got %v)", c.Debounce)
	}
	return nil
}

// Loader reads the configuration as the router started from it: the file with the
// command line's flags applied over it. Reload calls it again.
type Loader func() (Config, error)

// reloadState is the app's record of reloads. Embedded in App.
type reloadState struct {
	reloadMu   sync.Mutex    // one reload at a time
	load       Loader        // nil: reload is not enabled (no configuration file)
	configPath string        // the file, for logs and the watch
	reqLog     *slog.Logger  // the fleet's logger, for the backends a reload builds
	reloadStop chan struct{} // closed by Shutdown: the triggers stop (reload_watch.go)
	reloadDone chan struct{} // closed when they have

	refused     atomic.Pointer[string] // the last reload's error while it stands
	reloadsOK   atomic.Uint64
	reloadsBad  atomic.Uint64
	lastSuccess atomic.Int64 // Unix nanoseconds of the last applied reload (or the start)
}

// errNoReload is returned by Reload when the router was not started from a file.
var errNoReload = errors.New("no configuration file to reload (the router was started without --config)")

// Reload reads the configuration again and applies it, or refuses it whole. why says
// what asked for it (a signal, the file watch), for the log.
func (a *App) Reload(why string) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.load == nil {
		return errNoReload
	}
	cfg, err := a.load()
	if err == nil {
		cfg.Defaults()
		err = cfg.Validate()
	}
	var p *reloadPlan
	if err == nil {
		p, err = a.planReload(&cfg)
	}
	if err != nil {
		msg := err.Error()
		a.refused.Store(&msg)
		a.reloadsBad.Add(1)
		a.log.Error("configuration reload refused: the running configuration stays", "file", a.configPath, "trigger", why, "err", err)
		return err
	}
	a.applyReload(p, why)
	a.refused.Store(nil)
	a.reloadsOK.Add(1)
	a.lastSuccess.Store(time.Now().UnixNano())
	return nil
}

// reloadPlan is a checked configuration and everything built from it that could fail:
// applying it cannot.
type reloadPlan struct {
	cfg   Config
	fixed []string     // sections that changed but need a restart
	steps []reloadStep // what changes, in reloadParts' order
	// undo releases what the parts planned so far built (a tracer's exporter), when a
	// later part refuses the configuration.
	undo []func()
}

// reloadStep puts one changed part into service.
type reloadStep struct {
	key   string
	apply func()
}

// reloadPart is one section of the configuration that a reload applies while the
// router runs. plan compares next (p.cfg) with the running configuration and builds
// whatever could fail; when the section changed it adds the step that puts it into
// service (to p.steps), and names in p.fixed what of it only a restart changes.
type reloadPart struct {
	key  string
	plan func(a *App, p *reloadPlan) error
}

// reloadParts are the reloadable sections, planned and applied in this order; every
// other section is compared by fixedChanges. A new reloadable section is one entry
// here (and out of fixedChanges).
var reloadParts = []reloadPart{
	{"backends", (*App).planBackends},
	{"policy", (*App).planPolicy},
	{"tracing", (*App).planTracing},
	// Last: what it builds (authenticators, limit sharing, registries) is released
	// when it fails, and no part after it can fail and leave it running.
	{"virtual_servers", (*App).planVServers}, // vserver_reload.go
}

// planReload checks cfg against the running configuration and builds what it needs.
func (a *App) planReload(cfg *Config) (*reloadPlan, error) {
	p := &reloadPlan{cfg: *cfg, fixed: fixedChanges(&a.cfg, cfg)}
	for _, part := range reloadParts {
		if err := part.plan(a, p); err != nil {
			for _, undo := range p.undo {
				undo()
			}
			return nil, err
		}
	}
	return p, nil
}

// planBackends: the fleet serves the new list (fleet.Reconfigure: added, removed and
// replaced backends, the removed ones drained). The fleet exists even with no
// backends, so that a router started without any gains them here.
func (a *App) planBackends(p *reloadPlan) error {
	if sameYAML(a.cfg.Backends, p.cfg.Backends) {
		return nil
	}
	fc, err := fleetConfig(&p.cfg, a.reqLog, a.Bus)
	if err != nil {
		return err
	}
	backends := fc.Backends
	if backends == nil {
		backends = []fleet.BackendConfig{}
	}
	p.steps = append(p.steps, reloadStep{"backends", func() {
		r := a.Fleet.Reconfigure(backends)
		a.cfg.Backends = p.cfg.Backends
		a.log.Info("configuration reload: backends changed",
			"backends_added", r.Added, "backends_removed", r.Removed, "backends_replaced", r.Replaced)
	}})
	return nil
}

// planPolicy: the new rules and limits decide the next requests (swapPolicy).
// policy.audit changes only at restart.
func (a *App) planPolicy(p *reloadPlan) error {
	if sameYAML(a.cfg.Policy, p.cfg.Policy) {
		return nil
	}
	if a.cfg.Policy.Audit != p.cfg.Policy.Audit {
		p.fixed = append(p.fixed, "policy.audit")
	}
	// The engine writes the audit lines its own configuration asks for, and the audit
	// observer that feeds it is installed at start only: the new engine keeps the
	// running audit, as the warning says.
	next := p.cfg.Policy
	next.Audit = a.cfg.Policy.Audit
	var e *policy.Engine
	if hasPolicy(&next) {
		var err error
		if e, err = policy.New(next, policy.Options{Logger: a.log}); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
	}
	p.steps = append(p.steps, reloadStep{"policy", func() {
		a.swapPolicy(e)
		a.cfg.Policy = next // its audit the running one: only a restart changes it (fixed)
	}})
	return nil
}

// applyReload puts a checked plan into service.
func (a *App) applyReload(p *reloadPlan, why string) {
	if len(p.fixed) > 0 {
		a.log.Warn("configuration reload: these settings change only at restart; their running values stay",
			"settings", strings.Join(p.fixed, ", "))
	}
	changed := make([]string, 0, len(p.steps))
	for _, s := range p.steps {
		s.apply()
		changed = append(changed, s.key)
	}
	a.log.Info("configuration reloaded", "file", a.configPath, "trigger", why, "applied", changed)
}

// fixedChanges names the sections of next that differ from cur but that only a restart
// applies.
func fixedChanges(cur, next *Config) []string {
	sections := []struct {
		key  string
		a, b any
	}{
		{"listen", cur.Listen, next.Listen},
		{"paths", cur.Paths, next.Paths},
		{"sessions", cur.Sessions, next.Sessions},
		{"limits", cur.Limits, next.Limits},
		{"security", cur.Security, next.Security},
		{"streams", cur.Streams, next.Streams},
		{"workers", cur.Workers, next.Workers},
		{"shutdown_grace", cur.ShutdownGrace, next.ShutdownGrace},
		{"health", cur.Health, next.Health},
		{"nats", cur.NATS, next.NATS},
		{"admin", cur.Admin, next.Admin},
		{"connections", cur.Connections, next.Connections},
		{"memory_limit", cur.MemoryLimit, next.MemoryLimit},
		{"heap_floor", cur.HeapFloor, next.HeapFloor},
		{"stateless", cur.Stateless, next.Stateless},
		{"auth", cur.Auth, next.Auth},
		{"reload", cur.Reload, next.Reload},
		{"request_state", cur.RequestState, next.RequestState},
	}
	var out []string
	for _, s := range sections {
		if !sameYAML(s.a, s.b) {
			out = append(out, s.key)
		}
	}
	return out
}

// sameYAML compares two configuration values as they would be written: unexported
// bookkeeping (what defaults chose) does not count.
func sameYAML(a, b any) bool {
	ya, erra := yaml.Marshal(a)
	yb, errb := yaml.Marshal(b)
	return erra == nil && errb == nil && string(ya) == string(yb)
}

// backendDigest identifies a backend's configuration section (fleet.BackendConfig's
// Digest): a reload keeps a backend whose section is unchanged, and replaces one whose
// section changed.
func backendDigest(b *BackendConfig) string {
	y, err := yaml.Marshal(b)
	if err != nil {
		return "" // never equal: the backend is replaced
	}
	sum := sha256.Sum256(y)
	return hex.EncodeToString(sum[:16])
}

// reloadNote is what /readyz adds to its body: the refused reload, while it stands.
func (a *App) reloadNote() string {
	if msg := a.refused.Load(); msg != nil {
		return "configuration reload refused (the previous configuration keeps running): " + *msg
	}
	return ""
}
