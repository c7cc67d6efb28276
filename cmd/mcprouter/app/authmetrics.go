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
// authentication off, so that dashboards and alerts find the series.
type authCollector struct {
	auth     *auth.Authenticator
	http     *transport.HTTPServer
	requests *prometheus.Desc
}

func newAuthCollector(a *auth.Authenticator, h *transport.HTTPServer) *authCollector {
	return &authCollector{auth: a, http: h, requests: prometheus.NewDesc("mcprouter_auth_requests_total",
		"Requests to the MCP endpoints by authentication outcome (accepted, refused) and reason.",
		[]string{"outcome", "reason"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *authCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.requests }

// Collect implements prometheus.Collector.
func (c *authCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.auth.Stats()
	for _, r := range auth.Reasons {
		outcome := "refused"
		if r == auth.ReasonOK {
			outcome = "accepted"
		}
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(stats[r]), outcome, string(r))
	}
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue,
		float64(c.http.Stats.ForeignSessions.Load()), "refused", transport.ReasonForeignSession)
}
