package app

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mcprouter/mcprouter/transport/upstream"
)

// TestNegativeLimitDurations: a negative duration limit is refused, and the error says
// it as a duration.
func TestNegativeLimitDurations(t *testing.T) {
	for yaml, want := range map[string]string{
		"limits: {upstream_session_wait: -2s}":  "limits.upstream_session_wait: must not be negative (got -2s)",
		"limits: {server_request_timeout: -1s}": "limits.server_request_timeout: must not be negative (got -1s)",
	} {
		if _, err := ParseConfig([]byte(yaml + "\n")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", yaml, err, want)
		}
	}
}

// TestNegativeDefaultsRefused: a key whose component would take a negative value for
// its default (a sign typo silently becoming 30m, 256, a random lease...) is refused,
// naming the key.
func TestNegativeDefaultsRefused(t *testing.T) {
	for yaml, want := range map[string]string{
		"sessions: {idle_timeout: -1m}":                                      "sessions.idle_timeout: must not be negative",
		"shutdown_grace: -5s":                                                "shutdown_grace: must not be negative",
		"streams: {keepalive: -15s}":                                         "streams.keepalive: must not be negative",
		"health: {interval: -5s}":                                            "health.interval: must not be negative",
		"health: {timeout: -2s}":                                             "health.timeout: must not be negative",
		"workers: {shards: -1}":                                              "workers.shards: must not be negative",
		"workers: {queue_depth: -1}":                                         "workers.queue_depth: must not be negative",
		"workers: {pool_size: -1}":                                           "workers.pool_size: must not be negative",
		"backends:\n  - {name: a, url: 'http://x/mcp', timeout: -1s}":        "backends[0].timeout: must not be negative",
		"backends:\n  - {name: a, url: 'http://x/mcp', max_concurrency: -1}": "backends[0].max_concurrency: must not be negative",
		"nats: {replicas: -3}":                                               "nats.replicas: must not be negative",
		"nats: {lease: -15s}":                                                "nats.lease: must not be negative",
	} {
		_, err := ParseConfig([]byte(yaml + "\n"))
		wantErr(t, strconv.Quote(yaml), err, want)
	}
}

// TestBackendKindKeys: pipeline is parsed for HTTP backends, and a key that only
// another kind of backend uses (pipeline, instances, env, env_allow) is refused, naming
// it, where it would be ignored.
func TestBackendKindKeys(t *testing.T) {
	for _, c := range []struct {
		yaml string
		err  string // "" when valid
	}{
		{"backends:\n  - {name: a, url: 'http://127.0.0.1:9/mcp', pipeline: 2}\n", ""},
		{"backends:\n  - {name: a, urls: ['http://127.0.0.1:9/mcp'], pipeline: 1}\n", ""},
		{"backends:\n  - {name: a, url: 'http://127.0.0.1:9/mcp', pipeline: -1}\n", "backends[0].pipeline: must not be negative"},
		{"backends:\n  - {name: a, command: [x], pipeline: 2}\n", "backends[0].pipeline: only HTTP backends"},
		{"backends:\n  - {name: a, nats: svc, pipeline: 2}\n", "backends[0].pipeline: only HTTP backends"},
		{"backends:\n  - {name: a, url: 'http://h/mcp', instances: 2}\n", "backends[0].instances: only command and nats backends"},
		{"backends:\n  - {name: a, urls: ['http://h/mcp'], env: [A=b]}\n", "backends[0].env: only command backends"},
		{"backends:\n  - {name: a, nats: svc, env_allow: [HOME]}\n", "backends[0].env_allow: only command backends"},
	} {
		cfg, err := ParseConfig([]byte(c.yaml))
		switch {
		case !wantErr(t, strconv.Quote(c.yaml), err, c.err):
		case c.err == "" && cfg.Backends[0].Pipeline.Conns == 0:
			t.Errorf("%q: pipeline not parsed", c.yaml)
		}
	}
}

