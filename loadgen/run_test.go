package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/loadtest"
	"github.com/mcprouter/mcprouter/loadgen/report"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
)

func TestMain(m *testing.M) { sdktest.Main(m) }

func startLoadtest(t *testing.T, o loadtest.Options) *loadtest.Server {
	t.Helper()
	srv, err := loadtest.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func mustRun(t *testing.T, cfg Config) *report.Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// simulate is the arithmetic of open-loop timing for one session: request i arrives
// at i*interval, starts when it has arrived and its predecessor is done, and takes
// service(i). It returns the corrected (from arrival) latencies of requests
// [from, to) in milliseconds.
func simulate(n, from int, interval float64, service func(i int) float64) []float64 {
	var done float64
	var out []float64
	for i := range n {
		arrival := float64(i) * interval
		start := math.Max(arrival, done)
		done = start + service(i)
		if i >= from {
			out = append(out, done-arrival)
		}
	}
	sort.Float64s(out)
	return out
}

// percentile uses the HdrHistogram rank rule (nearest rank, rounded).
func percentile(sorted []float64, p float64) float64 {
	rank := int(p/100*float64(len(sorted)) + 0.5)
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// TestOpenLoopCorrection runs one session in open loop at 100/s against a server with
// a fixed service time where every 100th call stalls for 50 ms. A stall holds up the
// calls scheduled behind it: measured from their intended send times they are late by
// 41, 32, 23, 14 and 5 ms (minus a little service time), and the corrected percentiles
// must show that, as the queue arithmetic predicts; the uncorrected ones, measured
// from the actual sends, see only the one slow call per hundred and hide it.
func TestOpenLoopCorrection(t *testing.T) {
	const (
		rate     = 100.0
		warmupN  = 100
		measureN = 500
		service  = time.Millisecond
		stall    = 50 * time.Millisecond
	)
	srv := startLoadtest(t, loadtest.Options{ServiceTime: service, StallEvery: 100, StallFor: stall})
	rep := mustRun(t, Config{
		Target:   client.Options{URL: srv.URL()},
		Sessions: 1, Rate: rate,
		Warmup: warmupN * time.Second / rate, Duration: measureN * time.Second / rate,
		Mix: []OpSpec{{Tool: "echo", Args: `{"text":"x"}`}},
	})
	// Counts are exact: the schedule has a fixed number of arrivals in each window.
	if rep.Requests != measureN || rep.Excluded != warmupN || rep.Errors != 0 {
		t.Fatalf("requests %d excluded %d errors %d, want %d %d 0", rep.Requests, rep.Excluded, rep.Errors, measureN, warmupN)
	}
	if got := srv.Calls(); got != warmupN+measureN {
		t.Fatalf("server saw %d calls, want %d", got, warmupN+measureN)
	}
	// The effective service time includes sleep overshoot and the round trip: take it
	// from the run itself (the uncorrected median is an ordinary call).
	s := rep.LatencyUncorrected.P50 / 1e3
	svc := func(i int) float64 {
		if (i+1)%100 == 0 {
			return float64(stall)/1e6 + (s - float64(service)/1e6) // the stall plus the same overhead
		}
		return s
	}
	want := simulate(warmupN+measureN, warmupN, 1e3/rate, svc)
	got := rep.Latency
	ms := func(us float64) float64 { return us / 1e3 }
	p97 := 0.0
	for _, p := range rep.Distribution {
		if p.Percentile == 97 {
			p97 = ms(p.Corrected)
		}
	}
	t.Logf("effective service %.2fms; corrected p90 %.2f p97 %.2f p99 %.2f mean %.2f; model p90 %.2f p97 %.2f p99 %.2f mean %.2f; uncorrected p90 %.2f p99 %.2f max %.2f",
		s, ms(got.P90), p97, ms(got.P99), ms(got.Mean),
		percentile(want, 90), percentile(want, 97), percentile(want, 99), mean(want),
		ms(rep.LatencyUncorrected.P90), ms(rep.LatencyUncorrected.P99), ms(rep.LatencyUncorrected.Max))

	// Scheduling can only delay a call, never hurry it: every corrected latency is at
	// least the model's with the nominal service time, whatever the machine does, so
	// the stall must show in the corrected tail at least where that floor puts it.
	floor := simulate(warmupN+measureN, warmupN, 1e3/rate, func(i int) float64 {
		if (i+1)%100 == 0 {
			return float64(stall) / 1e6
		}
		return float64(service) / 1e6
	})
	atLeast := func(name string, gotMS, floorMS float64) {
		t.Helper()
		// The histogram's 0.1% resolution, and the pacer's first sends, which may go
		// out a few tens of microseconds early.
		if gotMS < floorMS*0.999-0.1 {
			t.Errorf("corrected %s = %.2fms, below the floor of %.2fms the queue arithmetic sets", name, gotMS, floorMS)
		}
	}
	atLeast("p97", p97, percentile(floor, 97))
	atLeast("p99", ms(got.P99), percentile(floor, 99))
	atLeast("mean", ms(got.Mean), mean(floor))
	// Every stall is at least 50ms from the actual send too.
	if u := ms(rep.LatencyUncorrected.Max); u < float64(stall)/1e6*0.999 {
		t.Errorf("uncorrected max %.2fms, want the 50ms stall", u)
	}
	// How close the run came to the model (with the measured service time) is a
	// wall-clock figure: it is logged, not checked, since a shared machine can delay
	// any call without saying so. TestOpenLoopArithmetic, on a fake clock, is the exact
	// check of the arithmetic from above as well as from below.
	g := rep.Generator
	t.Logf("corrected minus model: p97 %+.2fms p99 %+.2fms mean %+.2fms; generator CPU %.0f%%, waiting for a CPU %.0f%%",
		p97-percentile(want, 97), ms(got.P99)-percentile(want, 99), ms(got.Mean)-mean(want), g.CPUAvgPct, g.RunqueueWaitPct)
	// The calls held up behind a stall started late: the generator says so.
	if rep.Generator.StarvedSends < 20 || rep.Generator.Trustworthy {
		t.Errorf("generator %+v: want the held-up sends counted and the run flagged", rep.Generator)
	}
}

// runUntil runs cfg until it has measured n operations (as its live view reports
// them, about once a second), then cancels it: a run that measured that much however
// slowly the machine ran it, where a fixed duration could end before a stalled process
// measured anything.
func runUntil(t *testing.T, cfg Config, n int64) *report.Report {
	t.Helper()
	cfg.Duration = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := Run(ctx, cfg, func(p Progress) {
		if p.Phase == "measuring" && p.Requests >= n {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests < n {
		t.Fatalf("the run ended after %d measured operations, before %d", rep.Requests, n)
	}
	return rep
}

// TestClosedLoopCounts checks that every call the server saw is accounted for, and that
// closed-loop latencies are the same corrected and uncorrected.
func TestClosedLoopCounts(t *testing.T) {
	srv := startLoadtest(t, loadtest.Options{})
	rep := runUntil(t, Config{
		Target:   client.Options{URL: srv.URL()},
		Sessions: 4, Warmup: 200 * time.Millisecond,
		Mix: []OpSpec{{Tool: "echo", Args: `{"text":"{{seq}}"}`}},
	}, 200)
	if rep.Requests == 0 || rep.Errors != 0 {
		t.Fatalf("requests %d errors %d", rep.Requests, rep.Errors)
	}
	if got := rep.Requests + rep.Excluded; got != srv.Calls() {
		t.Errorf("requests %d + excluded %d = %d, server saw %d", rep.Requests, rep.Excluded, got, srv.Calls())
	}
	if rep.Latency != rep.LatencyUncorrected {
		t.Errorf("closed loop: corrected %+v != uncorrected %+v", rep.Latency, rep.LatencyUncorrected)
	}
	if rep.Config.Pacing != "closed" || rep.Generator.Pacing != "closed" {
		t.Errorf("pacing %q/%q", rep.Config.Pacing, rep.Generator.Pacing)
	}
	if len(rep.Series) == 0 {
		t.Error("no time series")
	}
}

// TestAgainstSDK runs a mixed workload over every transport against the official Go
// SDK server: every run completes without errors.
func TestAgainstSDK(t *testing.T) {
	var c sdktest.Counters
	start := func(mode sdktest.Mode) string {
		ts := sdktest.StartHTTP(sdktest.NewServer(&c, 10, 4), mode)
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mix := []OpSpec{
		{Tool: "echo", Args: `{"text":"hello {{seq}} from {{session}}"}`, Weight: 6},
		{Method: "tools/list"},
		{Method: "resources/list", Pages: -1},
		{URI: "test://r/{{rand 0 9}}"},
		{Prompt: "greet", Args: `{"name":"{{randstr 5}}"}`},
	}
	tests := []struct {
		name   string
		target client.Options
		rate   float64
		ping   bool
	}{
		{"http-session-sse", client.Options{URL: start(sdktest.SessionSSE), Stream: true}, 0, true},
		{"http-session-json-open-loop", client.Options{URL: start(sdktest.SessionJSON)}, 200, true},
		{"http-stateless", client.Options{URL: start(sdktest.Stateless)}, 0, true},
		{"http-2026-07-28", client.Options{URL: start(sdktest.Stateless), Protocol: client.Version20260728}, 0, false},
		{"sse-legacy", client.Options{Transport: client.SSE, URL: start(sdktest.LegacySSE)}, 0, true},
		{"stdio", client.Options{Transport: client.Stdio, Command: []string{exe}, Env: []string{sdktest.StdioEnv + "=1"}}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mix
			if tt.ping {
				m = append(m[:len(m):len(m)], OpSpec{Method: "ping"})
			}
			// 220 operations, so that every method of the mix is drawn (one of them
			// missing has odds below one in 10^8).
			rep := runUntil(t, Config{Target: tt.target, Sessions: 3, Rate: tt.rate, Warmup: 100 * time.Millisecond,
				Mix: m}, 220)
			if rep.Requests == 0 || rep.Errors != 0 {
				t.Fatalf("requests %d errors %d %v (first session error %q)", rep.Requests, rep.Errors, rep.ErrorsByClass, rep.Sessions.FirstError)
			}
			for _, method := range []string{"tools/call", "tools/list", "resources/list", "resources/read", "prompts/get"} {
				if rep.ByMethod[method] == nil || rep.ByMethod[method].Requests == 0 {
					t.Errorf("no %s in by_method", method)
				}
			}
			if rep.ByMethod["resources/list"].Pages <= rep.ByMethod["resources/list"].Requests {
				t.Errorf("resources/list walked %d pages in %d operations; with 10 resources at 4 a page each walk has 3",
					rep.ByMethod["resources/list"].Pages, rep.ByMethod["resources/list"].Requests)
			}
			if rep.ByTool["echo"] == nil {
				t.Error("no echo in by_tool")
			}
			if rep.Sessions.Opened != 3 || rep.Target.Protocol == "" {
				t.Errorf("sessions %+v protocol %q", rep.Sessions, rep.Target.Protocol)
			}
		})
	}
}

func TestErrorClasses(t *testing.T) {
	var c sdktest.Counters
	ts := sdktest.StartHTTP(sdktest.NewServer(&c, 1, 0), sdktest.SessionJSON)
	defer ts.Close()
	rep := mustRun(t, Config{
		Target: client.Options{URL: ts.URL + "/mcp"}, Sessions: 2, Duration: 500 * time.Millisecond,
		Mix: []OpSpec{{Tool: "fail"}, {Tool: "nope"}, {Method: "no/such/method"}},
	})
	for _, class := range []string{"tool_error", "http_400"} {
		if rep.ErrorsByClass[class] == 0 {
			t.Errorf("no %s errors in %v", class, rep.ErrorsByClass)
		}
	}
	jsonrpc := int64(0)
	for k, v := range rep.ErrorsByClass {
		if len(k) > 8 && k[:8] == "jsonrpc_" {
			jsonrpc += v
		}
	}
	if jsonrpc == 0 {
		t.Errorf("no JSON-RPC errors (unknown tool) in %v", rep.ErrorsByClass)
	}
	if rep.Errors != rep.Requests {
		t.Errorf("%d errors in %d requests, want all", rep.Errors, rep.Requests)
	}
}

func TestNoServer(t *testing.T) {
	_, err := Run(context.Background(), Config{Target: client.Options{URL: "http://127.0.0.1:1/mcp"}, Sessions: 2,
		Duration: 100 * time.Millisecond, Timeout: time.Second}, nil)
	if err == nil {
		t.Fatal("run against nothing succeeded")
	}
}

// TestSessionExpiry has the server forget sessions now and then (404 on a request with
// a session id, as the specification prescribes): the failed call is counted as
// http_404 and the session is re-established.
func TestSessionExpiry(t *testing.T) {
	var lt loadtest.Server
	var n atomic.Int64
	h := func(ctx *fasthttp.RequestCtx) {
		if len(ctx.Request.Header.Peek("Mcp-Session-Id")) > 0 && bytes.Contains(ctx.PostBody(), []byte(`"tools/call"`)) && n.Add(1)%40 == 0 {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		lt.Handler(ctx)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Shutdown()
	rep := mustRun(t, Config{Target: client.Options{URL: "http://" + ln.Addr().String() + "/mcp"}, Sessions: 2,
		Warmup: 0, Duration: 500 * time.Millisecond, Mix: []OpSpec{{Tool: "echo"}}})
	if rep.ErrorsByClass["http_404"] == 0 || rep.Errors != rep.ErrorsByClass["http_404"] {
		t.Errorf("errors %d by class %v", rep.Errors, rep.ErrorsByClass)
	}
	// Every measured expiry re-dials; so do a few unmeasured ones (calls made while
	// the other session was still connecting).
	if n := rep.ErrorsByClass["http_404"]; rep.Sessions.Reconnects < n || rep.Sessions.Reconnects > n+n/10+4 {
		t.Errorf("reconnects %d for %d expiries", rep.Sessions.Reconnects, rep.ErrorsByClass["http_404"])
	}
	if rep.Requests-rep.Errors < 10*rep.Errors {
		t.Errorf("requests %d errors %d: the sessions did not recover", rep.Requests, rep.Errors)
	}
}

func TestChurn(t *testing.T) {
	srv := startLoadtest(t, loadtest.Options{})
	rep := mustRun(t, Config{
		Target: client.Options{URL: srv.URL()}, Mode: Churn, Sessions: 2, ChurnCalls: 2,
		Duration: 500 * time.Millisecond, Mix: []OpSpec{{Tool: "echo"}},
	})
	cycles := rep.ByMethod["session"]
	if cycles == nil || cycles.Requests == 0 || rep.Requests != cycles.Requests || rep.Errors != 0 {
		t.Fatalf("session cycles %+v, requests %d errors %d", cycles, rep.Requests, rep.Errors)
	}
	if calls := rep.ByMethod["tools/call"]; calls == nil || calls.Requests != 2*cycles.Requests || calls.Primary {
		t.Errorf("tools/call %+v, want 2 per cycle and not primary", calls)
	}
	if cl := rep.ByMethod["close"]; cl == nil || cl.Requests != cycles.Requests {
		t.Errorf("close %+v", cl)
	}
	if srv.Sessions() < cycles.Requests {
		t.Errorf("server initialized %d sessions for %d cycles", srv.Sessions(), cycles.Requests)
	}
}

// TestFanout subscribes five sessions to one resource of the SDK server, over each
// transport that has a server-to-client stream, and triggers ten updates: every
// subscriber must receive every one.
func TestFanout(t *testing.T) {
	for _, tt := range []struct {
		name      string
		mode      sdktest.Mode
		transport string
		path      string
	}{
		{"http-json", sdktest.SessionJSON, client.HTTP, "/mcp"},
		{"http-sse", sdktest.SessionSSE, client.HTTP, "/mcp"},
		{"legacy-sse", sdktest.LegacySSE, client.SSE, "/mcp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c sdktest.Counters
			ts := sdktest.StartHTTP(sdktest.NewServer(&c, 1, 0), tt.mode)
			defer ts.Close()
			rep := mustRun(t, Config{
				Target: client.Options{URL: ts.URL + tt.path, Transport: tt.transport}, Mode: Fanout, Sessions: 5, Duration: time.Second,
				Fanout: FanoutSpec{URI: "test://r/0", Rate: 10, Trigger: OpSpec{Tool: "touch", Args: `{"uri":"test://r/0"}`}},
			})
			f := rep.Fanout
			if f == nil {
				t.Fatal("no fan-out section")
			}
			if f.Subscribers != 5 || f.Triggers != 10 || f.Expected != 50 {
				t.Errorf("subscribers %d triggers %d expected %d, want 5 10 50", f.Subscribers, f.Triggers, f.Expected)
			}
			if f.Delivered != f.Expected || f.Missing != 0 || f.Duplicates != 0 {
				t.Errorf("delivered %d of %d, missing %d, duplicates %d", f.Delivered, f.Expected, f.Missing, f.Duplicates)
			}
			if rep.Requests != f.Delivered || f.Latency.Count != f.Delivered || f.PerSessionMax.Count != 5 {
				t.Errorf("requests %d latency count %d per-session %d", rep.Requests, f.Latency.Count, f.PerSessionMax.Count)
			}
			if c.Subscribes.Load() != 5 {
				t.Errorf("server saw %d subscriptions", c.Subscribes.Load())
			}
		})
	}
}

func TestStreamUnsupported(t *testing.T) {
	srv := startLoadtest(t, loadtest.Options{}) // answers GET with 405
	rep := mustRun(t, Config{Target: client.Options{URL: srv.URL(), Stream: true}, Sessions: 2, Duration: 300 * time.Millisecond})
	if rep.Errors != 0 || rep.Sessions.Opened != 2 || rep.Sessions.Streams != 0 {
		t.Errorf("errors %d sessions %+v", rep.Errors, rep.Sessions)
	}
	found := false
	for _, w := range rep.Generator.Warnings {
		found = found || strings.Contains(w, "405")
	}
	if !found {
		t.Errorf("no warning about the missing streams: %v", rep.Generator.Warnings)
	}
}

func TestCancel(t *testing.T) {
	srv := startLoadtest(t, loadtest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(400*time.Millisecond, cancel)
	start := time.Now()
	rep, err := Run(ctx, Config{Target: client.Options{URL: srv.URL()}, Sessions: 2, Duration: time.Minute, Rate: 100,
		Mix: []OpSpec{{Tool: "echo"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("cancel took %v", time.Since(start))
	}
	if rep.DurationS <= 0 || rep.DurationS > 30 || rep.Requests == 0 {
		t.Errorf("duration %v requests %d", rep.DurationS, rep.Requests)
	}
}

// TestProgress: the live view names each phase of a run. On the fake clock every tick
// comes on time, so the phases it sees do not depend on the machine's load.
func TestProgress(t *testing.T) {
	cfg := Config{Sessions: 1, Warmup: 1100 * time.Millisecond, Duration: 1200 * time.Millisecond, Mix: []OpSpec{{Tool: "echo"}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var phases []string
	synctest.Test(t, func(t *testing.T) {
		d := &fakeDialer{service: func(int64) time.Duration { return time.Millisecond }}
		if _, err := newRun(cfg).execute(context.Background(), d, nil, time.Sleep, func(p Progress) { phases = append(phases, p.Phase) }); err != nil {
			t.Fatal(err)
		}
	})
	seen := map[string]bool{}
	for _, p := range phases {
		seen[p] = true
	}
	if !seen["warm-up"] || !seen["measuring"] {
		t.Errorf("phases %v", phases)
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Mode: "burst"},
		{Rate: -1},
		{Fanout: FanoutSpec{Rate: -1}}, // in any mode, not only fanout
		{Fanout: FanoutSpec{Rate: math.Inf(1)}},
		{Warmup: -time.Second},
		{Mix: []OpSpec{{}}},
		{Mix: []OpSpec{{Tool: "echo", Method: "ping"}}},
		{Mix: []OpSpec{{Method: "ping", Args: "{}"}}},
		{Mix: []OpSpec{{Tool: "echo", Params: "{}"}}},
		{Mode: Fanout},
		{Mode: Fanout, Fanout: FanoutSpec{URI: "x://y"}},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("config %d validated: %+v", i, c)
		}
	}
	var c Config
	if err := c.Validate(); err != nil || c.Sessions != 16 || c.Duration != 10*time.Second || len(c.Mix) != 1 || c.Mix[0].Method != "ping" {
		t.Errorf("defaults: %v %+v", err, c)
	}
}

func TestBadTemplateFailsEarly(t *testing.T) {
	_, err := Run(context.Background(), Config{Target: client.Options{URL: "http://127.0.0.1:1/mcp"},
		Mix: []OpSpec{{Tool: "echo", Args: `{"text": {{seq}`}}}, nil)
	if err == nil {
		t.Fatal("invalid JSON template accepted")
	}
}

// TestLabelsAndSlowCount: two entries calling the same tool are reported apart when
// one has a label, and the slow count finds every stall. One session against a
// server that stalls every 4th call for 60 ms: a quarter of the calls are slow
// whatever the machine's load (a fast call taking 40 ms would add to the count, so
// only a loose upper bound is checked).
func TestLabelsAndSlowCount(t *testing.T) {
	srv := startLoadtest(t, loadtest.Options{StallEvery: 4, StallFor: 60 * time.Millisecond})
	rep := runUntil(t, Config{
		Target: client.Options{URL: srv.URL()}, Sessions: 1, Slow: 40 * time.Millisecond,
		Mix: []OpSpec{{Tool: "x", Weight: 3}, {Tool: "x", Args: `{"n":1}`, Label: "other"}},
	}, 40)
	calls := rep.ByMethod["tools/call"]
	x, other := rep.ByTool["x"], rep.ByTool["other"]
	if x == nil || other == nil || len(rep.ByTool) != 2 {
		t.Fatalf("by_tool %v, want x and other", slices.Sorted(maps.Keys(rep.ByTool)))
	}
	if x.Requests+other.Requests != calls.Requests || x.Requests == 0 || other.Requests == 0 {
		t.Errorf("x %d + other %d calls, tools/call %d", x.Requests, other.Requests, calls.Requests)
	}
	if rep.Slow == nil || calls.Slow == nil || x.Slow == nil || other.Slow == nil {
		t.Fatalf("a slow count is missing: overall %v, tools/call %v, x %v, other %v", rep.Slow, calls.Slow, x.Slow, other.Slow)
	}
	if n := rep.Slow.Count; n < rep.Requests/4 || n > rep.Requests/2 || x.Slow.Count+other.Slow.Count != n || calls.Slow.Count != n {
		t.Errorf("slow %d of %d (x %d, other %d, tools/call %d), want a quarter", n, rep.Requests,
			x.Slow.Count, other.Slow.Count, calls.Slow.Count)
	}
	if rep.Slow.ThresholdUS != 40000 || rep.Slow.Pct != round3(100*float64(rep.Slow.Count)/float64(rep.Latency.Count)) {
		t.Errorf("slow %+v of %d", *rep.Slow, rep.Latency.Count)
	}
	// The JSON document carries both, and reads back the same.
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back report.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(rep, &back, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("JSON round trip (-run +read):\n%s", diff)
	}
	var text bytes.Buffer
	if err := rep.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slow (corrected latency 40.00ms or more): ", "≥40.00ms", "other"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in the table:\n%s", want, text.String())
		}
	}
}
