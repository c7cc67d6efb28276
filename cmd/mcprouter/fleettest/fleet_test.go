package fleettest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// The fleet's backends, by their configured names (also their tool prefixes and, given
// as --name, the logger of their log messages).
const (
	bigName  = "big"  // Streamable HTTP, many tools
	kidsName = "kids" // stdio, two child processes
	oldName  = "old"  // legacy HTTP+SSE
	pairName = "pair" // two replicas; their --name are pair-a and pair-b
)

// backendNames lists the backends in configuration order (the order that decides name
// collisions: the first keeps a URI served by several).
var backendNames = []string{bigName, kidsName, oldName, pairName}

// builtinTools are the reference backend's own tools, served by every backend.
var builtinTools = []string{"echo", "sleep", "payload", "fail", "fail_rpc", "progress", "sample", "touch", "log"}

// Catalog shape of the fleet.
const (
	bigExtraTools = 230 // generated tools tool_0001..tool_0230 on big only
	bigPageSize   = 50  // big's own page size: the router fetches 5 pages from it
	// Extra resources item://0001..item://000N: each backend configured later has one
	// more, so that every backend owns exactly one item URI nobody configured before
	// it serves: kids item://0002 (and item://0001), old item://0003, pair item://0004.
	kidsItems = 2
	oldItems  = 3
	pairItems = 4
	// backendTimeout is the per-request timeout configured for every backend: long, so
	// that a test that sees an error within a few seconds knows it did not come from it.
	backendTimeout = 60 * time.Second
)

// ownItem is the item URI each backend is the only one to route (see kidsItems).
var ownItem = map[string]string{
	kidsName: "item://0002",
	oldName:  "item://0003",
	pairName: "item://0004",
}

// fleet is a router and the backend processes behind it, all started by one test.
type fleet struct {
	t      *testing.T
	dir    string
	router *proc
	big    *proc
	old    *proc
	pair   [2]*proc
}

// fleetOptions vary the router's configuration.
type fleetOptions struct {
	// noJetStream runs the embedded NATS without JetStream: resource subscriptions are
	// then kept by the router process alone (router/fleet's local subscriptions) rather
	// than with cluster-wide leases.
	noJetStream bool
	// perClientKids gives every client session its own upstream sessions with kids (its
	// own child processes), so that what kids sends on stdio always has one client.
	perClientKids bool
	// pipeline sends the requests to the Streamable HTTP backends (big, pair) with
	// HTTP/1.1 pipelining over two connections each.
	pipeline bool
}

// startFleet starts the backends, writes the router's configuration and starts the
// router. Every process is stopped at the end of the test.
func startFleet(t *testing.T) *fleet { return startFleetWith(t, fleetOptions{}) }

func startFleetWith(t *testing.T, o fleetOptions) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: t.TempDir()}
	f.big = startBackend(t, "127.0.0.1:0", "--name", bigName,
		"--tools", strconv.Itoa(bigExtraTools), "--page-size", strconv.Itoa(bigPageSize))
	f.old = startBackend(t, "127.0.0.1:0", "--name", oldName, "--resources", strconv.Itoa(oldItems))
	f.pair[0] = startBackend(t, "127.0.0.1:0", "--name", pairName+"-a", "--resources", strconv.Itoa(pairItems))
	f.pair[1] = startBackend(t, "127.0.0.1:0", "--name", pairName+"-b", "--resources", strconv.Itoa(pairItems))

	cfg := fmt.Sprintf(`# mcprouter configuration written by the fleet tests.
listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
shutdown_grace: 5s
backends:
  - name: %[1]s
    url: http://%[2]s/mcp
    timeout: %[8]s
  - name: %[3]s
    command: [%[4]q, stdio, --name, %[3]s, --tick, "0", --resources, "%[9]d"]
    instances: 2
    timeout: %[8]s
  - name: %[5]s
    url: http://%[6]s/sse
    timeout: %[8]s
  - name: %[7]s
    urls:
      - http://%[10]s/mcp
      - http://%[11]s/mcp
    timeout: %[8]s
`, bigName, f.big.Addr(), kidsName, testbin.BuildFixture(t, testbin.Backend), oldName, f.old.Addr(), pairName, backendTimeout,
		kidsItems, f.pair[0].Addr(), f.pair[1].Addr())
	if o.perClientKids {
		cfg = strings.Replace(cfg, "    instances: 2\n", "    instances: 2\n    sessions: per-client\n", 1)
	}
	if o.pipeline {
		cfg = strings.Replace(cfg, "    url: http://"+f.big.Addr()+"/mcp\n", "    url: http://"+f.big.Addr()+"/mcp\n    pipeline: 2\n", 1)
		cfg = strings.Replace(cfg, "    urls:\n", "    pipeline: 2\n    urls:\n", 1)
		if n := strings.Count(cfg, "pipeline: 2"); n != 2 {
			t.Fatalf("pipelining set on %d backends, want 2 (big and pair)", n)
		}
	}
	if o.noJetStream {
		cfg += "nats:\n  no_jetstream: true\n"
	}
	f.router = startRouter(t, f.dir, cfg)
	f.waitReady(t)
	return f
}