// TestPipelineSetting: an HTTP backend's pipeline key, unset or auto (pipelining
// behind calls known to be short), off or 0 (none, what 0 meant before), or N (every
// call, over N connections), as parsed, as written back for the reload's digest, and
// as the options it gives; anything else is refused, naming the key's line.
func TestPipelineSetting(t *testing.T) {
	for _, c := range []struct {
		value string // "" leaves the key out
		want  PipelineSetting
		yaml  string // as MarshalYAML writes it (off quoted: YAML 1.1 reads it as false)
		opts  upstream.HTTPOptions
		err   string
	}{
		{"", PipelineSetting{}, "auto", upstream.HTTPOptions{PipelineShort: true}, ""},
		{"auto", PipelineSetting{}, "auto", upstream.HTTPOptions{PipelineShort: true}, ""},
		{"off", PipelineSetting{Off: true}, `"off"`, upstream.HTTPOptions{}, ""},
		{"false", PipelineSetting{Off: true}, `"off"`, upstream.HTTPOptions{}, ""},
		{"0", PipelineSetting{Off: true}, `"off"`, upstream.HTTPOptions{}, ""},
		{"2", PipelineSetting{Conns: 2}, "2", upstream.HTTPOptions{Pipeline: 2}, ""},
		{"-1", PipelineSetting{}, "", upstream.HTTPOptions{}, "backends[0].pipeline: must not be negative (got -1)"},
		{"fast", PipelineSetting{}, "", upstream.HTTPOptions{}, `line 4: pipeline: "fast" is neither auto, off, nor a number of connections`},
		{"[2]", PipelineSetting{}, "", upstream.HTTPOptions{}, "line 4: pipeline is auto, off, or a number of connections"},
	} {
		doc := "backends:\n  - name: a\n    url: 'http://127.0.0.1:9/mcp'\n"
		if c.value != "" {
			doc += "    pipeline: " + c.value + "\n"
		}
		cfg, err := ParseConfig([]byte(doc))
		if !wantErr(t, strconv.Quote(c.value), err, c.err) || c.err != "" {
			continue
		}
		got := cfg.Backends[0].Pipeline
		if got != c.want {
			t.Errorf("pipeline: %q parsed as %+v, want %+v", c.value, got, c.want)
		}
		if y, err := yaml.Marshal(got); err != nil || strings.TrimSpace(string(y)) != c.yaml {
			t.Errorf("pipeline: %q written as %q (%v), want %q", c.value, y, err, c.yaml)
		}
		var opts upstream.HTTPOptions
		got.apply(&opts)
		if opts.Pipeline != c.opts.Pipeline || opts.PipelineShort != c.opts.PipelineShort {
			t.Errorf("pipeline: %q gives Pipeline %d, PipelineShort %v; want %d, %v",
				c.value, opts.Pipeline, opts.PipelineShort, c.opts.Pipeline, c.opts.PipelineShort)
		}
	}
}

// wantErr reports whether err is what a table case wants, failing the test otherwise:
// nil when want is "", an error whose message contains want (the key it names) when not.
func wantErr(t *testing.T, what string, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want one containing %q", what, err, want)
	default:
		return true
	}
	return false
}

// TestSessionIdleConfig: a backend's session_idle reaches the fleet's backend config; a
// negative one is refused, naming the key.
func TestSessionIdleConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte("backends:\n  - {name: a, url: 'http://127.0.0.1:9/mcp', session_idle: 90s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	fc, err := fleetConfig(&cfg, slog.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fc.Backends[0].SessionIdle; got != 90*time.Second {
		t.Errorf("fleet SessionIdle = %v, want 90s", got)
	}
	_, err = ParseConfig([]byte("backends:\n  - {name: a, url: 'http://127.0.0.1:9/mcp', session_idle: -1s}\n"))
	wantErr(t, "negative session_idle", err, "backends[0].session_idle: must not be negative")
}

// TestREADMEKeys: every key the README's YAML examples write is a key of the
// configuration (decoded as the router decodes a file: an unknown key is an error), so
// that the documentation cannot drift to a key the code does not read.
func TestREADMEKeys(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(readme), "```yaml\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("no YAML example in README.md")
	}
	for i, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		dec := yaml.NewDecoder(strings.NewReader(b))
		dec.KnownFields(true)
		var c Config
		if err := dec.Decode(&c); err != nil {
			t.Errorf("README's YAML example %d (%.40q...): %v", i+1, b, err)
		}
	}
}
