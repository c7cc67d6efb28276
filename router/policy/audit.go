package policy

import (
	"context"
	"log/slog"
	"time"
)

// Outcome is how an audited request ended.
type Outcome uint8

const (
	OutcomeOK      Outcome = iota // answered with a result
	OutcomeError                  // answered with an error (the backend's or the router's)
	OutcomeDenied                 // refused by the rules
	OutcomeLimited                // refused by a rate limit
)

var outcomeNames = [...]string{"ok", "error", "denied", "limited"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Event is one audited request.
type Event struct {
	Subject *Subject
	Session string // the session id, "" for a stateless request
	Input   *Input // method, tool, prompt or URI, backend
	Outcome Outcome
	Latency time.Duration // from receipt to answer
	// Decision is the rules' verdict (denials name their rule); Verdict the limits'
	// (limited requests name their limit and carry RetryAfter).
	Decision *Decision
	Verdict  *Verdict
}

// Audit writes ev's log line: always for a denial or a limited request, and for every
// other decided call when the policy says audit: true. One line, at Info for calls and
// at Warn for refusals, with the fields principal, session, method, tool, prompt or
// uri, backend, outcome, latency_ms, and rule, limit or retry_after_ms when they apply.
// The counters of decisions and refusals are kept by Decide and Take (Stats).
func (e *Engine) Audit(ctx context.Context, ev *Event) {
	refused := ev.Outcome == OutcomeDenied || ev.Outcome == OutcomeLimited
	if !refused && !e.c.cfg.Audit {
		return
	}
	level := slog.LevelInfo
	if refused {
		level = slog.LevelWarn
	}
	if !e.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	principal := "anonymous"
	if ev.Subject != nil && ev.Subject.id != "" {
		principal = ev.Subject.id
	}
	attrs = append(attrs, slog.String("principal", principal))
	if ev.Session != "" {
		attrs = append(attrs, slog.String("session", ev.Session))
	}
	if in := ev.Input; in != nil {
		attrs = append(attrs, slog.String("method", in.Method))
		for _, f := range [...]struct{ k, v string }{{"tool", in.Tool}, {"prompt", in.Prompt}, {"uri", in.URI}, {"backend", in.Backend}} {
			if f.v != "" {
				attrs = append(attrs, slog.String(f.k, f.v))
			}
		}
	}
	attrs = append(attrs, slog.String("outcome", ev.Outcome.String()),
		slog.Float64("latency_ms", float64(ev.Latency.Microseconds())/1000))
	if d := ev.Decision; d != nil && !d.Allowed {
		attrs = append(attrs, slog.String("reason", d.Reason.String()))
		if d.Name != "" {
			attrs = append(attrs, slog.String("rule", d.Name))
		}
		if d.Err != nil {
			attrs = append(attrs, slog.String("err", d.Err.Error()))
		}
	}
	if v := ev.Verdict; v != nil && !v.Allowed {
		attrs = append(attrs, slog.String("limit", v.Limit),
			slog.Int64("retry_after_ms", int64((v.RetryAfter+time.Millisecond-1)/time.Millisecond)))
	}
	e.log.LogAttrs(ctx, level, "policy audit", attrs...)
}
