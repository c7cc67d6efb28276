package metrics

import (
	"testing"

	"github.com/mcprouter/mcprouter/internal/testmetrics"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/budget"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// TestVirtualServersInTotals: the HTTP counters of a virtual server's own HTTP server
// count in the router's totals, on /metrics and the status page, beside the main
// endpoint's (whose entry in the endpoint list is not counted twice).
func TestVirtualServersInTotals(t *testing.T) {
	m := New(Options{})
	r, reg, st := newSources(t)
	main, vs := new(transport.HTTPServer), new(transport.HTTPServer)
	m.Watch(Sources{Router: r, HTTP: main, Sessions: reg, Streams: st})
	m.WatchEndpoints(func() []Endpoint {
		return []Endpoint{{Sessions: reg, HTTP: main}, {Name: "x", HTTP: vs}}
	})
	m.SetEndpoints([]string{"x"})
	for h, n := range map[*transport.HTTPServer]uint64{main: 1, vs: 10} {
		h.Stats.Requests.Add(n)
		h.Stats.Rejected.Add(n)
		h.Stats.ParseErrors.Add(n)
		h.Stats.InvalidRequests.Add(n)
		h.Stats.OpenStreams.Add(int64(n))
	}
	testmetrics.Expect(t, seriesOf(t, only(m)), map[string]float64{
		"mcprouter_http_requests_total":                      11,
		"mcprouter_http_rejected_total":                      11,
		"mcprouter_codec_errors_total,class=parse":           11,
		"mcprouter_codec_errors_total,class=invalid_request": 11,
		"mcprouter_sse_open_streams":                         11,
	})
	if open := m.NewStatusFeed().Next().Streams.Open; open != 11 {
		t.Errorf("status page: %d open streams, want 11", open)
	}
}

// TestVirtualServersShareBudget: the virtual servers' registries draw on the main
// endpoint's memory budget, so the bytes it holds count once, not once per registry.
func TestVirtualServersShareBudget(t *testing.T) {
	m := New(Options{})
	r := newRouter(t)
	b := budget.New(1<<20, 1<<10)
	reg := transport.NewRegistry(transport.RegistryConfig{Budget: b}, r)
	t.Cleanup(reg.Close)
	vs := transport.NewRegistry(transport.RegistryConfig{Budget: b}, r)
	t.Cleanup(vs.Close)
	m.Watch(Sources{Router: r, Sessions: reg, Streams: new(sse.Stats)})
	m.WatchEndpoints(func() []Endpoint {
		return []Endpoint{{Sessions: reg}, {Name: "x", Sessions: vs}}
	})
	m.SetEndpoints([]string{"x"})
	if !b.Account().TryReserve(100) {
		t.Fatal("reservation refused")
	}
	if got := seriesOf(t, only(m))["mcprouter_sessions_budget_used_bytes"]; got != 100 {
		t.Errorf("budget used %v, want 100", got)
	}
}
