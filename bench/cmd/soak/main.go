// Command soak runs an mcprouter deployment on loopback at a steady share of its
// measured capacity for a long time and checks that nothing drifts (issue 16):
//
//	go run ./bench/cmd/soak -duration 30m [-share 0.7] [-out bench/RESULTS.md]
//
// The load mixes calls (open loop, sessions holding GET streams), session churn
// (connect, call, close) and fan-out (sessions subscribed to a resource that changes
// every 100 ms), over router instances that share a NATS node, in front of a backend
// over HTTP and one over stdio. A warm-up at full load comes first (not measured):
// memory rises until every bounded buffer is full, the resumption rings of the
// subscribers' streams the last (1024 events each, at one per tick: ~100s), and
// growth measured before would be that filling, not a leak. It then compares the first
// and the last sixth of the measured run (5 of 30 minutes) for throughput and p99,
// samples every process's resident memory, descriptors and (routers) goroutines, and
// checks their growth over the last two thirds (20 of 30 minutes). Any error fails the
// run. It prints a table and exits non-zero when a check fails.
package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

type options struct {
	duration, warmup, timeout, sample, capDuration time.Duration
	share                                          float64
	sessions, subscribers, routers                 int
	churnRate                                      float64
	place                                          cluster.Place
	dir                                            string // the working directory, once Main made it
}

func main() {
	cluster.ServeNATSNode()
	os.Exit(run())
}

var logf = cluster.Logf

func run() int {
	var o options
	flag.DurationVar(&o.duration, "duration", 30*time.Minute, "length of the soak (measured)")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Minute, "full load before the measured soak, until every bounded buffer is full (the subscribers' resumption rings: 1024 events at one per 100ms tick)")
	flag.Float64Var(&o.share, "share", 0.7, "share of the measured capacity offered as calls")
	flag.IntVar(&o.sessions, "sessions", 32, "call sessions, each holding a GET stream")
	flag.IntVar(&o.subscribers, "subscribers", 32, "sessions subscribed to counter://tick (fan-out)")
	flag.Float64Var(&o.churnRate, "churn-rate", 10, "session lifecycles (connect, call, close) per second")
	flag.IntVar(&o.routers, "routers", 2, "router instances")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-call timeout")
	flag.DurationVar(&o.sample, "sample", 5*time.Second, "how often the processes are measured")
	flag.DurationVar(&o.capDuration, "capacity-duration", 5*time.Second, "length of the capacity measurement")
	o.place.Flags("soak")
	flag.Parse()
	return cluster.Main("soak", o.place, logf, func(ctx context.Context, dir string) (cluster.Report, error) {
		o.dir = dir
		v, err := soak(ctx, &o)
		if err != nil {
			return cluster.Report{}, err
		}
		return v.report(&o), nil
	})
}

// soak sets the deployment up, measures its capacity, runs the mixed load and gathers
// the figures.
func soak(ctx context.Context, o *options) (*verdict, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c, err := cluster.Start(ctx, exe, cluster.Options{Dir: o.dir, Routers: o.routers, NATSNodes: 1, WebReplicas: 1, CLIReplicas: 1, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tools, err := c.FindTools(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
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
	calls, churn := make(chan result, 1), make(chan result, 1)
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
	cr, ch := <-calls, <-churn
	v.samples = sampler.Stop()
	if err := cluster.WriteSamples(filepath.Join(o.dir, "samples.tsv"), v.samples); err != nil {
		logf("samples: %v", err)
	}
	v.deliveries, v.subscribers = w.Deliveries(), w.Len()
	if cr.err != nil {
		return nil, cr.err
	}
	if ch.err != nil {
		return nil, ch.err
	}
	v.calls, v.churn = cr.rep, ch.rep
	return v, nil
}
