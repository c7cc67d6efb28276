package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport"
)

// Per-endpoint figures, for routers with virtual servers: the requests, policy refusals
// and sessions of each MCP endpoint, labelled endpoint. The label's values are the
// configured names only (SetEndpoints) and MainEndpoint, so its cardinality is the
// configuration's: a request of an endpoint no longer configured (a session a reload
// removed, finishing) counts in the totals only.

// MainEndpoint is the endpoint label of the router's main endpoint. It cannot be a
// virtual server's name (letters, digits, - and _).
const MainEndpoint = "(main)"

// Endpoint is one MCP endpoint as the Collector reads it at scrape time.
type Endpoint struct {
	// Name is the virtual server's name, "" for the main endpoint.
	Name string
	// Sessions are the endpoint's own sessions (nil: none counted).
	Sessions *transport.Registry
	// HTTP is the endpoint's own HTTP server (nil: none counted). A virtual server's
	// sessions and HTTP counters also count in the router's totals (servers.go); the
	// main endpoint's come from Sources.
	HTTP *transport.HTTPServer
	// Policy is the engine that decides the endpoint's requests (nil: none). Its
	// counters start at zero when a reload replaces it (to Prometheus, a reset).
	Policy *policy.Engine
}

// endpointTable is one immutable set of per-endpoint request counters, by endpoint
// name ("" for the main endpoint).
type endpointTable struct {
	by map[string]*endpointCounts
}

type endpointCounts struct {
	outcomes [router.NumOutcomes]atomic.Uint64
}

// SetEndpoints makes the figures per endpoint: the main endpoint's and the virtual
// servers names'. A name kept from the previous call keeps its counters; with no
// names, requests are not counted per endpoint (the hot path pays one atomic load).
// Safe to call while requests are counted (a reload).
func (m *Metrics) SetEndpoints(names []string) {
	m.epMu.Lock()
	defer m.epMu.Unlock()
	if len(names) == 0 {
		m.endpoints.Store(nil)
		return
	}
	prev := m.endpoints.Load()
	t := &endpointTable{by: make(map[string]*endpointCounts, len(names)+1)}
	for _, n := range append([]string{""}, names...) {
		if prev != nil && prev.by[n] != nil {
			t.by[n] = prev.by[n]
		} else {
			t.by[n] = new(endpointCounts)
		}
	}
	m.endpoints.Store(t)
}

// WatchEndpoints sets what lists the endpoints configured now, with their sessions and
// engines; it is called at each scrape while SetEndpoints has names.
func (m *Metrics) WatchEndpoints(eps func() []Endpoint) { m.epSrc.Store(&eps) }

// countEndpoint counts a finished request under its principal's endpoint. No lock, no
// allocation: one map lookup when virtual servers are configured.
func (m *Metrics) countEndpoint(x *transport.Exchange, o router.Outcome) {
	t := m.endpoints.Load()
	if t == nil {
		return
	}
	name := ""
	if x.Principal != nil {
		name = x.Principal.Endpoint
	}
	if c := t.by[name]; c != nil {
		c.outcomes[o].Add(1)
	}
}

// endpointDescs are the per-endpoint metrics' descriptions.
type endpointDescs struct {
	requests, denied, limited, sessions *prometheus.Desc
}

func newEndpointDescs(d func(name, help string, labels ...string) *prometheus.Desc) endpointDescs {
	return endpointDescs{
		requests: d("endpoint_requests_total", "Client requests finished per MCP endpoint (\"(main)\" or a virtual server's name), by outcome (ok, error, timeout, overloaded, unavailable, cancelled). Exported with virtual servers only.", "endpoint", "outcome"),
		denied:   d("endpoint_policy_denied_total", "Requests the endpoint's policy refused (a deny rule, no allow rule, outside its selection, or a rule that failed), per MCP endpoint; starts afresh when a reload replaces the endpoint's policy.", "endpoint"),
		limited:  d("endpoint_policy_limited_total", "Requests refused by the endpoint's rate limits, per MCP endpoint; starts afresh when a reload replaces the endpoint's policy.", "endpoint"),
		sessions: d("endpoint_sessions", "Live client sessions per MCP endpoint.", "endpoint"),
	}
}

// collectEndpoints exports the per-endpoint figures of the endpoints configured now.
func (m *Metrics) collectEndpoints(ch chan<- prometheus.Metric) {
	t, src := m.endpoints.Load(), m.epSrc.Load()
	if t == nil || src == nil {
		return
	}
	d := &m.descs.endpoint
	for _, ep := range (*src)() {
		c := t.by[ep.Name]
		if c == nil {
			continue // configured by a reload under way: exported from the next scrape
		}
		label := ep.Name
		if label == "" {
			label = MainEndpoint
		}
		for o := range c.outcomes {
			ch <- prometheus.MustNewConstMetric(d.requests, prometheus.CounterValue, float64(c.outcomes[o].Load()), label, router.Outcome(o).String())
		}
		var pc PolicyCounts
		if ep.Policy != nil {
			pc = CountPolicy(ep.Policy)
		}
		ch <- prometheus.MustNewConstMetric(d.denied, prometheus.CounterValue, float64(pc.Denied+pc.Failed), label)
		ch <- prometheus.MustNewConstMetric(d.limited, prometheus.CounterValue, float64(pc.Limited), label)
		if ep.Sessions != nil {
			ch <- prometheus.MustNewConstMetric(d.sessions, prometheus.GaugeValue, float64(ep.Sessions.Len()), label)
		}
	}
}

// PolicyCounts are a policy engine's decisions as the metrics classify them.
type PolicyCounts struct {
	Allowed uint64 // exempt, no rules, or an allow rule
	Denied  uint64 // a deny rule, no allow rule, or outside the endpoint's selection
	Failed  uint64 // a rule could not be evaluated (and denied)
	Limited uint64 // refused by a rate limit
}

// CountPolicy reads e's counters (policy.Engine.Stats) into PolicyCounts: the one
// classification of the policy's reasons that every exporter uses.
func CountPolicy(e *policy.Engine) PolicyCounts {
	var pc PolicyCounts
	st := e.Stats()
	for reason, n := range st.Decisions {
		switch reason {
		case policy.ReasonDeny.String(), policy.ReasonNoAllow.String(), policy.ReasonScope.String():
			pc.Denied += n
		case policy.ReasonError.String():
			pc.Failed += n
		default:
			pc.Allowed += n
		}
	}
	for _, n := range st.LimitedByLimit {
		pc.Limited += n
	}
	return pc
}
