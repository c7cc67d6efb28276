package app

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestReloadRefusedAndFixed: a reload that does not load or validate is refused whole,
// counted and noted (the note /readyz shows) until a good one clears it; a good one
// that changes settings only a restart applies names them in its warning and keeps
// their running values.
func TestReloadRefusedAndFixed(t *testing.T) {
	logs := new(testbin.Log)
	log := slog.New(slog.NewTextHandler(logs, nil))
	base := "listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\n"
	a, err := New(Config{Listen: "127.0.0.1:0", Admin: AdminConfig{Listen: AdminOff}}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	if err := a.Reload("test"); err != errNoReload {
		t.Fatalf("reload without EnableReload: %v, want errNoReload", err)
	}
	file := base
	a.EnableReload("mcprouter.yaml", func() (Config, error) { return ParseConfig([]byte(file)) })

	for _, c := range []struct{ yaml, want string }{
		{base + "lisen: 127.0.0.1:1\n", "field lisen not found"},
		{base + "sessions: {max: -1}\n", "sessions.max: must not be negative"},
		{base + "backends:\n  - {name: a, url: 'ftp://x'}\n", "backends[0].url"},
		{base + "policy:\n  rules:\n    - allow: 'mcp.tool =='\n", "policy.rules[0]"},
		{base + "reload: {debounce: -1s}\n", "reload.debounce"},
	} {
		file = c.yaml
		err := a.Reload("test")
		if !wantErr(t, c.yaml, err, c.want) {
			continue
		}
		if note := a.reloadNote(); !strings.Contains(note, c.want) || !strings.Contains(note, "refused") {
			t.Errorf("%q: readyz note %q, want the error", c.yaml, note)
		}
	}
	if got := a.reloadsBad.Load(); got != 5 {
		t.Errorf("refused reloads counted: %d, want 5", got)
	}
	if a.cfg.Sessions.Max != 10000 {
		t.Errorf("a refused reload changed sessions.max to %d", a.cfg.Sessions.Max)
	}

	file = base + "sessions: {max: 5}\nhealth: {interval: 1s}\n"
	if err := a.Reload("test"); err != nil {
		t.Fatalf("good reload: %v", err)
	}
	if note := a.reloadNote(); note != "" {
		t.Errorf("readyz note after a good reload: %q, want none", note)
	}
	if a.reloadsOK.Load() != 1 || a.lastSuccess.Load() == 0 {
		t.Errorf("good reloads counted: %d, last success %d", a.reloadsOK.Load(), a.lastSuccess.Load())
	}
	if !logs.Contains("settings=\"sessions, health\"") {
		t.Errorf("restart-only settings not named:\n%s", logs)
	}
	if a.cfg.Sessions.Max != 10000 {
		t.Errorf("sessions.max changed at run time to %d", a.cfg.Sessions.Max)
	}
}

// TestReloadNamesEveryKey: every top-level key of the configuration is either applied
// by a reload (reloadParts) or, when a reload changes it, named in the restart warning
// (fixedChanges): none is silently left at its running value. A new key needs an entry
// in reloadParts or fixedChanges, and a line here.
func TestReloadNamesEveryKey(t *testing.T) {
	change := map[string]string{
		"listen":         "listen: 127.0.0.1:1",
		"paths":          "paths: {mcp: /m}",
		"sessions":       "sessions: {max: 5}",
		"limits":         "limits: {max_batch: 5}",
		"security":       "security: {allowed_hosts: [a]}",
		"streams":        "streams: {retry_ms: 5}",
		"workers":        "workers: {shards: 2}",
		"shutdown_grace": "shutdown_grace: 1s",
		"health":         "health: {interval: 1s}",
		"nats":           "nats: {prefix: x}",
		"admin":          "admin: {pprof: true}",
		"connections":    "connections: {max_per_address: 5}",
		"memory_limit":   "memory_limit: 1GiB",
		"heap_floor":     "heap_floor: 32MiB",
		"stateless":      "stateless: \"on\"",
		"auth":           "auth: {resource_name: x}",
		"reload":         "reload: {debounce: 1s}",
		"request_state":  "request_state: {key_env: X}",
	}
	reloadable := map[string]bool{}
	for _, p := range reloadParts {
		reloadable[p.key] = true
	}
	cur, err := ParseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if reloadable[key] {
			continue
		}
		y, ok := change[key]
		if !ok {
			t.Errorf("%s: neither reloadable nor tested here", key)
			continue
		}
		next, err := ParseConfig([]byte(y + "\n"))
		if err != nil {
			t.Errorf("%s: %v", y, err)
			continue
		}
		if got := fixedChanges(&cur, &next); !slices.Equal(got, []string{key}) {
			t.Errorf("%s: the restart warning names %v, want [%s]", y, got, key)
		}
	}
}

// TestReloadKeepsPolicyAudit: policy.audit changes only at restart, as the warning of a
// reload that changes it says: the engine a reload builds for new rules audits as the
// running one did, in either direction.
func TestReloadKeepsPolicyAudit(t *testing.T) {
	for _, audit := range []bool{true, false} {
		base := "listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\n"
		cfg, err := ParseConfig([]byte(base + "policy: {audit: " + strconv.FormatBool(audit) + ", rules: [{allow: 'true'}]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Shutdown(context.Background()) }) // a Fatal below leaves no app running
		file := base + "policy: {audit: " + strconv.FormatBool(!audit) + ", rules: [{deny: 'false'}]}\n"
		a.EnableReload("mcprouter.yaml", func() (Config, error) { return ParseConfig([]byte(file)) })
		if err := a.Reload("test"); err != nil {
			t.Fatalf("reload: %v", err)
		}
		if a.Policy == nil || a.Policy.Config().Audit != audit {
			t.Errorf("started with audit %v, reloaded with %v: the new engine audits %v, want the running value",
				audit, !audit, a.Policy != nil && a.Policy.Config().Audit)
		}
	}
}

// TestReloadNamesVServerAudit: a reload that turns on a virtual server's audit while
// nothing audited at start names it in the restart warning: no audit observer reports
// the calls before a restart, so its engine would write nothing.
func TestReloadNamesVServerAudit(t *testing.T) {
	logs := new(testbin.Log)
	base := "listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\nbackends:\n  - {name: a, url: 'http://127.0.0.1:1/mcp'}\n" +
		"virtual_servers:\n  - {name: t, auth: {mode: \"off\"}"
	cfg, err := ParseConfig([]byte(base + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	a.EnableReload("mcprouter.yaml", func() (Config, error) {
		return ParseConfig([]byte(base + ", policy: {audit: true}}\n"))
	})
	if err := a.Reload("test"); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !logs.Contains(`settings=virtual_servers[0].policy.audit`) {
		t.Errorf("the audit a reload cannot turn on is not named:\n%s", logs)
	}
}
