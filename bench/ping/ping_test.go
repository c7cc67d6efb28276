// Package ping measures the cost of the whole client-facing stack on the cheapest MCP
// request there is: a ping over Streamable HTTP, through fasthttp, the transport, the
// codec, the dispatcher and the router, against a bare fasthttp handler that answers a
// fixed JSON body. Both run on real loopback TCP under the same load (many keep-alive
// connections from a fasthttp client). The ratio comes from the side-by-side benchmark,
// which alternates short phases against each server; the plain ones give allocations:
//
//	go test -run '^$' -bench 'Ping/side-by-side' -benchtime 40x -count 3 ./bench/ping
//	go test -run '^$' -bench 'Ping/(bare|router)$' -benchtime 3s -count 3 ./bench/ping
//
// allocs/op counts client and server together, so the router's own allocations per
// request are the difference between its row and the bare row. Results and how to read
// them: bench/RESULTS.md, section "ping through the stack".
package ping

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/bench/internal/rpccheck"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

// Load shape: goroutines per GOMAXPROCS issuing requests, over at most maxConns
// keep-alive connections.
const (
	parallelism = 32
	maxConns    = 64
)

var pingBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)

// pingID is the id token of pingBody, which every answer must carry back.
var pingID = []byte(`1`)

// bareReply is what the bare server answers: the same bytes the router answers a ping
// with (id 1).
var bareReply = []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)

func BenchmarkPing(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		addr, stop := startBare(b)
		defer stop()
		run(b, addr, nil)
	})
	b.Run("router", func(b *testing.B) {
		a := startRouter(b)
		run(b, a.Addr(), func(c *fasthttp.HostClient) string { return initialize(b, c) })
	})
	b.Run("side-by-side", sideBySide)
}

// sideBySide measures the ratio in a way a shared, noisy machine cannot skew: it
// alternates short phases of the same load (the same client goroutines over the same
// keep-alive connections) against the bare server and against the router, and counts
// the requests each completes. Load from elsewhere changes over seconds, so consecutive
// phases see the same conditions. One op is one pair of phases; run it with a fixed
// count, e.g. -benchtime 20x. Reported: each side's throughput and ratio = router
// requests / bare requests.
func sideBySide(b *testing.B) {
	bareAddr, stop := startBare(b)
	defer stop()
	a := startRouter(b)
	mk := func(addr string) *fasthttp.HostClient {
		return &fasthttp.HostClient{Addr: addr, MaxConns: maxConns, MaxIdleConnDuration: time.Minute, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	}
	bare, rt := mk(bareAddr), mk(a.Addr())
	workers := parallelism * runtime.GOMAXPROCS(0)
	type worker struct{ breq, rreq *fasthttp.Request }
	ws := make([]worker, workers)
	for i := range ws {
		ws[i].breq, ws[i].rreq = fasthttp.AcquireRequest(), fasthttp.AcquireRequest()
		setup(ws[i].breq, bare.Addr, "")
		setup(ws[i].rreq, rt.Addr, initialize(b, rt))
		ws[i].breq.SetBody(pingBody)
		ws[i].rreq.SetBody(pingBody)
	}
	var failed atomic.Int64
	phase := func(router bool) (done int64, took, cpu time.Duration) {
		var n atomic.Int64
		var wg sync.WaitGroup
		c0 := cpuTime()
		t0 := time.Now()
		end := t0.Add(phaseLength)
		for i := range ws {
			wg.Add(1)
			go func(w worker) {
				defer wg.Done()
				c, req := bare, w.breq
				if router {
					c, req = rt, w.rreq
				}
				resp := fasthttp.AcquireResponse()
				defer fasthttp.ReleaseResponse(resp)
				var m codec.Message
				k := int64(0)
				for time.Now().Before(end) {
					if pong(c, req, resp, &m) != nil {
						failed.Add(1)
					}
					k++
				}
				n.Add(k)
			}(ws[i])
		}
		wg.Wait()
		return n.Load(), time.Since(t0), cpuTime() - c0
	}
	phase(false) // warm both up: connections, sessions' shards, pools
	phase(true)
	var bareN, routerN int64
	var bareT, routerT, bareCPU, routerCPU time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which side goes first in each pair.
		first := i%2 == 1
		n, d, c := phase(first)
		m, e, f := phase(!first)
		if first {
			n, d, c, m, e, f = m, e, f, n, d, c
		}
		bareN, bareT, bareCPU = bareN+n, bareT+d, bareCPU+c
		routerN, routerT, routerCPU = routerN+m, routerT+e, routerCPU+f
	}
	b.StopTimer()
	for i := range ws {
		fasthttp.ReleaseRequest(ws[i].breq)
		fasthttp.ReleaseRequest(ws[i].rreq)
	}
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d requests failed", n)
	}
	bareRate := float64(bareN) / bareT.Seconds()
	routerRate := float64(routerN) / routerT.Seconds()
	b.ReportMetric(bareRate, "bare-req/s")
	b.ReportMetric(routerRate, "router-req/s")
	b.ReportMetric(routerRate/bareRate, "ratio")
	// The same ratio from the CPU time this process spent per request (client and server
	// together, as in the throughputs): what the wall-clock ratio converges to when the
	// process has the cores to itself, and far steadier than it on a shared machine.
	bareCost := float64(bareCPU) / float64(bareN)
	routerCost := float64(routerCPU) / float64(routerN)
	b.ReportMetric(bareCost/1e3, "bare-cpu-µs/req")
	b.ReportMetric(routerCost/1e3, "router-cpu-µs/req")
	b.ReportMetric(bareCost/routerCost, "cpu-ratio")
}

