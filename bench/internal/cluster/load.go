package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/loadgen"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// Tools are the names under which the routers expose the two backends' echo tools.
type Tools struct{ Web, CLI string }

// FindTools waits, up to within, for the first router to list both echo tools: the
// routers' catalogs fill as the backends answer, so a fresh cluster may list none yet.
func (c *Cluster) FindTools(ctx context.Context, within time.Duration) (Tools, error) {
	deadline := time.Now().Add(within)
	for {
		t, err := c.findTools(10 * time.Second)
		if err == nil || time.Now().After(deadline) {
			return t, err
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// findTools lists the tools through the first router once and picks the two echoes
// (the names carry each backend's prefix).
func (c *Cluster) findTools(timeout time.Duration) (Tools, error) {
	tools, err := loadgen.ListTools(client.Options{URL: c.Routers[0].URL()}, timeout)
	if err != nil {
		return Tools{}, err
	}
	var t Tools
	for _, tl := range tools {
		switch {
		case strings.HasPrefix(tl.Name, "web") && strings.HasSuffix(tl.Name, "echo"):
			t.Web = tl.Name
		case strings.HasPrefix(tl.Name, "cli") && strings.HasSuffix(tl.Name, "echo"):
			t.CLI = tl.Name
		}
	}
	if t.Web == "" || t.CLI == "" {
		return t, fmt.Errorf("the routers list no web and cli echo tools (%d tools)", len(tools))
	}
	return t, nil
}

// Mix is an even call mix over both backends.
func (t Tools) Mix() []loadgen.OpSpec {
	return []loadgen.OpSpec{{Tool: t.Web, Args: `{"text":"{{seq}}"}`}, {Tool: t.CLI, Args: `{"text":"{{seq}}"}`}}
}

// Target reaches every router instance (sessions spread over them).
func (c *Cluster) Target() client.Options {
	urls := c.URLs()
	return client.Options{URL: urls[0], URLs: urls[1:]}
}

// Capacity measures the throughput of the whole cluster in closed loop with sessions
// sessions over d (after a 1s warm-up).
func (c *Cluster) Capacity(ctx context.Context, mix []loadgen.OpSpec, sessions int, d time.Duration) (float64, error) {
	rep, err := loadgen.Run(ctx, loadgen.Config{Target: c.Target(), Sessions: sessions, Warmup: time.Second, Duration: d,
		Timeout: 10 * time.Second, Mix: mix}, nil)
	if err != nil {
		return 0, err
	}
	if rep.Errors > 0 {
		return 0, fmt.Errorf("capacity run: %d of %d calls failed: %v %v", rep.Errors, rep.Requests, rep.ErrorsByClass, rep.FirstErrors)
	}
	return rep.ThroughputRPS, nil
}

// Processes are every process of the cluster that runs now, by name, with the URL of
// its metrics where it has one.
func (c *Cluster) Processes() map[string]ProcRef {
	out := map[string]ProcRef{}
	for _, r := range c.Routers {
		if r.Proc != nil && !r.Proc.Exited() {
			out[r.Name] = ProcRef{PID: r.Proc.PID(), Metrics: r.MetricsURL()}
		}
	}
	for _, w := range c.Web {
		if w.Proc != nil && !w.Proc.Exited() {
			out[w.Name] = ProcRef{PID: w.Proc.PID()}
		}
	}
	for _, n := range c.NATS {
		if n.Proc != nil && !n.Proc.Exited() {
			out[n.Name] = ProcRef{PID: n.Proc.PID()}
		}
	}
	return out
}

// ProcRef names a process to measure.
type ProcRef struct {
	PID     int
	Metrics string
}

// Snapshot reads the usage of every process in refs (those that can be read).
func Snapshot(refs map[string]ProcRef) map[string]Usage {
	out := map[string]Usage{}
	for name, r := range refs {
		if u, err := ReadUsage(r.PID, r.Metrics); err == nil {
			out[name] = u
		}
	}
	return out
}
