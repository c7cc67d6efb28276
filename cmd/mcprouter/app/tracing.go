package app

import (
	"context"
	"fmt"
	"time"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/tracing"
)

// tracingState is the router's OpenTelemetry tracer: nil with tracing off (the
// default), and then the router, the transport and the fleet do nothing for it.
type tracingState struct {
	// Tracer makes the spans of client requests and backend calls; nil when off.
	Tracer *tracing.Tracer
}

// startTracing starts the tracer the configuration's tracing section and the OTEL_*
// environment ask for, and has the router start a trace for each request and end it
// (through its Observer, ahead of the metrics) when the answer goes out.
func (a *App) startTracing(rc *router.Config) error {
	t, err := tracing.New(context.Background(), a.cfg.Tracing, Version)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	if t == nil {
		return nil
	}
	a.Tracer = t
	rc.Tracer = t
	rc.Observer = tracing.Observe(rc.Observer)
	a.log.Info("tracing on", "exporter", a.cfg.Tracing.Exporter, "endpoint", a.cfg.Tracing.Endpoint)
	return nil
}

// stopTracing exports the spans still queued, for at most a few seconds: a collector
// that is down must not hold the shutdown.
func (a *App) stopTracing() {
	if a.Tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Tracer.Shutdown(ctx); err != nil {
		a.log.Warn("tracing: spans lost at shutdown", "err", err)
	}
}
