package dashboards

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestHealthAndReadiness: /healthz and /readyz of a real router, and what they and the
// backend health metrics say once the only backend goes away.
func TestHealthAndReadiness(t *testing.T) {
	t.Parallel() // mostly waits for two failed health checks (about 10s)
	s := startStack(t, slog.LevelInfo)
	if status, body := s.get("/healthz"); status != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", status, body)
	}
	if status, body := s.get("/readyz"); status != 200 || body != "ready\n" {
		t.Errorf("readyz: %d %q", status, body)
	}
	_, m := s.get("/metrics")
	if metric(m, `mcprouter_backend_up{backend="demo"}`) != 1 || metric(m, "mcprouter_ready ") != 1 {
		t.Errorf("backend up %v, ready %v", metric(m, `mcprouter_backend_up{backend="demo"}`), metric(m, "mcprouter_ready "))
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	s.backend.Close(ctx)
	start := time.Now()
	var reason string
	testwait.For(t, "readyz to answer 503 with the backend gone", waitLimit, func() bool {
		status, body := s.get("/readyz")
		reason = body
		return status == 503
	})
	if !strings.Contains(reason, "no healthy instance of backend demo") {
		t.Errorf("readyz reason: %q", reason)
	}
	t.Logf("not ready %v after the backend went away", time.Since(start).Round(time.Millisecond))
	if status, _ := s.get("/healthz"); status != 200 {
		t.Errorf("healthz with the backend gone: %d (alive is not ready)", status)
	}
	_, m = s.get("/metrics")
	if metric(m, `mcprouter_backend_up{backend="demo"}`) != 0 || metric(m, `mcprouter_backend_healthy_instances{backend="demo"}`) != 0 || metric(m, "mcprouter_ready ") != 0 {
		t.Errorf("after the backend went away: up %v healthy %v ready %v", metric(m, `mcprouter_backend_up{backend="demo"}`),
			metric(m, `mcprouter_backend_healthy_instances{backend="demo"}`), metric(m, "mcprouter_ready "))
	}
	// The failed health checks ejected the instance (moves: backend_ejections_total).
	if got := metric(m, `mcprouter_backend_ejections_total{backend="demo"`); got < 1 {
		t.Errorf("ejections after the backend went away: %v, want at least 1", got)
	}
}
