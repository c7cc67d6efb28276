package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// authCollector exports the outcomes of authentication at the MCP endpoints:
// mcprouter_auth_requests_total{outcome,reason}, outcome "accepted" or "refused", reason
// an auth.Reason or foreign_session (a session presented by another principal than its
// owner, refused as unknown). Every pair is exported from the start, at zero with
// authentication off, so that dashboards and alerts find the series. The counts sum
// every endpoint in force, the main one and each virtual server (each has its own
// Authenticator and HTTP server); a reload that rebuilds a virtual server starts its
// share afresh (to Prometheus, a counter reset).
type authCollector struct {
	endpoints func() []authEndpoint
	requests  *prometheus.Desc
}

// authEndpoint is what the authCollector reads of one MCP endpoint.
type authEndpoint struct {
	auth *auth.Authenticator
	http *transport.HTTPServer
}

func newAuthCollector(endpoints func() []authEndpoint) *authCollector {
	return &authCollector{endpoints: endpoints, requests: prometheus.NewDesc("mcprouter_auth_requests_total",
		"Requests to the MCP endpoints by authentication outcome (accepted, refused) and reason.",
		[]string{"outcome", "reason"}, nil)}
}

// authEndpoints lists the main endpoint and the virtual servers in force.
func (a *App) authEndpoints() []authEndpoint {
	list := a.vservers.list()
	out := make([]authEndpoint, 0, len(list)+1)
	out = append(out, authEndpoint{a.Auth, a.HTTP})
	for _, v := range list {
		out = append(out, authEndpoint{v.auth, v.http})
	}
	return out
}

// Describe implements prometheus.Collector.
func (c *authCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.requests }

// Collect implements prometheus.Collector.
func (c *authCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[auth.Reason]uint64{}
	var foreign uint64
	for _, ep := range c.endpoints() {
		for r, n := range ep.auth.Stats() {
			counts[r] += n
		}
		if ep.http != nil {
			foreign += ep.http.Stats.ForeignSessions.Load()
		}
	}
	for _, r := range auth.Reasons {
		outcome := "refused"
		if r == auth.ReasonOK {
			outcome = "accepted"
		}
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(counts[r]), outcome, string(r))
	}
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(foreign), "refused", transport.ReasonForeignSession)
}
