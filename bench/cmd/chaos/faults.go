package main

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
)

// fault is one fault played on the cluster: it returns what it did and when the
// cluster was whole again (the fault cleared), or an error when the cluster could not
// be made whole (a process that did not come back).
type fault struct {
	name string
	play func(c *cluster.Cluster, rng *rand.Rand, o *options) (what string, cleared time.Time, err error)
	// router says the fault kills a router instance (its sessions must move).
	router bool
	// hits names the backend whose calls the fault may fail ("web", "cli"): the calls in
	// flight on the broken replica, which no router can answer but with an error.
	hits string
}

// down is how long a killed process stays down before it is restarted.
const down = time.Second

var faults = []fault{
	{name: "kill web replica", hits: "web", play: func(c *cluster.Cluster, rng *rand.Rand, _ *options) (string, time.Time, error) {
		w := pick(rng, c.Web)
		return killRestart(w.Name, w.Proc, w.Start)
	}},
	{name: "kill cli replica", hits: "cli", play: func(c *cluster.Cluster, rng *rand.Rand, _ *options) (string, time.Time, error) {
		r := pick(rng, c.Routers)
		kids := r.StdioChildren()
		if len(kids) == 0 {
			return "no stdio child of " + r.Name, time.Now(), nil
		}
		pid := pick(rng, kids)
		// A child of a router this command started; the router restarts it.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Sprintf("SIGKILL stdio backend %d of %s", pid, r.Name), time.Now(), nil
	}},
	{name: "kill router", router: true, play: func(c *cluster.Cluster, rng *rand.Rand, _ *options) (string, time.Time, error) {
		r := pick(rng, c.Routers)
		return killRestart(r.Name, r.Proc, r.Start)
	}},
	{name: "kill NATS node", play: func(c *cluster.Cluster, rng *rand.Rand, _ *options) (string, time.Time, error) {
		n := pick(rng, c.NATS)
		return killRestart(n.Name, n.Proc, n.Start)
	}},
	{name: "pause web replica", hits: "web", play: func(c *cluster.Cluster, rng *rand.Rand, o *options) (string, time.Time, error) {
		w := pick(rng, c.Web)
		pause := o.backendTimeout + time.Second
		w.Proc.Signal(syscall.SIGSTOP)
		time.Sleep(pause)
		w.Proc.Signal(syscall.SIGCONT)
		return fmt.Sprintf("SIGSTOP %s for %v, SIGCONT", w.Name, pause), time.Now(), nil
	}},
	{name: "drop web connections", hits: "web", play: func(c *cluster.Cluster, rng *rand.Rand, _ *options) (string, time.Time, error) {
		w := pick(rng, c.Web)
		n := w.Proxy.Drop()
		return fmt.Sprintf("dropped %d connections of %s", n, w.Name), time.Now(), nil
	}},
}

// pick is one element of s at random.
func pick[T any](rng *rand.Rand, s []T) T { return s[rng.IntN(len(s))] }

// killRestart is the shape of every kill of a process this command started: SIGKILL,
// down for a while, started again; the fault clears when it is back.
func killRestart(name string, p *cluster.Proc, start func() error) (string, time.Time, error) {
	p.Kill()
	time.Sleep(down)
	err := start()
	return "SIGKILL " + name + ", restarted", time.Now(), err
}

// played is one fault as it happened.
type played struct {
	at, cleared time.Time
	kind        string
	hits        string // the backend whose in-flight calls it may fail (fault.hits)
	what        string
	// lag is how long after the fault cleared the last subscriber heard of a change;
	// late counts the subscribers that had not within the bound.
	lag  time.Duration
	late int
	err  error
}
