package metrics

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/golden"
	"github.com/mcprouter/mcprouter/internal/testmetrics"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// exchange returns an exchange carrying a request for method, as RequestDone sees it.
func exchange(method string) *transport.Exchange {
	return &transport.Exchange{Msg: codec.Message{Kind: codec.KindRequest, ID: []byte("1"), Method: []byte(method)}}
}

// fixedClock makes RequestDone's end time now.
func fixedClock(m *Metrics, now int64) { m.now = func() int64 { return now } }

// feed records a fixed set of requests: method, backend, outcome, total and backend ms.
func feed(m *Metrics) {
	const now = 10e9
	fixedClock(m, now)
	ms := func(v float64) int64 { return int64(v * 1e6) }
	reqs := []struct {
		method           string
		backend          int
		o                router.Outcome
		totalMs, backMs  float64
		unknownStartTime bool
	}{
		{"tools/call", 0, router.OutcomeOK, 1.2, 1.0, false},
		{"tools/call", 0, router.OutcomeOK, 3.0, 2.9, false},
		{"tools/call", 0, router.OutcomeError, 0.5, 0.45, false},
		{"tools/call", 1, router.OutcomeTimeout, 60000.2, 60000, false},
		{"tools/call", router.NoBackend, router.OutcomeError, 0.02, 0, false},
		{"resources/read", 1, router.OutcomeUnavailable, 0.3, 0, false},
		{"initialize", router.NoBackend, router.OutcomeOK, 0.4, 0, false},
		{"tools/list", router.NoBackend, router.OutcomeOK, 0.05, 0, false},
		{"invented/method", router.NoBackend, router.OutcomeError, 0.01, 0, false},
		{"resources/subscribe", router.NoBackend, router.OutcomeOK, 0, 0, true},
		{"tools/call", 7, router.OutcomeOK, 1, 0, false}, // no such backend: counted as the router's
	}
	for _, r := range reqs {
		start := now - ms(r.totalMs)
		if r.unknownStartTime {
			start = 0
		}
		m.RequestDone(exchange(r.method), r.backend, r.o, start, ms(r.backMs))
	}
}

// pedantic returns a pedantic registry (it checks names, help, label consistency and
// descriptions) holding what register puts in it.
func pedantic(t *testing.T, register func(prometheus.Registerer) error) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

// only registers c alone (Metrics.Register adds the Go and process collectors).
func only(c prometheus.Collector) func(prometheus.Registerer) error {
	return func(reg prometheus.Registerer) error { return reg.Register(c) }
}

// seriesOf gathers the gauges and counters register registers, by name and labels
// ("name,label=value,...").
func seriesOf(t *testing.T, register func(prometheus.Registerer) error) map[string]float64 {
	t.Helper()
	return testmetrics.Series(t, pedantic(t, register), "")
}

// gather returns the text exposition of m alone, with the Go version masked.
func gather(t *testing.T, m *Metrics) string {
	t.Helper()
	mfs, err := pedantic(t, only(m)).Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return strings.ReplaceAll(buf.String(), runtime.Version(), "GOVERSION")
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

// TestCollectRequests checks the per-request metrics against a golden exposition: one
// counter per (method, backend, outcome) seen, router time by method, backend time by
// backend and method, with bounded labels.
func TestCollectRequests(t *testing.T) {
	m := New(Options{Backends: []string{"files", "search"}, Version: "test"})
	feed(m)
	checkGolden(t, "requests.golden", gather(t, m))
}

// TestCollectSources reads every component a router has (no fleet) through a pedantic
// registry, which checks names, help, label consistency and descriptions.
func TestCollectSources(t *testing.T) {
	r, reg, streams := newSources(t)
	hs := transport.NewHTTPServer(transport.HTTPConfig{Stream: sse.StreamConfig{Stats: streams}}, reg, r)
	m := New(Options{})
	m.Watch(Sources{Router: r, HTTP: hs, Sessions: reg, Streams: streams, Ready: func() bool { return false }})
	streams.Queued.Add(42)
	hs.Stats.ParseErrors.Add(3)
	r.Stats.Requests.Add(5)
	m.RequestDone(exchange("ping"), router.NoBackend, router.OutcomeOK, 1, 0)

	got := seriesOf(t, m.Register)
	want := map[string]float64{
		"mcprouter_sse_queued_bytes":                         42,
		"mcprouter_codec_errors_total,class=parse":           3,
		"mcprouter_requests_in_flight":                       4,
		"mcprouter_ready":                                    0,
		"mcprouter_dispatcher_shards":                        float64(4 * runtime.GOMAXPROCS(0)),
		"mcprouter_workers_capacity":                         4096,
		"mcprouter_sessions_expired_total":                   0,
		"mcprouter_sessions_budget_used_bytes":               0,
		"mcprouter_overload_rejections_total":                0,
		"mcprouter_sse_slow_consumer_cutoffs_total":          0,
		"mcprouter_codec_errors_total,class=invalid_request": 0,
	}
	testmetrics.Expect(t, got, want)
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, found := got[name]; !found && (name != "process_cpu_seconds_total" || runtime.GOOS == "linux") {
			t.Errorf("%s not exported", name)
		}
	}
}

// TestRequestDoneAllocs: the hot path allocates nothing, with virtual servers
// configured too (the request also counts under its principal's endpoint).
func TestRequestDoneAllocs(t *testing.T) {
	for _, c := range []struct {
		name      string
		endpoints []string
		x         *transport.Exchange
	}{
		{"plain", nil, exchange("tools/call")},
		{"endpoints", []string{"x"}, asEndpoint("tools/call", "x", false)},
	} {
		m := New(Options{Backends: []string{"a"}})
		m.SetEndpoints(c.endpoints)
		start := router.Now()
		if n := testing.AllocsPerRun(1000, func() {
			m.RequestDone(c.x, 0, router.OutcomeOK, start, 1000)
		}); n != 0 {
			t.Errorf("%s: RequestDone allocates %v times per call", c.name, n)
		}
	}
}

