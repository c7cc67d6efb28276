package main

import "testing"

// TestFirstRunIsQuiet: `mcprouter` with no configuration (the reference backends, the
// embedded NATS server) starts, serves a session and stops without a warning or an
// error in its log: the first thing a new user sees must not look like trouble.
func TestFirstRunIsQuiet(t *testing.T) {
	p := startRouter(t, "--admin", "127.0.0.1:0")
	goSDKSession(t, p.streamable(), "2025-11-25", "2025-11-25")
	p.stop(t)
	for _, bad := range []string{"level=WARN", "level=ERROR"} {
		if p.Log.Contains(bad) {
			t.Errorf("the first run logged %s:\n%s", bad, p.Log)
		}
	}
}
