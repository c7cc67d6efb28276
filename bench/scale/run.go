package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/internal/each"
	"github.com/mcprouter/mcprouter/loadgen/client"
)

// Run starts the deployment, opens the sessions, causes one update and measures; it
// stops every process it started before it returns, also when ctx ends (Ctrl-C).
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.defaults(); err != nil {
		return nil, err
	}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "mcprouter-scale-")
		if err != nil {
			return nil, err
		}
		c.Dir = dir
		if !c.Keep {
			defer os.RemoveAll(dir)
		}
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	r := &run{c: c, ctx: ctx}
	rep, err := r.run()
	end := time.Now()
	r.close()
	if rep != nil {
		rep.Warnings = logWarnings(c.Dir, len(r.routers), end)
	}
	return rep, err
}

// run is one benchmark run and everything it started.
type run struct {
	c       Config
	ctx     context.Context
	bins    map[string]string
	backend *cluster.Proc
	routers []*cluster.Router
	loaders []*loader
	calls   *caller
}

func (r *run) interrupted() error {
	if r.ctx.Err() != nil {
		return errStopped
	}
	return nil
}

func (r *run) run() (*Report, error) {
	c := &r.c
	var err error
	if r.bins, err = build(r.ctx, c.Dir, c.Bins, c.Logf); err != nil {
		return nil, err
	}
	waitTimeWait(r.ctx, c.Sessions, c.Logf)
	if err := r.startServers(); err != nil {
		return nil, err
	}
	rep := &Report{Sessions: c.Sessions, Protocol: c.Protocol, Persist: c.Persist, SessionStorage: c.SessionStorage}
	urls := cluster.URLsOf(r.routers)
	// The routers are empty and warm once each has answered a call: its catalog is in.
	if r.calls, err = startCaller(urls, max(c.Callers, len(urls)), c.Protocol, c.CallPause); err != nil {
		return nil, fmt.Errorf("scale: the callers: %w", err)
	}
	if err := r.warm(); err != nil {
		return nil, err
	}
	r.calls.next() // the warm-up is not measured
	for _, rt := range r.routers {
		u, err := cluster.ReadUsage(rt.Proc.PID(), "")
		if err != nil {
			return nil, err
		}
		rep.Routers = append(rep.Routers, ProcStats{Name: rt.Name, RSSBefore: u.RSS})
	}

	c.Logf("opening %d sessions (%s) over %d routers from %d loaders", c.Sessions, c.Protocol, len(r.routers), c.Loaders)
	before, err := r.cpu() // the routers' only: no loader runs yet
	if err != nil {
		return nil, err
	}
	sysBefore, err := r.syscalls()
	if err != nil {
		return nil, err
	}
	var profiled func()
	if c.Profiles {
		// The opening lasts about a second per 2,500 sessions on 2 cores.
		d := min(max(time.Duration(c.Sessions/2500)*time.Second, 3*time.Second), 30*time.Second)
		profiled = startCPUProfiles(r.routers, d, c.Dir, c.Logf)
	}
	if err := r.openSessions(rep); err != nil {
		return nil, err
	}
	after, err := r.cpu()
	if err != nil {
		return nil, err
	}
	sysAfter, err := r.syscalls()
	if err != nil {
		return nil, err
	}
	for i := range rep.Routers {
		rep.Routers[i].OpenCPU = after[i] - before[i]
		rep.Routers[i].OpenSyscalls = sysAfter[i].minus(sysBefore[i])
	}
	for i := range rep.Loaders {
		rep.Loaders[i].OpenCPU = after[len(r.routers)+i] // from the loader's start
		rep.Loaders[i].OpenSyscalls = sysAfter[len(r.routers)+i]
	}
	rep.CallsSetup = r.calls.next()
	if err := r.interrupted(); err != nil {
		return nil, err
	}
	if !ctxtime.Sleep(r.ctx, c.Settle) { // let the routers' heaps and the kernel's buffers settle
		return nil, errStopped
	}
	r.calls.next() // the settling is not measured
	for i, rt := range r.routers {
		u, err := cluster.ReadUsage(rt.Proc.PID(), "")
		if err != nil {
			return nil, err
		}
		st := &rep.Routers[i]
		st.RSSAfter, st.FDs = u.RSS, u.FDs
		if v, err := cluster.Metric(rt.MetricsURL(), "mcprouter_sse_open_streams"); err == nil {
			st.Sessions = int(v)
		}
	}
	if profiled != nil {
		profiled()
	}
	if c.Profiles {
		for _, rt := range r.routers {
			if err := saveHeapProfile(rt, filepath.Join(c.Dir, rt.Name+".heap.pprof")); err != nil {
				c.Logf("%v", err)
			}
		}
	}
	for i, l := range r.loaders {
		u, err := cluster.ReadUsage(l.pid(), "")
		if err != nil {
			return nil, err
		}
		rep.Loaders[i].RSSAfter, rep.Loaders[i].FDs = u.RSS, u.FDs
	}

	c.Logf("%d update(s) of memo://board to %d sessions", c.Updates, rep.Held)
	if err := r.update(rep); err != nil {
		return nil, err
	}
	rep.CallsUpdate = r.calls.next()
	rep.FirstCallError = r.calls.firstError()
	return rep, nil
}

