// Command soak runs an mcprouter deployment on loopback at a steady share of its
// measured capacity for a long time and checks that nothing drifts (issue 16):
//
//	go run ./bench/cmd/soak -duration 30m [-share 0.7] [-out bench/RESULTS.md]
//	go run ./bench/cmd/soak -duration 2m -warmup 40s -tick 25ms -share 0.3   (the test command's)
//
// The load mixes calls (open loop, sessions holding GET streams), session churn
// (connect, call, close) and fan-out (sessions subscribed to a resource that changes
// every tick), over router instances that share a NATS node, in front of a backend
// over HTTP and one over stdio. A warm-up at full load comes first (not measured):
// memory rises until every bounded buffer is full, the resumption rings of the
// subscribers' streams the last (1024 events each, at one per tick: ~100s at the
// default 100ms, ~26s at 25ms), and growth measured before would be that filling, not
// a leak.
//
// It then compares the first and the last window of the measured run (a sixth of it:
// 5 of 30 minutes; at least 30s, so a 2-minute run compares its first and last
// quarter). On a 2-core machine shared with other work every figure of every process
// rises and falls with the neighbours (a 2-minute run measured p99 13.5ms -> 29ms with
// nothing drifting, another the routers' CPU per call 119µs -> 75µs as the machine
// filled up), so each is judged beside a reference measured at the same moment, which
// the neighbours move as much and a drifting router does not:
//
//   - throughput: the calls served per second against the first window's (an
//     open-loop load that the routers stop keeping up with is served late), less 5%.
//   - router CPU per call: the CPU time of the router processes (from /proc, their
//     stdio children included) over the window divided by the calls served in it,
//     against the HTTP backend's CPU per call over the same window. A leak that makes
//     each call dearer (a list that grows, a map that is scanned, a heap the collector
//     walks again and again) raises the routers' cost and not the backend's; a busy
//     machine (more messages handled per wakeup) lowers both. The ratio of the two
//     may rise by 25%.
//   - p99: the median of the per-second p99 latencies of each window (one bad second
//     weighs as one second), beside the same figure for a light load (-probe-rate)
//     calling the HTTP backend directly, without a router, from the same process at
//     the same time: the routers' p99 may rise by what the direct calls' rose, and 50%
//     more.
//   - When the neighbours take the CPU the routers need, the open-loop calls queue
//     without bound while the direct calls, a few a second, do not: the throughput
//     falls behind the offered rate and p99 soars. A fall or a rise while the
//     routers' threads waited, runnable, for a CPU (schedstat) at least twice as long
//     as in the first window, with each call costing them no more, is the machine's:
//     those two checks pass, and their rows show the wait.
//
// It samples every process's resident memory, descriptors, CPU and (routers)
// goroutines, and checks their growth over the last two thirds (20 of 30 minutes):
// the mean resident memory, and the floor of the descriptors, goroutines and Go heap
// (calls in flight raise their peaks, a leak their floor), of its first and last
// tenths. Where a process reports its heap (the routers), the heap is held to 2% and
// resident memory, which follows the heap's peaks, to 10% (memoryFlat).
// Any error fails the run. It prints a table and exits non-zero when a check fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

type options struct {
	duration, warmup, timeout, sample, capDuration, tick time.Duration
	share, probeRate                                     float64
	sessions, subscribers, routers                       int
	churnRate                                            float64
	place                                                cluster.Place
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 30*time.Minute, "length of the soak (measured)")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Minute, "full load before the measured soak, until every bounded buffer is full (the subscribers' resumption rings: 1024 events at one per 100ms tick)")
	flag.Float64Var(&o.share, "share", 0.7, "share of the measured capacity offered as calls")
	flag.IntVar(&o.sessions, "sessions", 32, "call sessions, each holding a GET stream")
	flag.IntVar(&o.subscribers, "subscribers", 32, "sessions subscribed to counter://tick (fan-out)")
	flag.Float64Var(&o.churnRate, "churn-rate", 10, "session lifecycles (connect, call, close) per second")
	flag.IntVar(&o.routers, "routers", 2, "router instances")
	flag.DurationVar(&o.tick, "tick", 100*time.Millisecond, "how often counter://tick changes (a shorter tick fills the subscribers' resumption rings sooner: a shorter warm-up)")
	flag.Float64Var(&o.probeRate, "probe-rate", 50, "calls per second straight to the HTTP backend, the latency reference")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-call timeout")
	flag.DurationVar(&o.sample, "sample", 0, "how often the processes are measured (default: 1/120 of the run, within 1s and 5s)")
	flag.DurationVar(&o.capDuration, "capacity-duration", 5*time.Second, "length of the capacity measurement")
	cluster.Command("soak", &o.place, o.run, func(v *verdict) cluster.Report { return v.report(&o) })
}