func TestInFlightNeverNegative(t *testing.T) {
	r := newRouter(t)
	m := New(Options{})
	m.RequestDone(exchange("ping"), router.NoBackend, router.OutcomeOK, 1, 0)
	if n := m.inFlight(r); n != 0 {
		t.Errorf("in flight %d with more finished than received", n)
	}
	r.Stats.Requests.Add(3)
	if n := m.inFlight(r); n != 2 {
		t.Errorf("in flight %d, want 2", n)
	}
}

// TestStatusFeed computes two updates at known times: the first covers the time since
// start, the second only the interval since the first.
func TestStatusFeed(t *testing.T) {
	m := New(Options{Backends: []string{"files", "search"}, Version: "v1"})
	t0 := time.Unix(1000, 0)
	m.started = t0
	f := m.NewStatusFeed()
	feed(m) // 11 requests
	s1 := f.next(t0.Add(2 * time.Second))
	if s1.Requests.Total != 11 || s1.Requests.Rate != 5.5 || s1.Interval != 2 || s1.Version != "v1" || !s1.Ready {
		t.Errorf("first update: %+v", s1.Requests)
	}
	// ok: 2 files tools/call + initialize + tools/list + subscribe + the stray backend 7.
	if s1.Requests.Outcomes["ok"] != 3 || s1.Requests.Outcomes["timeout"] != 0.5 {
		t.Errorf("outcomes %v", s1.Requests.Outcomes)
	}
	if s1.Methods[0].Method != "tools/call" || s1.Methods[0].Rate != 3 {
		t.Errorf("busiest method %+v", s1.Methods[0])
	}
	if len(s1.Backends) != 2 || s1.Backends[0].Name != "files" || s1.Backends[0].Rate != 1.5 || s1.Backends[0].ErrorRate != 0.5 {
		t.Errorf("backends %+v", s1.Backends)
	}
	// 60s sits in the (30s, 60s] bucket: p99 interpolates to 59.7s.
	if q := s1.Backends[1].Latency; q.Count != 1 || math.Abs(q.P99-59700) > 1e-6 {
		t.Errorf("search latency %+v", q)
	}
	if q := s1.Latency.Router; q.Count != 10 || q.P50 <= 0 {
		t.Errorf("router latency %+v", q)
	}

	// Nothing new: zero rates, no latency figures.
	s2 := f.next(t0.Add(3 * time.Second))
	if s2.Requests.Rate != 0 || s2.Requests.Total != 11 || s2.Interval != 1 || s2.Latency.Router.Count != 0 || len(s2.Methods) != 0 {
		t.Errorf("second update: %+v", s2)
	}
	// The JSON form is one line.
	if b := f.AppendJSON(nil); bytes.ContainsRune(b, '\n') || !bytes.HasPrefix(b, []byte(`{"time":`)) {
		t.Errorf("AppendJSON: %s", b)
	}
}

func BenchmarkRequestDone(b *testing.B) {
	benchRequestDone(b, nil, exchange("tools/call"))
}

// benchRequestDone measures RequestDone of x, a tools/call, with endpoints configured.
func benchRequestDone(b *testing.B, endpoints []string, x *transport.Exchange) {
	m := New(Options{Backends: []string{"a", "b"}})
	m.SetEndpoints(endpoints)
	start := router.Now()
	b.ReportAllocs()
	for b.Loop() {
		m.RequestDone(x, 0, router.OutcomeOK, start, 250_000)
	}
}

// BenchmarkRequestDoneParallel is the contended case: every goroutine records the same
// method and backend, so they share cache lines.
func BenchmarkRequestDoneParallel(b *testing.B) {
	m := New(Options{Backends: []string{"a", "b"}})
	start := router.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		x := exchange("tools/call")
		for pb.Next() {
			m.RequestDone(x, 0, router.OutcomeOK, start, 250_000)
		}
	})
}

func BenchmarkCollect(b *testing.B) {
	m := New(Options{Backends: []string{"a", "b", "c", "d"}})
	feed(m)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLint runs Prometheus' own metric linter (naming conventions: _total on counters,
// base units, no camelCase) over everything the router exports, the fleet-less part.
func TestLint(t *testing.T) {
	m := New(Options{Backends: []string{"files"}})
	feed(m)
	r, reg, streams := newSources(t)
	m.Watch(Sources{Router: r, HTTP: transport.NewHTTPServer(transport.HTTPConfig{}, reg, r), Sessions: reg, Streams: streams})
	lint(t, m)
}

// lint reports as errors what Prometheus' linter finds in what c alone exports.
func lint(t *testing.T, c prometheus.Collector) {
	t.Helper()
	mfs, err := pedantic(t, only(c)).Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// newRouter makes a router with no fleet, closed when the test ends.
func newRouter(t *testing.T) *router.Router {
	t.Helper()
	r, err := router.New(router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// newSources makes what a fleet-less router's metrics watch: the router, its session
// registry and stream stats; closed when the test ends.
func newSources(t *testing.T) (*router.Router, *transport.Registry, *sse.Stats) {
	t.Helper()
	r := newRouter(t)
	reg := transport.NewRegistry(transport.RegistryConfig{}, r)
	t.Cleanup(reg.Close)
	return r, reg, new(sse.Stats)
}
