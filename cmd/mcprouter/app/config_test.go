package app

import (
	"strings"
	"testing"
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
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.yaml, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.err)
		case c.err == "" && cfg.Backends[0].Pipeline == 0:
			t.Errorf("%q: pipeline not parsed", c.yaml)
		}
	}
}