var logf = cluster.Logf

// run sets the deployment up in dir, measures its capacity, runs the mixed load and
// gathers the figures.
func (o *options) run(ctx context.Context, dir string) (*verdict, error) {
	if o.sample <= 0 {
		o.sample = min(max(o.duration/120, time.Second), 5*time.Second)
	}
	c, tools, err := cluster.Start(ctx, cluster.Options{Dir: dir, Routers: o.routers, NATSNodes: 1, WebReplicas: 1, CLIReplicas: 1, Tick: o.tick, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// The churn and the fan-out run while the capacity for calls is measured, so that
	// the share offered is a share of what is left for calls.
	w, err := cluster.Watch(c.URLs(), o.subscribers, "counter://tick", 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	type result struct {
		rep *report.Report
		err error
	}
	calls, churn, probe := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	target := c.Target()
	capPhase := o.capDuration + 3*time.Second
	go func() {
		rep, err := loadgen.Run(ctx, loadgen.Config{Target: target, Mode: loadgen.Churn, Sessions: 8, Rate: o.churnRate,
			Warmup: capPhase + o.warmup, Duration: o.duration, Timeout: o.timeout, Mix: tools.Mix(), Seed: 2}, nil)
		churn <- result{rep, err}
	}()
	capacity, err := c.Capacity(ctx, tools.Mix(), 32, o.capDuration)
	if err != nil {
		return nil, err
	}
	v := &verdict{capacity: capacity, rate: o.share * capacity, duration: o.duration}
	for _, r := range c.Routers {
		v.routers = append(v.routers, r.Name)
	}
	v.backend = c.Web[0].Name
	logf("capacity %.0f calls/s (beside the churn and the fan-out); offering %.0f/s for %v after %v of warm-up", capacity, v.rate, o.duration, o.warmup)
	// Sampled from the start of the warm-up, so that samples.tsv shows the levels being
	// reached; the checks read the measured run only.
	sampler := cluster.StartSampler(c.Processes(), o.sample)
	v.start = time.Now().Add(o.warmup)
	go func() {
		t := target
		t.Stream = true
		rep, err := loadgen.Run(ctx, loadgen.Config{Target: t, Sessions: o.sessions, Rate: v.rate, Warmup: o.warmup, Duration: o.duration,
			Timeout: o.timeout, Mix: tools.Mix()}, nil)
		calls <- result{rep, err}
	}()
	// The reference: calls to the HTTP backend's own endpoint (not its proxy), the
	// same echo without a router, timed in the same windows.
	go func() {
		direct := client.Options{URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", c.Web[0].Port)}
		rep, err := loadgen.Run(ctx, loadgen.Config{Target: direct, Sessions: 2, Rate: o.probeRate, Warmup: o.warmup, Duration: o.duration,
			Timeout: o.timeout, Mix: []loadgen.OpSpec{{Tool: "echo", Args: `{"text":"{{seq}}"}`}}}, nil)
		probe <- result{rep, err}
	}()
	// Fan-out: every subscriber hears of a change at least every 2s, checked each
	// second for the whole run, warm-up included.
	for end := v.start.Add(o.duration); time.Now().Before(end) && ctx.Err() == nil; {
		since := time.Now()
		time.Sleep(time.Second)
		if _, late, err := w.Await(since, 2*time.Second); err != nil {
			v.stalls++
			logf("fan-out: %d of %d subscribers heard nothing for 2s", late, w.Len())
		}
	}
	cr, ch, pr := <-calls, <-churn, <-probe
	v.samples = sampler.Stop()
	if err := cluster.WriteSamples(filepath.Join(dir, "samples.tsv"), v.samples); err != nil {
		logf("samples: %v", err)
	}
	v.deliveries, v.subscribers = w.Deliveries(), w.Len()
	if cr.err != nil {
		return nil, cr.err
	}
	if ch.err != nil {
		return nil, ch.err
	}
	if pr.err != nil {
		return nil, fmt.Errorf("reference calls: %w", pr.err)
	}
	v.calls, v.churn, v.probe = cr.rep, ch.rep, pr.rep
	return v, nil
}
