package app

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/tracing"
	"github.com/mcprouter/mcprouter/transport"
)

// tracingState is the router's OpenTelemetry tracing: the tracer in force, which a
// reload may start, stop or replace (reload_tracing.go).
type tracingState struct {
	// Tracer holds the tracer that makes the spans of client requests and backend
	// calls; its Current is nil with tracing off (the default). Never nil.
	Tracer *TracerSwitch
	// traceHeaders: the HTTP transports (the main endpoint's and every virtual
	// server's) keep each POST's trace context headers while tracing is on; a reload
	// switches it with the tracer.
	traceHeaders atomic.Bool
}

// TracerSwitch is the router's Config.Tracer: it starts each request's trace on the
// tracer in force, swapped whole by a reload. A request keeps the tracer that started
// it until it ends (tracing.Request), so a swap splits no trace. With tracing off, a
// request costs one atomic load here.
type TracerSwitch struct {
	cur atomic.Pointer[tracing.Tracer]
}

// Start implements the router's Config.Tracer.
func (s *TracerSwitch) Start(x *transport.Exchange) {
	if t := s.cur.Load(); t != nil {
		t.Start(x)
	}
}

// Current is the tracer in force; nil with tracing off.
func (s *TracerSwitch) Current() *tracing.Tracer { return s.cur.Load() }

// ForceFlush exports the spans the tracer in force ended so far, within ctx.
func (s *TracerSwitch) ForceFlush(ctx context.Context) error {
	if t := s.cur.Load(); t != nil {
		return t.ForceFlush(ctx)
	}
	return nil
}

// startTracing starts the tracer the configuration's tracing section and the OTEL_*
// environment ask for, and has the router start a trace for each request (through the
// switch, so that a reload may turn tracing on later) and end it (through its
// Observer, ahead of the metrics) when the answer goes out.
func (a *App) startTracing(rc *router.Config) error {
	t, err := tracing.New(context.Background(), a.cfg.Tracing, Version)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	a.Tracer = new(TracerSwitch)
	rc.Tracer = a.Tracer
	rc.Observer = tracing.Observe(rc.Observer)
	if t == nil {
		return nil
	}
	a.Tracer.cur.Store(t)
	a.traceHeaders.Store(true)
	a.log.Info("tracing on", "exporter", a.cfg.Tracing.Exporter, "endpoint", a.cfg.Tracing.Endpoint)
	return nil
}

// tracerShutdownWait bounds how long a stopped tracer exports the spans still queued:
// a collector that is down must not hold the shutdown.
const tracerShutdownWait = 5 * time.Second

// stopTracing exports the spans still queued, for at most tracerShutdownWait.
func (a *App) stopTracing() {
	if a.Tracer == nil {
		return
	}
	if t := a.Tracer.cur.Swap(nil); t != nil {
		a.shutdownTracer(t)
	}
}

// shutdownTracer exports t's queued spans and stops its exporter.
func (a *App) shutdownTracer(t *tracing.Tracer) {
	ctx, cancel := context.WithTimeout(context.Background(), tracerShutdownWait)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		a.log.Warn("tracing: spans lost at shutdown", "err", err)
	}
}
