package policy

import (
	"log/slog"
	"strconv"
	"sync/atomic"
)

// Engine is a compiled policy: the rules, the list filter's cache, the limits' matches
// and the audit. Build a new one to reload the policy (New); the old one stays valid
// for the requests already deciding with it.
type Engine struct {
	c       *compiled
	views   *viewCache
	limiter *Limiter // nil when neither this policy nor the one before had limits
	// resolved are the limiter's tables of this policy's limits (Engine.tables).
	resolved atomic.Pointer[resolvedTables]
	log      *slog.Logger
	stats    *Stats
	scope    *scope // nil: every backend, tool and prompt (Options.Scope)
}

// Options are what an Engine needs besides its configuration.
type Options struct {
	// Logger receives the audit lines and evaluation errors. Default slog.Default().
	Logger *slog.Logger
	// Limiter keeps the rate limits' buckets across reloads (and shares them over NATS,
	// see Sync): pass the previous engine's (Engine.Limiter) to keep the buckets of the
	// limits whose name and parameters did not change. Nil makes a new one when the
	// configuration has limits. A Limiter holds one policy's limits: each virtual server
	// with its own policy has its own Limiter (and its own Sync subject).
	Limiter *Limiter
	// Scope is what the endpoint this engine decides for exposes (a virtual server's
	// selection), applied before the rules; the zero Scope exposes everything.
	Scope Scope
}

// New compiles cfg. Its error lists every problem (errors.Join of *ConfigError and
// plain errors), each naming the rule or limit and, for CEL, the position.
func New(cfg Config, opts Options) (*Engine, error) {
	c, err := compileConfig(cfg.withDefaults(), cfg)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{c: c, views: newViewCache(c.cfg.ViewCache), log: opts.Logger, stats: newStats(c), scope: newScope(opts.Scope)}
	if len(c.limits) > 0 || opts.Limiter != nil {
		e.limiter = opts.Limiter
		if e.limiter == nil {
			e.limiter = NewLimiter(LimiterOptions{})
		}
		e.limiter.configure(c.limits)
	}
	return e, nil
}

// Config returns the engine's configuration, defaults applied (for a configuration
// check to print, and for Sync's interval).
func (e *Engine) Config() Config { return e.c.cfg }

// Filtering reports whether lists are filtered (the policy has rules, or a Scope that
// selects): a 2026-07-28 list result then says cacheScope: private.
func (e *Engine) Filtering() bool { return len(e.c.rules) > 0 || e.scope != nil }

// Limiter returns the engine's rate-limit state (nil without limits), to hand to the
// next engine on reload and to Sync.
func (e *Engine) Limiter() *Limiter { return e.limiter }

// Reason says why a Decision went the way it did.
type Reason uint8

const (
	// ReasonExempt: the rules do not decide the method (Decided): allowed.
	ReasonExempt Reason = iota
	// ReasonNoRules: no deny rule matched and there is no allow rule: allowed.
	ReasonNoRules
	// ReasonAllow: an allow rule matched (and no deny rule).
	ReasonAllow
	// ReasonDeny: a deny rule matched.
	ReasonDeny
	// ReasonNoAllow: allow rules exist and none matched: denied.
	ReasonNoAllow
	// ReasonError: a rule could not be evaluated: denied (fail closed).
	ReasonError
	// ReasonScope: the request is outside what the endpoint exposes (Options.Scope):
	// denied before any rule.
	ReasonScope
)

