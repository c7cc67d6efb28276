package app

import (
	"context"
	"fmt"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/tracing"
)

// Tracing changed by a reload: the new tracer (nil: tracing off) is built while the
// plan is checked (an exporter that cannot be made refuses the reload), then takes the
// old one's place at once. Requests already traced keep the old tracer until they end;
// once they have, the old one exports what it still queues and stops, in the
// background. The HTTP transports read the W3C trace headers while a tracer is in force
// (tracingState.traceHeaders), switched with it.

// planTracing: a changed tracing section gets a new tracer.
func (a *App) planTracing(p *reloadPlan) error {
	if sameYAML(a.cfg.Tracing, p.cfg.Tracing) {
		return nil
	}
	t, err := tracing.New(context.Background(), p.cfg.Tracing, Version)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	p.steps = append(p.steps, reloadStep{"tracing", func() {
		old := a.Tracer.cur.Swap(t)
		a.traceHeaders.Store(t != nil)
		a.cfg.Tracing = p.cfg.Tracing
		if t != nil {
			a.log.Info("tracing on", "exporter", p.cfg.Tracing.Exporter, "endpoint", p.cfg.Tracing.Endpoint)
		} else {
			a.log.Info("tracing off")
		}
		if old != nil {
			go a.retireTracer(old, a.longestCall())
		}
	}})
	if t != nil {
		p.undo = append(p.undo, func() { a.shutdownTracer(t) })
	}
	return nil
}

// retireTracer shuts t down once the requests it traces have ended (their spans end on
// it), or after wait, the longest a request may run.
func (a *App) retireTracer(t *tracing.Tracer, wait time.Duration) {
	if !ctxtime.Wait(t.Idle(), wait) {
		a.log.Warn("tracing: a replaced tracer stops with requests still traced on it; their spans are lost", "requests", t.Active())
		a.shutdownTracer(t)
		return
	}
	a.shutdownTracer(t)
	a.log.Info("tracing: the replaced tracer exported its last spans and stopped")
}

// longestCall is the longest a request may wait for a backend: the largest backend
// timeout, at least a second.
func (a *App) longestCall() time.Duration {
	d := time.Second
	for _, b := range a.cfg.Backends {
		d = max(d, b.Timeout+time.Second)
	}
	return d
}