// cpuTime is the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// phaseLength is the duration of one phase of sideBySide.
const phaseLength = 250 * time.Millisecond

// startBare serves the fixed reply on loopback with the server settings the router uses.
func startBare(b testing.TB) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(bareReply)
		},
		Name:                 "bare",
		NoDefaultContentType: true,
		IdleTimeout:          2 * time.Minute,
		ReadTimeout:          2 * time.Minute,
	}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	return ln.Addr().String(), func() { srv.Shutdown(); <-served }
}

// startRouter runs a complete router (app.App, as cmd/mcprouter builds it) on loopback,
// without backends, JetStream or the admin listener.
func startRouter(b testing.TB) *app.App {
	var cfg app.Config
	cfg.Listen = "127.0.0.1:0"
	cfg.Admin.Listen = "off"
	cfg.NATS.NoJetStream = true
	cfg.Sessions.NoPersist = true
	return apptest.Start(b, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), 10*time.Second)
}

// initialize opens a 2025-06-18 session and returns its id.
func initialize(b testing.TB, c *fasthttp.HostClient) string {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	setup(req, c.Addr, "")
	req.SetBodyString(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() != 200 {
		b.Fatalf("initialize: %v %d %s", err, resp.StatusCode(), resp.Body())
	}
	sid := string(resp.Header.Peek("Mcp-Session-Id"))
	setup(req, c.Addr, sid)
	req.SetBodyString(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil || resp.StatusCode() != 202 {
		b.Fatalf("initialized: %v %d", err, resp.StatusCode())
	}
	return sid
}

// setup makes req a POST to addr's /mcp, in 2025-06-18 session sid when it is set (the
// bare server takes none); the body is the caller's.
func setup(req *fasthttp.Request, addr, sid string) {
	mcpraw.FastPost(req, "http://"+addr+"/mcp", sid, "2025-06-18")
}

// pong sends one ping and checks that the answer is its JSON-RPC result (status 200,
// the ping's id, "result", no "error"): a phase of error answers must not pass for a
// phase of pings. m is the caller's scratch space: a correct answer allocates nothing.
func pong(c *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, m *codec.Message) error {
	if err := c.Do(req, resp); err != nil {
		return err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return fmt.Errorf("status %d: %q", resp.StatusCode(), resp.Body())
	}
	return rpccheck.Result(m, resp.Body(), pingID)
}

// run sends pings from parallel goroutines; each opens its own session first when
// session is set (a router serves many clients, not one).
func run(b *testing.B, addr string, session func(*fasthttp.HostClient) string) {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: maxConns, MaxIdleConnDuration: time.Minute, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	var failed atomic.Int64
	var firstErr atomic.Value
	b.SetParallelism(parallelism)
	b.SetBytes(int64(len(pingBody)))
	b.ReportAllocs()
	// allocs/op is rounded down to an integer; mallocs/req keeps the fraction (client and
	// server together, as allocs/op).
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		sid := ""
		if session != nil {
			sid = session(c)
		}
		setup(req, addr, sid)
		req.SetBody(pingBody)
		var m codec.Message
		for pb.Next() {
			if err := pong(c, req, resp, &m); err != nil {
				if failed.Add(1) == 1 {
					firstErr.Store(err.Error())
				}
			}
		}
	})
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "mallocs/req")
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed; first: %v", n, b.N, firstErr.Load())
	}
}