var reasonNames = [...]string{"exempt", "no_rules", "allow", "deny", "no_allow", "error", "scope"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Decision is the verdict of the rules on one request.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Rule is the configuration index of the rule that decided (ReasonAllow,
	// ReasonDeny, ReasonError), -1 when none did.
	Rule int
	// Name is that rule's name ("" when none).
	Name string
	// Err is the evaluation error (ReasonError). It is for the log: the client's message
	// (Message) does not repeat it.
	Err error
}

// Decide applies the rules to in for s. A deny rule that matches wins; when allow rules
// exist, one must match; an evaluation error denies. The deny rules are all evaluated
// (any may win), the allow rules until one matches. The activation's values are made
// once per Input, so Decide and Take on one Input share them.
//
// What each rule says of a call apart from its arguments depends only on the
// principal's view, the method, the names and the backend: the first call works it out
// for every rule (with the arguments unknown, as for a list) and caches it as the
// call's plan; later calls evaluate only the rules whose outcome depends on the
// arguments (or failed: a failure is evaluated, and reported, on every call). When no
// rule before the deciding one depends on them, the plan keeps the decision itself: a
// policy that reads no arguments decides a repeated call with a lookup (plans.go).
func (e *Engine) Decide(s *Subject, in *Input) Decision {
	if !Decided(in.Method) {
		return Decision{Allowed: true, Reason: ReasonExempt, Rule: -1}
	}
	in.subj, in.unknown = s, 0
	var d Decision
	switch {
	case e.scope != nil && !e.scope.admits(in):
		d = Decision{Reason: ReasonScope, Rule: -1}
	case len(e.c.rules) == 0:
		d = Decision{Allowed: true, Reason: ReasonNoRules, Rule: -1}
	default:
		v := e.views.viewOf(s, e.c.uses)
		k := callKey{in.Method, in.Tool, in.Prompt, in.URI, in.Backend}
		p := v.plan(&k)
		if p == nil {
			p = e.planOf(in)
			e.views.storePlan(v, &k, p)
		}
		if d = p.d; !p.fixed {
			d = e.decide(in, p.p)
		}
	}
	e.stats.decided(d)
	if d.Reason == ReasonError {
		e.log.Warn("policy: rule failed, request denied", "rule", d.Name, "principal", s.id, "method", in.Method, "err", d.Err)
	}
	return d
}

// plan is what each rule (in e.c.rules order) says of a call whatever its arguments:
// isTrue or isFalse, or isUnknown when it depends on them or failed (evaluated at each
// call).
type plan []outcome

func (e *Engine) plan(in *Input) plan {
	in.unknown = useArgs
	p := make(plan, len(e.c.rules))
	for i := range e.c.rules {
		if o, _ := e.c.rules[i].eval(in); o == isTrue || o == isFalse {
			p[i] = o
		} else {
			p[i] = isUnknown
		}
	}
	in.unknown = 0
	return p
}

// decide walks the rules with p: a rule's planned outcome when it has one, else its
// evaluation for in.
func (e *Engine) decide(in *Input, p plan) Decision {
	for i := range e.c.rules {
		r := &e.c.rules[i]
		o := p[i]
		var err error
		if o == isUnknown {
			o, err = r.eval(in)
		}
		switch {
		case o == isError || o == isUnknown:
			return Decision{Reason: ReasonError, Rule: r.index, Name: r.name, Err: err}
		case o != isTrue:
		case r.deny:
			return Decision{Reason: ReasonDeny, Rule: r.index, Name: r.name}
		default:
			return Decision{Allowed: true, Reason: ReasonAllow, Rule: r.index, Name: r.name}
		}
	}
	if e.c.hasAllow {
		return Decision{Reason: ReasonNoAllow, Rule: -1}
	}
	return Decision{Allowed: true, Reason: ReasonNoRules, Rule: -1}
}

// Message is the client's error message for a denial: what was denied and by which
// rule, for example
//
//	policy denies tools/call of tool "ref__fail" (rule "no-fail")
func (d *Decision) Message(in *Input) string {
	b := append([]byte("policy denies "), in.Method...)
	b = appendTarget(b, in)
	switch d.Reason {
	case ReasonDeny:
		b = append(b, " (rule "...)
		b = strconv.AppendQuote(b, d.Name)
		b = append(b, ')')
	case ReasonNoAllow:
		b = append(b, " (no allow rule matches)"...)
	case ReasonScope:
		b = append(b, " (not exposed by this endpoint)"...)
	case ReasonError:
		b = append(b, " (rule "...)
		b = strconv.AppendQuote(b, d.Name)
		b = append(b, " could not be evaluated)"...)
	}
	return string(b)
}

// appendTarget appends what in names: ` of tool "x"`, ` of prompt "x"`, ` of "uri"`.
func appendTarget(b []byte, in *Input) []byte {
	switch {
	case in.Tool != "":
		b = append(b, " of tool "...)
		b = strconv.AppendQuote(b, in.Tool)
	case in.Prompt != "":
		b = append(b, " of prompt "...)
		b = strconv.AppendQuote(b, in.Prompt)
	case in.URI != "":
		b = append(b, " of "...)
		b = strconv.AppendQuote(b, in.URI)
	}
	return b
}