// startServers starts the backend and the routers.
func (r *run) startServers() error {
	c := &r.c
	ports, err := cluster.FreePorts(2 + 2*c.Routers)
	if err != nil {
		return err
	}
	backendAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	// On 2026-07-28 the backend speaks that revision only: the routers then serve its
	// clients statelessly (stateless: auto), with nothing to translate.
	eras := "both"
	if c.Protocol == client.Version20260728 {
		eras = "modern"
	}
	if r.backend, err = cluster.StartProc("backend", filepath.Join(c.Dir, "backend.log"), "mcpbackend listening", time.Minute,
		r.bins["mcpbackend"], "--listen", backendAddr, "--name", "ref", "--tick", "0", "--eras", eras); err != nil {
		return err
	}
	natsPort, password := ports[1], fmt.Sprintf("%x", time.Now().UnixNano())
	// The first router runs the NATS server the others join: it starts alone.
	for i := range c.Routers {
		rt := cluster.NewRouter(i, ports[2+2*i], ports[3+2*i], r.bins["mcprouter"], c.Dir)
		if err := writeFile(rt.ConfigPath(), routerConfig(c, i, rt, "http://"+backendAddr+"/mcp", natsPort, password)); err != nil {
			return err
		}
		if i == 0 {
			if err := rt.Start(); err != nil {
				return err
			}
		}
		r.routers = append(r.routers, rt)
	}
	rest := r.routers[1:]
	if err := parallel(len(rest), func(i int) error { return rest[i].Start() }); err != nil {
		return err
	}
	c.Logf("backend, %d routers on one NATS (the first one's)", len(r.routers))
	return nil
}

// warm waits until the callers' calls succeed on every router (each has the backend's
// catalog), for at most a minute.
func (r *run) warm() error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if err := r.interrupted(); err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
		st := r.calls.next()
		if st.Calls >= int64(2*len(r.routers)) && st.Errors == 0 {
			return nil
		}
	}
	return fmt.Errorf("scale: the routers did not answer calls within a minute: %s", r.calls.firstError())
}

// openSessions starts the loaders (loader l's sessions begin on router l mod R, so
// that the sessions spread evenly) and waits until each holds its sessions.
func (r *run) openSessions(rep *Report) error {
	c := &r.c
	urls := cluster.URLsOf(r.routers)
	for l := range c.Loaders {
		n := c.Sessions / c.Loaders
		if l < c.Sessions%c.Loaders {
			n++
		}
		rot := append(append([]string(nil), urls[l%len(urls):]...), urls[:l%len(urls)]...)
		ld, err := startLoader(fmt.Sprintf("loader%d", l), r.bins["mcpload"], filepath.Join(c.Dir, fmt.Sprintf("loader%d.log", l)), n, rot, c)
		if err != nil {
			return err
		}
		r.loaders = append(r.loaders, ld)
	}
	// A loader is given up on after a minute without a session more.
	wait := time.Minute
	stopLog := make(chan struct{})
	defer close(stopLog)
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopLog:
				return
			case <-t.C:
				n := 0
				for _, l := range r.loaders {
					n += int(l.held.Load())
				}
				c.Logf("%d sessions held", n)
			}
		}
	}()
	if err := parallel(len(r.loaders), func(i int) error {
		l := r.loaders[i]
		return l.expect("ready", &l.opened, wait)
	}); err != nil {
		return err
	}
	var start, end int64
	for _, l := range r.loaders {
		o := l.opened
		rep.Held += o.Held
		rep.Failed += o.Failed
		if start == 0 || o.Start < start {
			start = o.Start
		}
		end = max(end, o.End)
		if o.FirstError != "" && rep.FirstOpenError == "" {
			rep.FirstOpenError = o.FirstError
		}
		rep.Loaders = append(rep.Loaders, ProcStats{Name: l.name, Sessions: o.Held, Failed: o.Failed,
			OpenTime: time.Duration(o.End - o.Start)})
	}
	rep.OpenTime = time.Duration(end - start)
	c.Logf("%d sessions held (%d failed) in %v", rep.Held, rep.Failed, rep.OpenTime.Round(time.Millisecond))
	if rep.Held == 0 {
		return fmt.Errorf("scale: no session opened: %s", rep.FirstOpenError)
	}
	return nil
}

