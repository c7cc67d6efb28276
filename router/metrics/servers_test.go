package metrics

import (
	"testing"

	"github.com/mcprouter/mcprouter/transport"
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
	got := seriesOf(t, only(m))
	for k, want := range map[string]float64{
		"mcprouter_http_requests_total":                      11,
		"mcprouter_http_rejected_total":                      11,
		"mcprouter_codec_errors_total,class=parse":           11,
		"mcprouter_codec_errors_total,class=invalid_request": 11,
		"mcprouter_sse_open_streams":                         11,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if open := m.NewStatusFeed().Next().Streams.Open; open != 11 {
		t.Errorf("status page: %d open streams, want 11", open)
	}
}