// startRouter writes cfg into dir and starts a router with it. At cleanup the router is
// stopped gracefully (it stops its stdio children), and what it wrote is searched for
// race reports.
func startRouter(t *testing.T, dir, cfg string) *proc {
	t.Helper()
	path := filepath.Join(dir, "mcprouter.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The router under test carries the race detector when the tests do (a race under
	// real load fails the test at cleanup); the backends are fixtures and stay fast.
	p := testbin.Start(t, testbin.Spec{Bin: testbin.Build(t, testbin.Router), Args: []string{"--config", path},
		Ready: []string{"mcprouter listening", "admin listening"}, Wait: wait})
	t.Cleanup(func() {
		if !p.Stop(wait) {
			t.Errorf("mcprouter did not stop on SIGTERM within %v", wait)
		}
	})
	return p
}

// backendSpec is an mcpbackend with args, ready once it logged that it accepts
// connections.
func backendSpec(t *testing.T, args []string) testbin.Spec {
	return testbin.Spec{Bin: testbin.BuildFixture(t, testbin.Backend), Args: args, Ready: []string{"mcpbackend listening"}, Wait: wait}
}

// startBackend starts one mcpbackend listening on addr (port 0: a free one).
func startBackend(t *testing.T, addr string, args ...string) *proc {
	t.Helper()
	args = append([]string{"--listen", addr, "--tick", "0"}, args...)
	return testbin.Start(t, backendSpec(t, args))
}

// restart starts p again on the same address with the same flags (p must be down).
func (f *fleet) restart(t *testing.T, p *proc) *proc {
	t.Helper()
	args := append([]string(nil), p.Args...)
	for i := range args {
		if args[i] == "--listen" && i+1 < len(args) {
			args[i+1] = p.Addr()
		}
	}
	var np *proc
	var err error
	// The port was just released; on a busy machine binding it again may take a moment.
	ok := testwait.Poll(wait, func() bool {
		var q *proc
		q, err = testbin.Spawn(backendSpec(t, args))
		if q != nil {
			t.Cleanup(q.Kill)
		}
		np = q
		return err == nil
	})
	if !ok {
		t.Fatalf("cannot restart %s on %s: %v", p.Name, p.Addr(), err)
	}
	return np
}

func (f *fleet) mcpURL() string { return "http://" + f.router.Addr() + "/mcp" }
func (f *fleet) sseURL() string { return "http://" + f.router.Addr() + "/sse" }

// backendURL is the Streamable HTTP endpoint of one backend process, for direct reads
// of its statistics (never through the router).
func backendURL(p *proc) string { return "http://" + p.Addr() + "/mcp" }

// waitReady waits until the router reports every backend instance up (its /readyz, then
// the per-instance gauge), so that tests start from a complete fleet.
func (f *fleet) waitReady(t *testing.T) {
	t.Helper()
	ok := testwait.Poll(wait, func() bool {
		m, err := f.metrics()
		if err != nil {
			return false
		}
		for _, b := range backendNames {
			want := 1.0
			if b == kidsName || b == pairName {
				want = 2
			}
			if m.get("mcprouter_backend_healthy_instances", `backend="`+b+`"`) != want {
				return false
			}
		}
		return true
	})
	if !ok {
		m, _ := f.metrics()
		t.Fatalf("the fleet is not ready within %v:\n%s", wait, m.grep("mcprouter_backend_"))
	}
}

// metricSet is one scrape of the router's /metrics, as lines.
type metricSet []string

// metrics scrapes the router's admin /metrics.
func (f *fleet) metrics() (metricSet, error) {
	if f.router.Addrs[1] == "" {
		return nil, fmt.Errorf("the router logged no admin address")
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + f.router.Addrs[1] + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	var m metricSet
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" && l[0] != '#' {
			m = append(m, l)
		}
	}
	return m, sc.Err()
}

// get sums the samples of metric name whose labels contain every one of labels
// (`key="value"` pieces); -1 when there is none.
func (m metricSet) get(name string, labels ...string) float64 {
	sum, found := 0.0, false
	for _, l := range m {
		sp := strings.LastIndexByte(l, ' ')
		if sp < 0 {
			continue
		}
		series := l[:sp]
		n, lab, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		match := true
		for _, want := range labels {
			if !strings.Contains(lab, want) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(l[sp+1:], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if !found {
		return -1
	}
	return sum
}

// grep returns the lines that start with prefix, for failure messages.
func (m metricSet) grep(prefix string) string {
	var out []string
	for _, l := range m {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// metric reads one metric now; -1 when it cannot.
func (f *fleet) metric(name string, labels ...string) float64 {
	m, err := f.metrics()
	if err != nil {
		return -1
	}
	return m.get(name, labels...)
}
