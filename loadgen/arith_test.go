package loadgen

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// fakeDialer makes in-memory sessions whose tools/call takes service(n) for the n-th
// call (1-based, across sessions). Inside a synctest bubble the sleeps run on the
// bubble's fake clock, so a run is exactly reproducible.
type fakeDialer struct {
	service func(n int64) time.Duration
	calls   atomic.Int64
}

func (d *fakeDialer) Dial(int, time.Time) (client.Session, error) { return &fakeSession{d: d}, nil }
func (d *fakeDialer) Options() client.Options                     { return client.Options{Transport: "fake"} }
func (d *fakeDialer) Close()                                      {}

type fakeSession struct{ d *fakeDialer }

var fakeResult = []byte(`{"content":[{"type":"text","text":"ok"}]}`)

func (s *fakeSession) Call(r *client.Request, _ time.Time, rep *client.Reply) error {
	if r.Method == "tools/call" {
		time.Sleep(s.d.service(s.d.calls.Add(1)))
	}
	rep.Result = fakeResult
	return nil
}
func (s *fakeSession) Notify(string, []byte, time.Time) error { return nil }
func (s *fakeSession) Close(time.Time) error                  { return nil }
func (s *fakeSession) Info() client.Info                      { return client.Info{Protocol: "fake"} }

// runFake runs cfg against a fake dialer on a fake clock.
func runFake(t *testing.T, cfg Config, service func(n int64) time.Duration) (*report.Report, *fakeDialer) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d := &fakeDialer{service: service}
	var rep *report.Report
	synctest.Test(t, func(t *testing.T) {
		var err error
		rep, err = newRun(cfg).execute(context.Background(), d, nil, time.Sleep, nil)
		if err != nil {
			t.Fatal(err)
		}
	})
	return rep, d
}

// TestOpenLoopArithmetic is the exact form of TestOpenLoopCorrection: on a fake clock
// the generator adds no noise, so the corrected distribution must be the queue
// arithmetic's to the histogram's precision, and the uncorrected one must be the
// service times alone.
func TestOpenLoopArithmetic(t *testing.T) {
	const (
		rate              = 100.0
		warmupN, measureN = 100, 500
	)
	svc := func(n int64) time.Duration {
		if n%100 == 0 {
			return 50 * time.Millisecond
		}
		return time.Millisecond
	}
	rep, d := runFake(t, Config{Sessions: 1, Rate: rate, Warmup: warmupN * time.Second / rate,
		Duration: measureN * time.Second / rate, Mix: []OpSpec{{Tool: "echo"}}}, svc)
	if rep.Requests != measureN || rep.Excluded != warmupN || d.calls.Load() != warmupN+measureN {
		t.Fatalf("requests %d excluded %d calls %d", rep.Requests, rep.Excluded, d.calls.Load())
	}
	want := simulate(warmupN+measureN, warmupN, 1e3/rate, func(i int) float64 {
		return float64(svc(int64(i+1))) / 1e6
	})
	check := func(name string, gotUS, wantMS float64) {
		t.Helper()
		// 0.1% histogram resolution, plus the pacer's first sleeps, which aim a few
		// tens of microseconds early until it has learnt that this clock never
		// oversleeps.
		if got := gotUS / 1e3; math.Abs(got-wantMS) > 0.001*wantMS+0.06 {
			t.Errorf("corrected %s = %.3fms, arithmetic says %.3fms", name, got, wantMS)
		}
	}
	for _, p := range rep.Distribution {
		if p.Percentile > 0 && p.Percentile < 100 {
			check("p"+report.FormatUS(p.Percentile), p.Corrected, percentile(want, p.Percentile))
		}
	}
	check("mean", rep.Latency.Mean, mean(want))
	check("max", rep.Latency.Max, want[len(want)-1])
	// Uncorrected: 495 calls of 1ms and 5 stalls.
	u := rep.LatencyUncorrected
	if math.Abs(u.P99-1000) > 1 || math.Abs(u.P999-50000) > 50 || math.Abs(u.Mean-(495*1000+5*50000)/500.0) > 2 {
		t.Errorf("uncorrected %+v, want p99 1ms, p99.9 50ms, mean 1.49ms", u)
	}
	// Every call held up behind a stall started late, and nothing else did.
	held := 0
	for _, v := range want {
		if v > 1.0+1.0 { // later than the threshold (1ms) beyond its service time
			held++
		}
	}
	if g := rep.Generator; g.Sends != measureN || g.StarvedSends != g.LateSends || g.LateSends < int64(held-5) || g.LateSends > int64(held) {
		t.Errorf("generator sends %d late %d starved %d; %d calls were held up", g.Sends, g.LateSends, g.StarvedSends, held)
	}
}

// TestClosedLoopArithmetic: in closed loop each session's next call starts when the
// previous one ends, so over a fixed window the count is the window over the service
// time, per session, exactly.
func TestClosedLoopArithmetic(t *testing.T) {
	rep, d := runFake(t, Config{Sessions: 4, Warmup: 100 * time.Millisecond, Duration: time.Second,
		Mix: []OpSpec{{Tool: "echo"}}}, func(int64) time.Duration { return 2 * time.Millisecond })
	if rep.Requests != 4*500 || rep.Requests+rep.Excluded != d.calls.Load() {
		t.Errorf("requests %d excluded %d calls %d, want 2000 measured", rep.Requests, rep.Excluded, d.calls.Load())
	}
	if rep.Latency.P50 != rep.LatencyUncorrected.P50 || math.Abs(rep.Latency.Max-2000) > 2 {
		t.Errorf("latency %+v", rep.Latency)
	}
	if rep.ThroughputRPS != 2000 {
		t.Errorf("throughput %v, want 2000/s", rep.ThroughputRPS)
	}
	// Calls complete at the very instants of the ticks that open and close the second;
	// on the fake clock either may come first.
	if len(rep.Series) != 1 || rep.Series[0].Done < 2000-4 || rep.Series[0].Done > 2000+4 {
		t.Errorf("series %+v, want one second of 2000", rep.Series)
	}
}
