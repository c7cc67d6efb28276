// Command chaos runs a whole mcprouter deployment on loopback under load and breaks it
// at random for a while, then checks what must hold and prints it as a table; it exits
// non-zero when anything in the table fails (issue 16):
//
//	go run ./bench/cmd/chaos -duration 5m [-every 5s] [-share 0.5] [-out bench/RESULTS.md]
//
// The deployment: three router instances on a three-node NATS cluster (embedded servers
// joined by routes, each a process of its own), a backend "web" over HTTP with two
// replicas (each behind a proxy that can drop its connections) and a backend "cli" over
// stdio with two replicas per router. mcpload's library drives echo calls to both
// backends across all three instances (sessions move to another instance when theirs
// dies) at a share of the capacity measured first, while subscriber sessions watch a
// resource that changes every 100 ms. Every few seconds one fault: SIGKILL a backend
// replica, a router instance or a NATS node (then restart it), SIGSTOP a web replica
// for longer than the routers' backend timeout, or drop a web replica's connections.
// Every process is this command's child and is signalled by its PID only.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

type options struct {
	duration, every, timeout, backendTimeout, capDuration time.Duration
	share                                                 float64
	sessions, subscribers, capSessions                    int
	seed                                                  uint64
	place                                                 cluster.Place
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the load and the faults last")
	flag.DurationVar(&o.every, "every", 5*time.Second, "mean time between faults (each waits 0.5 to 1.5 times this)")
	flag.Float64Var(&o.share, "share", 0.5, "share of the measured capacity to offer during the run")
	flag.IntVar(&o.sessions, "sessions", 48, "load sessions (spread over the instances)")
	flag.IntVar(&o.subscribers, "subscribers", 6, "subscribed sessions watching counter://tick")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-call timeout of the load sessions")
	flag.DurationVar(&o.backendTimeout, "backend-timeout", 2*time.Second, "the routers' per-request backend timeout (a paused replica stays paused 1s longer)")
	flag.IntVar(&o.capSessions, "capacity-sessions", 32, "closed-loop sessions of the capacity measurement")
	flag.DurationVar(&o.capDuration, "capacity-duration", 5*time.Second, "length of the capacity measurement")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "random seed of the faults")
	cluster.Command("chaos", &o.place, o.run, func(v *verdict) cluster.Report { return v.report(&o) })
}

var logf = cluster.Logf

// run sets the cluster up in dir, runs the load and the faults, and gathers the figures.
func (o *options) run(ctx context.Context, dir string) (*verdict, error) {
	c, tools, err := cluster.Start(ctx, cluster.Options{Dir: dir, BackendTimeout: o.backendTimeout, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	capacity, err := c.Capacity(ctx, tools.Mix(), o.capSessions, o.capDuration)
	if err != nil {
		return nil, err
	}
	v := &verdict{capacity: capacity, rate: o.share * capacity, timeout: o.timeout, tools: tools, sessions: o.sessions}
	logf("capacity %.0f calls/s over %d instances; offering %.0f/s", capacity, len(c.Routers), v.rate)

	refs := c.Processes()
	v.before = cluster.Snapshot(refs)
	w, err := cluster.Watch(c.URLs(), o.subscribers, "counter://tick", 10*time.Second)
	if err != nil {
		return nil, err
	}
	if _, late, err := w.Await(time.Now(), 5*time.Second); err != nil {
		w.Close()
		return nil, fmt.Errorf("subscribers: %d of %d heard no update before any fault", late, w.Len())
	}

	repCh := make(chan *report.Report, 1)
	errCh := make(chan error, 1)
	go func() {
		rep, err := loadgen.Run(ctx, loadgen.Config{Target: c.Target(), Sessions: o.sessions, Rate: v.rate,
			Duration: o.duration, Timeout: o.timeout, Mix: tools.Mix(), Seed: o.seed}, nil)
		repCh <- rep
		errCh <- err
	}()
	rng := rand.New(rand.NewPCG(o.seed, 16))
	start := time.Now()
	for ctx.Err() == nil {
		wait := time.Duration(float64(o.every) * (0.5 + rng.Float64()))
		if time.Since(start)+wait+o.every > o.duration {
			break // the last fault clears before the load ends
		}
		time.Sleep(wait)
		f := faults[rng.IntN(len(faults))]
		p := played{at: time.Now(), kind: f.name, hits: f.hits}
		p.what, p.cleared, p.err = f.play(c, rng, o)
		p.lag, p.late, _ = w.Await(p.cleared, 2*time.Second)
		v.faults = append(v.faults, p)
		v.routerKills += btoi(f.router)
		logf("%-20s %s; subscribers heard of a change %v after (%d late)%s", f.name, p.what, p.lag.Round(time.Millisecond), p.late, errText(p.err))
	}
	v.rep, err = <-repCh, <-errCh
	v.watchMoves, v.deliveries = w.Moves(), w.Deliveries()
	w.Close()
	if err != nil {
		return nil, err
	}
	now := c.Processes()
	v.restarted = map[string]bool{}
	for name, r := range now {
		v.restarted[name] = refs[name].PID != r.PID
	}
	v.after = settle(now, v.before)
	return v, nil
}

// settle waits (at most a minute) for every process to come back to the level its
// namesake had before the run (a restarted one included: it runs the same part of the
// cluster), and returns their last readings.
func settle(refs map[string]cluster.ProcRef, before map[string]cluster.Usage) map[string]cluster.Usage {
	var after map[string]cluster.Usage
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(2 * time.Second) {
		after = cluster.Snapshot(refs)
		ok := true
		for name, a := range after {
			if b, had := before[name]; had && !usageBack(b, a) {
				ok = false
			}
		}
		if ok || time.Now().After(deadline) {
			return after
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "; ERROR " + err.Error()
}
