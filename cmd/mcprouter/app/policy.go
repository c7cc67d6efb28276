package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/metrics"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// The policy (router/policy) in the app: the engine compiled from the `policy:`
// section, handed to the fleet (which decides requests and filters lists with it), its
// rate limits shared with the other instances over the router's NATS bus, the audit
// line of every forwarded call when `audit: true`, and its counters as metrics. With no
// rules and no limits nothing is built and the request path pays nothing.

// policyState is what the app keeps of the policy: nil fields without one.
type policyState struct {
	Policy *policy.Engine
	// Sync shares the rate limits' consumption with the other instances (nil without
	// limits or NATS); its counters say what was published and applied.
	Sync *policy.Sync
	// auditing: the audit observer is installed (installAudit, at start only: the
	// fleet's observer is set before it serves), so the engines' audit: true is heard.
	auditing bool
}

// hasPolicy reports whether the configuration asks for anything of the policy.
func hasPolicy(c *policy.Config) bool { return len(c.Rules) > 0 || len(c.Limits) > 0 }

// startPolicy builds the engine and wires it into the fleet; call it once the fleet, the
// bus and the router's observer exist. log is the unthrottled logger: an audit line is a
// record the operator asked for, not a warning a client may flood.
func (a *App) startPolicy(log *slog.Logger) error {
	cfg := a.cfg.Policy
	col := &policyCollector{engines: func() []*policy.Engine { return nil }}
	if a.Fleet != nil {
		col.engines = a.Fleet.Policies // the engines in force, reloads and virtual servers included
	}
	if a.Prometheus != nil {
		if err := a.Prometheus.Register(col); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	if a.Fleet == nil {
		if hasPolicy(&cfg) {
			log.Warn("policy: no backends, nothing to decide")
		}
		return nil
	}
	if !hasPolicy(&cfg) {
		// No engine, but the fleet's policer is in place, so that a reload can swap
		// one in at run time (Fleet.SetPolicy); until then a request pays one load.
		a.Fleet.SetPolicy(nil)
		a.installAudit()
		return nil
	}
	e, err := policy.New(cfg, policy.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	a.Policy = e
	a.Fleet.SetPolicy(e)
	if l := e.Limiter(); l != nil && a.Bus != nil && a.Bus.NC != nil {
		s, err := policy.StartSync(l, a.Bus.NC, policy.SyncOptions{
			Subject: a.Bus.Subject("policy", "limits"), Interval: e.Config().SyncInterval, Logger: log,
		})
		if err != nil {
			return fmt.Errorf("policy: cluster-wide limits: %w", err)
		}
		a.policyState.Sync = s
	}
	a.installAudit()
	return nil
}

// installAudit puts the audit observer in front of the router's when the main policy or
// a virtual server's asks for audit: true.
func (a *App) installAudit() {
	want := a.cfg.Policy.Audit
	for _, v := range a.cfg.VirtualServers {
		want = want || v.Policy.Audit
	}
	if want {
		a.auditing = true
		a.Fleet.SetObserver(&auditObserver{next: a.Router.Observer(), engine: a.Fleet.PolicyFor, subject: a.Fleet.SubjectOf,
			backend: a.Fleet.BackendName})
	}
}

// stopPolicy stops sharing the limits (after a last publish).
func (a *App) stopPolicy() {
	if a.policyState.Sync != nil {
		a.policyState.Sync.Close()
	}
}

// auditObserver writes the audit line of every forwarded call that the rules decide,
// with its outcome and latency, where the fleet reports it finished; refusals are
// audited where they are made (the fleet), and reported without a backend, so they are
// not written twice.
type auditObserver struct {
	next    router.Observer
	engine  func(*auth.Principal) *policy.Engine // the engine of the principal's endpoint
	subject func(*auth.Principal) *policy.Subject
	backend func(int) string // names a backend index, including those a reload added
}

// FanOutDelivered implements router.Observer.
func (o *auditObserver) FanOutDelivered(ns int64) {
	if o.next != nil {
		o.next.FanOutDelivered(ns)
	}
}

// RequestDone implements router.Observer.
func (o *auditObserver) RequestDone(x *transport.Exchange, backend int, out router.Outcome, start, backendNs int64) {
	if o.next != nil {
		o.next.RequestDone(x, backend, out, start, backendNs)
	}
	if backend < 0 || !policy.Decided(string(x.Msg.Method)) {
		return
	}
	var in policy.Input
	if in.FromMessage(&x.Msg) != nil {
		return
	}
	if in.Backend = o.backend(backend); in.Backend == "" {
		return
	}
	pr := x.Principal
	if pr == nil && x.Session != nil {
		pr = x.Session.Principal()
	}
	eng := o.engine(pr)
	if eng == nil {
		return
	}
	ev := policy.Event{Subject: o.subject(pr), Input: &in, Outcome: policy.OutcomeOK}
	if out != router.OutcomeOK {
		ev.Outcome = policy.OutcomeError
	}
	if x.Session != nil && !x.Stateless {
		ev.Session = x.Session.ID()
	}
	if start != 0 {
		ev.Latency = time.Duration(router.Now() - start)
	}
	eng.Audit(context.Background(), &ev)
}

// policyCollector exports the policy's counters:
// mcprouter_policy_decisions_total{outcome} (allowed, denied, error: a rule that could
// not be evaluated, which denies) and mcprouter_policy_limited_total.
// Every series is exported from the start, at zero without a policy, so that
// dashboards and alerts find them. They sum the engines in force: the main endpoint's
// and each virtual server's; a policy reload starts its engine's share afresh (to
// Prometheus, a counter reset).
type policyCollector struct {
	engines func() []*policy.Engine // those in force (none without a policy)
}

var (
	policyDecisionsDesc = prometheus.NewDesc("mcprouter_policy_decisions_total",
		"Requests decided by the policy's rules and endpoint selection, by outcome (allowed, denied, error: a rule failed and denied).",
		[]string{"outcome"}, nil)
	policyLimitedDesc = prometheus.NewDesc("mcprouter_policy_limited_total",
		"Requests refused by a policy rate limit.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- policyDecisionsDesc
	ch <- policyLimitedDesc
}

// Collect implements prometheus.Collector.
func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	var allowed, denied, failed, limited uint64
	for _, e := range c.engines() {
		pc := metrics.CountPolicy(e)
		allowed, denied, failed, limited = allowed+pc.Allowed, denied+pc.Denied, failed+pc.Failed, limited+pc.Limited
	}
	ch <- prometheus.MustNewConstMetric(policyDecisionsDesc, prometheus.CounterValue, float64(allowed), "allowed")
	ch <- prometheus.MustNewConstMetric(policyDecisionsDesc, prometheus.CounterValue, float64(denied), "denied")
	ch <- prometheus.MustNewConstMetric(policyDecisionsDesc, prometheus.CounterValue, float64(failed), "error")
	ch <- prometheus.MustNewConstMetric(policyLimitedDesc, prometheus.CounterValue, float64(limited))
}
