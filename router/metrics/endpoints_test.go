package metrics

import (
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testmetrics"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// asEndpoint returns an exchange of method whose principal belongs to the endpoint
// name ("" for the main endpoint; nil principal when anonymous is true).
func asEndpoint(method, name string, anonymous bool) *transport.Exchange {
	x := exchange(method)
	if !anonymous {
		x.Principal = &auth.Principal{Subject: "alice", Endpoint: name}
	}
	return x
}

// endpointSeries gathers m's series, by name and labels.
func endpointSeries(t *testing.T, m *Metrics) map[string]float64 {
	return seriesOf(t, only(m))
}

// TestEndpointCounters: requests count under their principal's endpoint, the main
// endpoint's as "(main)"; a name no longer configured counts in the totals only; a
// name kept by a later SetEndpoints keeps its counters; without names nothing per
// endpoint is exported.
func TestEndpointCounters(t *testing.T) {
	m := New(Options{})
	_, reg, _ := newSources(t)
	names := []string{"x", "y"}
	m.WatchEndpoints(func() []Endpoint {
		eps := []Endpoint{{Sessions: reg}}
		for _, n := range names {
			eps = append(eps, Endpoint{Name: n})
		}
		return eps
	})
	for k := range endpointSeries(t, m) {
		if strings.Contains(k, "endpoint=") {
			t.Fatalf("%s exported before SetEndpoints", k)
		}
	}
	m.SetEndpoints(names)
	m.RequestDone(asEndpoint("tools/call", "x", false), router.NoBackend, router.OutcomeOK, 0, 0)
	m.RequestDone(asEndpoint("tools/call", "x", false), router.NoBackend, router.OutcomeError, 0, 0)
	m.RequestDone(asEndpoint("ping", "", true), router.NoBackend, router.OutcomeOK, 0, 0)
	m.RequestDone(asEndpoint("ping", "gone", false), router.NoBackend, router.OutcomeOK, 0, 0)

	names = []string{"x", "z"} // a reload: y removed, z added, x kept
	m.SetEndpoints(names)
	m.RequestDone(asEndpoint("tools/call", "x", false), router.NoBackend, router.OutcomeOK, 0, 0)
	m.RequestDone(asEndpoint("tools/call", "z", false), router.NoBackend, router.OutcomeTimeout, 0, 0)
	got := endpointSeries(t, m)
	testmetrics.Expect(t, got, map[string]float64{
		"mcprouter_endpoint_requests_total,endpoint=x,outcome=ok":        2,
		"mcprouter_endpoint_requests_total,endpoint=x,outcome=error":     1,
		"mcprouter_endpoint_requests_total,endpoint=(main),outcome=ok":   1,
		"mcprouter_endpoint_requests_total,endpoint=z,outcome=timeout":   1,
		"mcprouter_endpoint_requests_total,endpoint=z,outcome=ok":        0,
		"mcprouter_endpoint_sessions,endpoint=(main)":                    0,
		"mcprouter_endpoint_policy_denied_total,endpoint=x":              0,
		"mcprouter_endpoint_policy_limited_total,endpoint=z":             0,
		"mcprouter_requests_total,backend=router,method=ping,outcome=ok": 2,
	})
	for k := range got {
		for _, gone := range []string{"endpoint=y", "endpoint=gone"} {
			if strings.Contains(k, gone) {
				t.Errorf("%s exported for an endpoint not configured", k)
			}
		}
	}

	m.SetEndpoints(nil)
	for k := range endpointSeries(t, m) {
		if strings.Contains(k, "endpoint=") {
			t.Errorf("%s exported with no virtual servers", k)
		}
	}
}

// TestEndpointLint: the per-endpoint metrics pass Prometheus' linter.
func TestEndpointLint(t *testing.T) {
	m := New(Options{})
	_, reg, _ := newSources(t)
	m.WatchEndpoints(func() []Endpoint { return []Endpoint{{Sessions: reg}, {Name: "x", Sessions: reg}} })
	m.SetEndpoints([]string{"x"})
	m.RequestDone(asEndpoint("ping", "x", false), router.NoBackend, router.OutcomeOK, 0, 0)
	lint(t, m)
}

// BenchmarkRequestDoneEndpoints is BenchmarkRequestDone with virtual servers
// configured: the request also counts under its principal's endpoint.
func BenchmarkRequestDoneEndpoints(b *testing.B) {
	benchRequestDone(b, []string{"team-a", "team-b", "team-c"}, asEndpoint("tools/call", "team-b", false))
}
