package app

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
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

func TestPipelineConfig(t *testing.T) {
	for _, c := range []struct {
		yaml string
		err  string // "" when valid
	}{
		{"backends:\n  - {name: a, url: 'http://127.0.0.1:9/mcp', pipeline: 2}\n", ""},
		{"backends:\n  - {name: a, urls: ['http://127.0.0.1:9/mcp'], pipeline: 1}\n", ""},
		{"backends:\n  - {name: a, url: 'http://127.0.0.1:9/mcp', pipeline: -1}\n", "backends[0].pipeline: must not be negative"},
		{"backends:\n  - {name: a, command: [x], pipeline: 2}\n", "backends[0].pipeline: only HTTP backends"},
		{"backends:\n  - {name: a, nats: svc, pipeline: 2}\n", "backends[0].pipeline: only HTTP backends"},
	} {
		cfg, err := ParseConfig([]byte(c.yaml))
		switch {
		case !wantErr(t, strconv.Quote(c.yaml), err, c.err):
		case c.err == "" && cfg.Backends[0].Pipeline == 0:
			t.Errorf("%q: pipeline not parsed", c.yaml)
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
