package scale

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
)

// build returns the paths of the three binaries: the given ones, the others built
// into dir.
func build(ctx context.Context, dir string, given map[string]string, logf func(string, ...any)) (map[string]string, error) {
	bins := map[string]string{}
	for _, cmd := range []string{"mcprouter", "mcpbackend", "mcpload"} {
		if p := given[cmd]; p != "" {
			bins[cmd] = p
			continue
		}
		logf("building %s", cmd)
		path, err := cluster.BuildCommand(ctx, dir, cmd)
		if err != nil {
			return nil, err
		}
		bins[cmd] = path
	}
	return bins, nil
}

// routerConfig is router i's configuration: the first runs the embedded NATS server,
// listening on natsPort with credentials; the others join it. Every limit meant for
// many clients behind one address is lifted: the loaders open every session from a
// few loopback addresses.
func routerConfig(c *Config, i int, r *cluster.Router, backendURL string, natsPort int, password string) string {
	nats := fmt.Sprintf(`{listen: "127.0.0.1:%d", user: scale, password: %q, name: %s, jetstream: {session_storage: %q}}`, natsPort, password, r.Name, c.SessionStorage)
	if i > 0 {
		nats = fmt.Sprintf(`{url: "nats://scale:%s@127.0.0.1:%d", name: %s}`, password, natsPort, r.Name)
	}
	perRouter := (c.Sessions+c.Routers-1)/c.Routers + 1000
	return fmt.Sprintf(`listen: 127.0.0.1:%d
admin: {listen: "127.0.0.1:%d", pprof: %t}
backends:
  - {name: ref, url: %q, prefix: ""}
nats: %s
sessions: {max: %d, max_per_client: -1, init_rate: -1, no_persist: %t}
connections: {max_per_address: -1}
shutdown_grace: 2s
`, r.Port, r.AdminPort, c.Profiles, backendURL, nats, perRouter, !c.Persist)
}

// writeFile writes a configuration file.
func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// logWarnings counts the routers' warnings and errors by message, from their logs, up
// to until (the end of the measurements: the teardown's closed connections are not
// the run's): a run whose update went missing says there why (a lease not taken,
// records not saved).
func logWarnings(dir string, routers int, until time.Time) map[string]int {
	out := map[string]int{}
	for i := range routers {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("router%d.log", i)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
				continue
			}
			if ts, ok := strings.CutPrefix(line, "time="); ok {
				ts, _, _ = strings.Cut(ts, " ")
				if t, err := time.Parse(time.RFC3339Nano, ts); err == nil && t.After(until) {
					continue
				}
			}
			_, msg, ok := strings.Cut(line, `msg="`)
			if !ok {
				continue
			}
			msg, _, _ = strings.Cut(msg, `"`)
			n := 1
			if _, sup, ok := strings.Cut(line, "suppressed="); ok {
				if v, err := strconv.Atoi(strings.Fields(sup)[0]); err == nil {
					n += v
				}
			}
			out[msg] += n
		}
		f.Close()
	}
	return out
}

// saveHeapProfile fetches a router's heap profile (after a collection) into path, and
// before it, beside it (path with .txt for .pprof), the text form as the heap is, whose
// end holds the runtime's memory statistics: how much of the RSS is live heap, how
// much the collector's headroom and stacks. After it, the same statistics after a
// collection (.gc.txt) and the goroutines (.goroutines.txt): what stays of the RSS
// once the opening's garbage is gone, and who holds stacks.
func saveHeapProfile(r *cluster.Router, path string) error {
	base := strings.TrimSuffix(path, ".pprof")
	for _, p := range [...]struct{ query, path string }{
		{"heap?debug=1", base + ".txt"},
		{"heap?gc=1", path},
		{"heap?gc=1&debug=1", base + ".gc.txt"},
		{"goroutine?debug=1", base + ".goroutines.txt"},
	} {
		if err := saveProfile(r, p.query, time.Minute, p.path); err != nil {
			return err
		}
	}
	return nil
}

// startCPUProfiles profiles each router's CPU for d (the opening, about), into
// routerN.cpu.pprof in dir; the returned function waits for the profiles.
func startCPUProfiles(routers []*cluster.Router, d time.Duration, dir string, logf func(string, ...any)) (wait func()) {
	var wg sync.WaitGroup
	for _, rt := range routers {
		wg.Go(func() {
			q := fmt.Sprintf("profile?seconds=%d", int(d.Seconds()))
			if err := saveProfile(rt, q, d+time.Minute, filepath.Join(dir, rt.Name+".cpu.pprof")); err != nil {
				logf("%v", err)
			}
		})
	}
	return wg.Wait
}

// saveProfile fetches the router's /debug/pprof/<query> into path.
func saveProfile(r *cluster.Router, query string, timeout time.Duration, path string) error {
	c := &http.Client{Timeout: timeout}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", r.AdminPort, query))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: profile %s: HTTP %d", r.Name, query, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
