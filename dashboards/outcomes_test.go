package dashboards

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// TestRequestOutcomes drives one request to each way a request can end and checks how
// /metrics counts it: by method, backend (or "router") and outcome, with backend time
// recorded for what reached the backend and in-flight back to zero at the end.
func TestRequestOutcomes(t *testing.T) {
	s := startStackWith(t, slog.LevelInfo, nil, func(c *app.Config) {
		c.Backends[0].Timeout = time.Second
	})
	c := s.open()
	c.call("tools/call", `{"name":"demo__echo","arguments":{"text":"a"}}`)                       // ok, demo
	c.call("tools/call", `{"name":"demo__fail_rpc","arguments":{"code":-32050,"message":"no"}}`) // error, demo
	c.call("tools/call", `{"name":"nope"}`)                                                      // error, router
	c.call("prompts/list", "")                                                                   // ok, router
	if body := c.call("tools/call", `{"name":"demo__sleep","arguments":{"ms":20000}}`); !strings.Contains(body, `"code":-32011`) {
		t.Errorf("sleep past the timeout: %s", body) // timeout, demo
	}

	// A call the client cancels while the backend works on it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.post(c.id, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"demo__sleep","arguments":{"ms":10000}}}`)
	}()
	s.waitMetric(`mcprouter_backend_in_flight_requests{backend="demo"}`, 1)
	if status, _, body := s.post(c.id, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}}`); status != 202 {
		t.Fatalf("cancel: %d %s", status, body)
	}
	testwait.Recv(t, "the cancelled call to return", waitLimit, done)

	m := s.waitMetric(`mcprouter_requests_total{backend="demo",method="tools/call",outcome="cancelled"}`, 1)
	want := map[string]float64{
		`mcprouter_requests_total{backend="demo",method="tools/call",outcome="ok"}`:        1,
		`mcprouter_requests_total{backend="demo",method="tools/call",outcome="error"}`:     1,
		`mcprouter_requests_total{backend="demo",method="tools/call",outcome="timeout"}`:   1,
		`mcprouter_requests_total{backend="demo",method="tools/call",outcome="cancelled"}`: 1,
		`mcprouter_requests_total{backend="router",method="tools/call",outcome="error"}`:   1,
		`mcprouter_requests_total{backend="router",method="prompts/list",outcome="ok"}`:    1,
		`mcprouter_requests_total{backend="router",method="initialize",outcome="ok"}`:      1,
		// Backend time for each request that reached the backend.
		`mcprouter_request_backend_duration_seconds_count{backend="demo",method="tools/call"}`: 4,
		`mcprouter_request_router_duration_seconds_count{method="tools/call"}`:                 5,
		`mcprouter_backend_timeouts_total`:                                                     1,
		`mcprouter_backend_cancellations_total`:                                                1,
	}
	for k, v := range want {
		if got := metric(m, k); got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	// The timed-out call waited about the timeout (1s) in the backend: its time is
	// counted as backend time, above the 0.5s bucket where the quick calls are.
	if got := metric(m, `mcprouter_request_backend_duration_seconds_bucket{backend="demo",method="tools/call",le="0.5"}`); got > 3 {
		t.Errorf("backend time buckets: %v requests under 0.5s, want at most 3 (not the timed-out one)", got)
	}
	testwait.For(t, "no request in flight", waitLimit, func() bool {
		_, m = s.get("/metrics")
		return metric(m, "mcprouter_requests_in_flight ") == 0
	})
}
