package fleet

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// The policy in the fleet: routing asks the policer, once it knows a request's backend
// and before the forwarder records it, whether the rules allow the request and whether a
// rate limit admits it (each element of a batch is its own exchange, so each is decided
// on its own), and it answers the */list methods with the items the principal may use.
// Without a policy (SetPolicy never called) routing's field is nil and nothing here
// runs.

// SetPolicy makes the fleet decide the main endpoint's requests and filter its lists
// with e (nil: allow everything). The first call must come before Start (it installs
// the policer, which a fleet that never had a policy does without); later calls swap
// the engine atomically at run time (a policy reload: the requests already deciding
// keep the old one) and send list_changed to exactly the sessions whose view of a list
// changed (policy_endpoints.go).
func (f *Fleet) SetPolicy(e *policy.Engine) {
	f.setEngines(func(es *engines) { es.main = e })
}

// policer is the part that applies the policy engine (router/policy) to the fleet's
// traffic: it holds the engine and the Subjects of the principals it has seen. Who calls
// it: routing (admit and list, from Prepare: the session's dispatcher shard goroutine, or
// the request's own goroutine when it runs on its caller), listen streams (their
// entries), and SetPolicy/SetEndpointPolicy from the app's reload goroutine, which swap
// the engine while requests decide under the one they loaded. It does no I/O.
type policer struct {
	eng atomic.Pointer[engines] // nil until SetPolicy or SetEndpointPolicy
	mu  sync.Mutex              // serialises the swaps of eng (setEngines)
	// subjects maps the transport's *auth.Principal (one per token presented) to its
	// Subject, made once per token rather than once per request. Bounded: past
	// maxSubjects it starts afresh (a Subject is cheap to make again).
	subjects sync.Map
	n        atomic.Int64
	// lists caches the current catalog snapshot's items as the policy sees them
	// (policy_list.go).
	lists atomic.Pointer[policyItems]
	// seen is, per list, the catalog whose list_changed was last sent (changedFor).
	seen [numKinds]atomic.Pointer[catalog]
}

const maxSubjects = 1 << 14

// subject returns the Subject of x's principal: the request's own (a stateless
// request, or the token this request presented), else the session's.
func (p *policer) subject(s *router.Session, x *transport.Exchange) *policy.Subject {
	return p.subjectOf(principalOf(s, x))
}

// principalOf is who sent x: the request's own principal (a stateless request, or the
// token this request presented), else the session's.
func principalOf(s *router.Session, x *transport.Exchange) *auth.Principal {
	if x.Principal == nil && s != nil {
		return s.Principal()
	}
	return x.Principal
}

// engine is the engine that decides x (nil: none): its principal's endpoint's.
func (p *policer) engine(s *router.Session, x *transport.Exchange) *policy.Engine {
	es := p.eng.Load()
	if es == nil {
		return nil
	}
	return es.engineFor(principalOf(s, x))
}

// subjectOf returns pr's Subject, the anonymous one for nil.
func (p *policer) subjectOf(pr *auth.Principal) *policy.Subject {
	if pr == nil {
		return policy.Anonymous
	}
	if v, ok := p.subjects.Load(pr); ok {
		return v.(*policy.Subject)
	}
	if p.n.Add(1) > maxSubjects {
		p.subjects.Clear()
		p.n.Store(1)
	}
	sub := policy.NewSubject(pr)
	p.subjects.Store(pr, sub)
	return sub
}

// admit decides x, routed to b: false when it was answered with a denial (-32017) or a
// rate limit's refusal (-32018 with data.retryAfterMs), both audited; a POST of that
// one message is answered 403 or 429 (refuseWhole).
func (p *policer) admit(rep *reporter, s *router.Session, x *transport.Exchange, b *backend) bool {
	e := p.engine(s, x)
	if e == nil || !policy.Decided(string(x.Msg.Method)) {
		return true
	}
	in := inputs.Get().(*policy.Input)
	defer putInput(in)
	if err := in.FromMessage(&x.Msg); err != nil {
		rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: "+err.Error())
		return false
	}
	in.Backend = b.cfg.Name
	sub := p.subject(s, x)
	d := e.Decide(sub, in)
	if !d.Allowed {
		// The audit takes copies: d and v themselves would escape to the heap on every
		// call, refused or not.
		dd := d
		p.audit(e, s, x, &policy.Event{Subject: sub, Input: in, Outcome: policy.OutcomeDenied, Decision: &dd})
		refuseWhole(x, http.StatusForbidden)
		rep.replyErr(x, codec.CodePolicyDenied, d.Message(in))
		return false
	}
	if x.Msg.Kind != codec.KindRequest {
		return true
	}
	v := e.Take(sub, in)
	if !v.Allowed {
		dd, vv := d, v
		p.audit(e, s, x, &policy.Event{Subject: sub, Input: in, Outcome: policy.OutcomeLimited, Decision: &dd, Verdict: &vv})
		bp := getBuf()
		data := codec.AppendRetryData(nil, v.RetryAfter)
		*bp = codec.AppendError((*bp)[:0], x.Msg.ID, codec.CodeRateLimited,
			"rate limit "+quote(v.Limit)+" reached for "+string(x.Msg.Method), data)
		rep.local(x, router.OutcomeError)
		refuseWhole(x, http.StatusTooManyRequests)
		x.Reply(*bp)
		putBuf(bp)
		return false
	}
	return true
}

// inputs recycles the Inputs of admit: one is a few hundred bytes (the CEL values it
// makes once per request), which escaped to the heap on every decided call.
var inputs = sync.Pool{New: func() any { return new(policy.Input) }}

// putInput returns in to inputs. It is not cleared (FromMessage resets it): a pooled
// Input may keep the last request's views until its next use or the pool's next
// collection, and clearing its thirty-odd pointer slots on every call costs the
// collector's write barriers while a collection runs.
func putInput(in *policy.Input) { inputs.Put(in) }

// refuseWhole gives the HTTP reply to x the status of a refusal (403 denied, 429
// limited, with Retry-After) when x is the only message of its POST: the whole HTTP
// request is refused. A batch's elements are decided one by one and the batch is
// answered 200 with each element's JSON-RPC error.
func refuseWhole(x *transport.Exchange, status int) {
	if !x.Batch {
		x.SetStatus(status)
	}
}

// audit writes a refusal's line; the lines of calls that went through are written
// where they end (the app's observer, with their outcome and latency).
func (p *policer) audit(e *policy.Engine, s *router.Session, x *transport.Exchange, ev *policy.Event) {
	if x.Session != nil && (s == nil || !s.Stateless()) {
		ev.Session = x.Session.ID()
	}
	if start := router.Started(x); start != 0 {
		ev.Latency = time.Duration(router.Now() - start)
	}
	e.Audit(context.Background(), ev)
}

// quote is strconv.Quote without its import weight on the name of a limit (a
// configuration name, printable).
func quote(s string) string { return `"` + s + `"` }

// SubjectOf is the policy Subject of a principal as the fleet keeps it (for the
// observer that audits finished calls): nil is the anonymous one.
func (f *Fleet) SubjectOf(pr *auth.Principal) *policy.Subject {
	if f.routes.pol == nil {
		return policy.NewSubject(pr)
	}
	return f.routes.pol.subjectOf(pr)
}
