package bench

// The cost of metrics on the request path, measured end to end: two routers in this
// process, one with metrics (the default) and one with admin.listen: off, in front of the
// same in-process reference backend, driven alternately in short rounds by the same
// clients, so that both see the same machine noise. See RESULTS.md ("metrics").

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/bench/internal/rpccheck"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

const benchWait = 30 * time.Second

// routerUnderTest is a running router and client sessions open on it.
type routerUnderTest struct {
	app      *app.App
	client   *fasthttp.HostClient
	sessions []string
}

func startBackend(b testing.TB) string {
	return mcpbackendtest.Start(b, server.Config{Tick: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).URL()
}

func startRouter(b testing.TB, backendURL, admin string, clients int) *routerUnderTest {
	cfg := app.Config{
		Listen:   "127.0.0.1:0",
		Admin:    app.AdminConfig{Listen: admin},
		Backends: []app.BackendConfig{{Name: "demo", URL: backendURL}},
	}
	a := apptest.Start(b, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), benchWait)
	if (admin == app.AdminOff) != (a.Metrics == nil) {
		b.Fatalf("admin %q: metrics %v", admin, a.Metrics != nil)
	}
	r := &routerUnderTest{app: a, client: &fasthttp.HostClient{Addr: a.Addr(), MaxConns: clients * 2, ReadTimeout: benchWait, WriteTimeout: benchWait}}
	for i := 0; i < clients; i++ {
		r.sessions = append(r.sessions, r.initialize(b))
	}
	return r
}

func (r *routerUnderTest) do(sid string, body []byte, resp *fasthttp.Response) error {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	mcpraw.FastPost(req, "http://"+r.app.Addr()+"/mcp", sid, "2025-06-18")
	req.SetBody(body)
	return r.client.DoTimeout(req, resp, benchWait)
}

func (r *routerUnderTest) initialize(b testing.TB) string {
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := r.do("", []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`), resp); err != nil {
		b.Fatal(err)
	}
	sid := string(resp.Header.Peek("Mcp-Session-Id"))
	if resp.StatusCode() != 200 || sid == "" {
		b.Fatalf("initialize: %d %s", resp.StatusCode(), resp.Body())
	}
	if err := r.do(sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), resp); err != nil || resp.StatusCode() != 202 {
		b.Fatalf("initialized: %v %d", err, resp.StatusCode())
	}
	return sid
}

// call sends one request and checks that the answer is the JSON-RPC result of that call
// (its id, "result", no "error"): a round of error answers must not pass for a round of
// calls.
func (r *routerUnderTest) call(sid string, body, id []byte, resp *fasthttp.Response, m *codec.Message) error {
	if err := r.do(sid, body, resp); err != nil {
		return err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return fmt.Errorf("status %d: %q", resp.StatusCode(), resp.Body())
	}
	return rpccheck.Result(m, resp.Body(), id)
}

// round sends n tools/call echo requests over the router's sessions, one client
// goroutine per session, and returns how long they took.
func (r *routerUnderTest) round(tb testing.TB, n int) time.Duration {
	var next atomic.Int64
	var (
		failOnce sync.Once
		failed   error
	)
	var wg sync.WaitGroup
	start := time.Now()
	for _, sid := range r.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseResponse(resp)
			var body, id []byte
			var m codec.Message
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				id = strconv.AppendInt(id[:0], i, 10)
				body = append(body[:0], `{"jsonrpc":"2.0","id":`...)
				body = append(body, id...)
				body = append(body, `,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"benchmark payload"}}}`...)
				if err := r.call(sid, body, id, resp, &m); err != nil {
					failOnce.Do(func() { failed = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		tb.Fatalf("request failed: %v", failed)
	}
	return time.Since(start)
}

// BenchmarkMetricsOverhead reports the throughput of a router with metrics (on) and
// without (off), from rounds of 200 requests alternating between the two (which one
// goes first alternates too). Each pair of rounds gives a ratio; the reported on/off is
// the median of those paired ratios, which cancels the slow drifts of a shared machine
// better than comparing two averages. b.N is the number of requests per router: run it
// with a fixed count, e.g. -benchtime 100000x.
func BenchmarkMetricsOverhead(b *testing.B) {
	clients := 2 * runtime.GOMAXPROCS(0)
	backend := startBackend(b)
	on := startRouter(b, backend, "127.0.0.1:0", clients)
	off := startRouter(b, backend, app.AdminOff, clients)
	pairedRounds(b, on, off, "on")
}

// pairedRounds runs b.N requests on each of two routers, in rounds of 200 alternating
// between them (which one goes first alternates too), after warming both up
// (connections, pools, the backend's session). It reports each one's throughput
// ("off-req/s", name+"-req/s") and the median of the paired round ratios (name+"/off"),
// which cancels the slow drifts of a shared machine better than comparing two
// averages.
func pairedRounds(b *testing.B, on, off *routerUnderTest, name string) {
	const roundSize = 200
	on.round(b, 5*roundSize)
	off.round(b, 5*roundSize)

	var onTime, offTime time.Duration
	var ratios []float64 // per pair: off time / on time = on throughput / off throughput
	b.ResetTimer()
	for done, i := 0, 0; done < b.N; i++ {
		n := min(roundSize, b.N-done)
		var tOn, tOff time.Duration
		if i%2 == 0 {
			tOff = off.round(b, n)
			tOn = on.round(b, n)
		} else {
			tOn = on.round(b, n)
			tOff = off.round(b, n)
		}
		onTime += tOn
		offTime += tOff
		ratios = append(ratios, tOff.Seconds()/tOn.Seconds())
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/offTime.Seconds(), "off-req/s")
	b.ReportMetric(float64(b.N)/onTime.Seconds(), name+"-req/s")
	b.ReportMetric(median(ratios), name+"/off")
	b.ReportMetric(0, "ns/op") // wall time covers both routers: not a per-request cost
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