// update causes c.Updates updates, a second apart: each time it arms the loaders,
// calls the touch tool once (the trigger) and collects every session's receipt. The
// routers' and loaders' CPU time is read around them all.
func (r *run) update(rep *Report) error {
	c := &r.c
	d, err := client.NewDialer(client.Options{URL: r.routers[0].URL(), Protocol: c.Protocol})
	if err != nil {
		return err
	}
	defer d.Close()
	s, err := d.Dial(1<<30, time.Now().Add(30*time.Second))
	if err != nil {
		return fmt.Errorf("scale: the trigger session: %w", err)
	}
	defer s.Close(time.Now().Add(5 * time.Second))
	before, err := r.cpu()
	if err != nil {
		return err
	}
	all := hdr.New(1, int64(10*time.Minute), 3)
	for u := range c.Updates {
		if u > 0 && !ctxtime.Sleep(r.ctx, time.Second) {
			return errStopped
		}
		rounds, err := r.round(s)
		if err != nil {
			return err
		}
		one := hdr.New(1, int64(10*time.Minute), 3)
		st := UpdateStats{}
		for i, rd := range rounds {
			st.Received += rd.Received
			st.Missing += rd.Missing
			rep.Duplicates += rd.Duplicates
			if rd.Latency != nil {
				one.Merge(hdr.Import(rd.Latency))
			}
			rep.Loaders[i].Received += rd.Received
		}
		all.Merge(one)
		st.P50, st.P99, st.Max = quantiles(one)
		rep.Updates = append(rep.Updates, st)
		rep.Received += st.Received
		rep.Missing += st.Missing
	}
	after, err := r.cpu()
	if err != nil {
		return err
	}
	for i := range r.loaders {
		rep.Loaders[i].CPU = after[len(r.routers)+i] - before[len(r.routers)+i]
	}
	for i := range r.routers {
		rep.Routers[i].CPU = after[i] - before[i]
	}
	rep.P50, rep.P99, rep.Max = quantiles(all)
	return nil
}

// round is one update: the loaders armed, the trigger call on s, every loader's
// receipts.
func (r *run) round(s client.Session) ([]client.HoldRound, error) {
	c := &r.c
	for _, l := range r.loaders {
		if err := l.send("arm"); err != nil {
			return nil, err
		}
		if err := l.expect("ok", nil, 30*time.Second); err != nil {
			return nil, err
		}
	}
	trigger := time.Now()
	var out client.Reply
	if err := s.Call(&client.Request{Method: "tools/call", Name: []byte("touch"),
		Params: []byte(`{"name":"touch","arguments":{"uri":"memo://board"}}`)}, trigger.Add(30*time.Second), &out); err != nil {
		return nil, fmt.Errorf("scale: the trigger call: %w", err)
	}
	for _, l := range r.loaders {
		if err := l.send("collect %d %s", trigger.UnixNano(), c.Wait); err != nil {
			return nil, err
		}
	}
	rounds := make([]client.HoldRound, len(r.loaders))
	err := parallel(len(r.loaders), func(i int) error {
		return r.loaders[i].expect("ok", &rounds[i], c.Wait+30*time.Second)
	})
	return rounds, err
}

// parallel runs f(0) to f(n-1) at once and returns their errors joined, once all
// have returned.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// quantiles are h's p50, p99 and maximum (zero when it is empty).
func quantiles(h *hdr.Histogram) (p50, p99, most time.Duration) {
	if h.TotalCount() == 0 {
		return 0, 0, 0
	}
	return time.Duration(h.ValueAtQuantile(50)), time.Duration(h.ValueAtQuantile(99)), time.Duration(h.Max())
}

// cpu reads the CPU time of the routers, then the loaders; the first error ends it.
func (r *run) cpu() ([]time.Duration, error) {
	return each.Map(r.pids(), func(pid int) (time.Duration, error) {
		u, err := cluster.ReadUsage(pid, "")
		return u.CPU, err
	})
}

// syscalls reads every process's system calls so far (readSyscalls), as cpu does.
func (r *run) syscalls() ([]sysc, error) { return each.Map(r.pids(), readSyscalls) }

func (r *run) pids() []int {
	var out []int
	for _, rt := range r.routers {
		out = append(out, rt.Proc.PID())
	}
	for _, l := range r.loaders {
		out = append(out, l.pid())
	}
	return out
}

// close stops everything: the callers, the loaders (their exit closes the sessions'
// connections), the routers (the first, which runs NATS, last), the backend.
func (r *run) close() {
	if r.calls != nil {
		r.calls.close()
	}
	var wg sync.WaitGroup
	for _, l := range r.loaders {
		wg.Add(1)
		go func() { defer wg.Done(); l.stop() }()
	}
	wg.Wait()
	for i := len(r.routers) - 1; i >= 1; i-- {
		if p := r.routers[i].Proc; p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop() }()
		}
	}
	wg.Wait()
	if len(r.routers) > 0 && r.routers[0].Proc != nil {
		r.routers[0].Proc.Stop()
	}
	if r.backend != nil {
		r.backend.Stop()
	}
}
