package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/internal/defaults"
)

// Options shape a Cluster. Zero values take the defaults noted.
type Options struct {
	Dir       string // working directory: binaries, configurations, logs, stores
	Routers   int    // router instances (default 3)
	NATSNodes int    // NATS nodes (default 3); the JetStream replicas follow, at most 3
	// WebReplicas and CLIReplicas are the replicas of the two backends: "web" over HTTP
	// (each behind a Proxy) and "cli" over stdio (children of each router). Default 2.
	WebReplicas, CLIReplicas int
	// BackendTimeout is the routers' per-request timeout to the backends (default 2s).
	BackendTimeout time.Duration
	// Tick is how often the web backend's counter://tick changes (default 100ms).
	Tick time.Duration
	// Lease is the NATS lease of the routers' claims (default 5s).
	Lease time.Duration
	Logf  func(format string, args ...any)
}

func (o *Options) defaults() {
	o.Routers = defaults.Positive(o.Routers, 3)
	o.NATSNodes = defaults.Positive(o.NATSNodes, 3)
	o.WebReplicas = defaults.Positive(o.WebReplicas, 2)
	o.CLIReplicas = defaults.Positive(o.CLIReplicas, 2)
	o.BackendTimeout = defaults.Positive(o.BackendTimeout, 2*time.Second)
	o.Tick = defaults.Positive(o.Tick, 100*time.Millisecond)
	o.Lease = defaults.Positive(o.Lease, 5*time.Second)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Cluster is the running deployment.
type Cluster struct {
	o       Options
	bins    map[string]string
	NATS    []*NATSNode
	Web     []*WebReplica
	Routers []*Router
}

// WebReplica is one replica of the HTTP backend, reached through its proxy.
type WebReplica struct {
	Name  string
	Port  int
	Proxy *Proxy
	Proc  *Proc
	argv  []string
	log   string
}

// Start (re)starts the replica on its port.
func (w *WebReplica) Start() error {
	p, err := StartProc(w.Name, w.log, "mcpbackend listening", time.Minute, w.argv...)
	if err != nil {
		return err
	}
	w.Proc = p
	return nil
}

// Router is one router instance.
type Router struct {
	Name            string
	Port, AdminPort int
	Proc            *Proc
	config, log     string
	bin             string
}

// NewRouter is router instance i of a deployment in dir, not started yet: named
// router<i>, its configuration in dir/router<i>.yaml (ConfigPath: the caller writes it)
// and its log in dir/router<i>.log; Start runs bin with them.
func NewRouter(i, port, adminPort int, bin, dir string) *Router {
	name := fmt.Sprintf("router%d", i)
	return &Router{Name: name, Port: port, AdminPort: adminPort, bin: bin,
		config: filepath.Join(dir, name+".yaml"), log: filepath.Join(dir, name+".log")}
}

// ConfigPath is the configuration file Start gives the instance.
func (r *Router) ConfigPath() string { return r.config }

// URL is the instance's MCP endpoint.
func (r *Router) URL() string { return fmt.Sprintf("http://127.0.0.1:%d/mcp", r.Port) }

// MetricsURL is the instance's Prometheus endpoint.
func (r *Router) MetricsURL() string { return fmt.Sprintf("http://127.0.0.1:%d/metrics", r.AdminPort) }

// Start (re)starts the instance with its configuration.
func (r *Router) Start() error {
	p, err := StartProc(r.Name, r.log, "mcprouter listening", 2*time.Minute, r.bin, "--config", r.config)
	if err != nil {
		return err
	}
	r.Proc = p
	return nil
}

// StdioChildren are the PIDs of the instance's stdio backend processes.
func (r *Router) StdioChildren() []int {
	if r.Proc == nil || r.Proc.Exited() {
		return nil
	}
	return Children(r.Proc.PID())
}

// Start builds the binaries, starts the NATS nodes (the command's own binary serves
// them, see ServeNATSNode), the backends and the routers, and waits up to a minute for
// the routers to list both echo tools. Close stops what it started.
func Start(ctx context.Context, o Options) (*Cluster, Tools, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, Tools{}, err
	}
	c, err := start(ctx, exe, o)
	if err != nil {
		return nil, Tools{}, err
	}
	tools, err := c.FindTools(ctx, time.Minute)
	if err != nil {
		c.Close()
		return nil, Tools{}, err
	}
	return c, tools, nil
}

// start builds the binaries and starts the NATS nodes, the backends and the routers;
// exe serves the NATS nodes.
func start(ctx context.Context, exe string, o Options) (*Cluster, error) {
	o.defaults()
	c := &Cluster{o: o, bins: map[string]string{}}
	for _, cmd := range []string{"mcprouter", "mcpbackend"} {
		o.Logf("building %s", cmd)
		path, err := BuildCommand(ctx, o.Dir, cmd)
		if err != nil {
			return nil, err
		}
		c.bins[cmd] = path
	}
	ports, err := FreePorts(2*o.NATSNodes + o.WebReplicas + 2*o.Routers)
	if err != nil {
		return nil, err
	}
	take := func(n int) []int { p := ports[:n]; ports = ports[n:]; return p }
	natsPorts, routePorts := take(o.NATSNodes), take(o.NATSNodes)
	for i := range o.NATSNodes {
		c.NATS = append(c.NATS, newNATSNode(o.Dir, exe, i, natsPorts, routePorts))
	}
	errs := make(chan error, len(c.NATS))
	for _, n := range c.NATS {
		go func() { errs <- n.Start() }()
	}
	for range c.NATS {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	o.Logf("NATS: %d nodes", len(c.NATS))
	webPorts := take(o.WebReplicas)
	var webURLs []string
	for i, port := range webPorts {
		w := &WebReplica{Name: fmt.Sprintf("web%d", i), Port: port, log: filepath.Join(o.Dir, fmt.Sprintf("web%d.log", i)),
			argv: []string{c.bins["mcpbackend"], "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--name", fmt.Sprintf("web%d", i),
				"--tick", o.Tick.String()}}
		if err := w.Start(); err != nil {
			c.Close()
			return nil, err
		}
		if w.Proxy, err = NewProxy("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			c.Close()
			return nil, err
		}
		c.Web = append(c.Web, w)
		webURLs = append(webURLs, "http://"+w.Proxy.Addr()+"/mcp")
	}
	routerPorts := take(2 * o.Routers)
	for i := range o.Routers {
		r := NewRouter(i, routerPorts[2*i], routerPorts[2*i+1], c.bins["mcprouter"], o.Dir)
		if err := os.WriteFile(r.config, []byte(c.routerConfig(i, r, webURLs)), 0o600); err != nil {
			c.Close()
			return nil, err
		}
		if err := r.Start(); err != nil {
			c.Close()
			return nil, err
		}
		c.Routers = append(c.Routers, r)
	}
	o.Logf("%d routers, web backend ×%d over HTTP, cli backend ×%d over stdio per router", len(c.Routers), len(c.Web), o.CLIReplicas)
	return c, nil
}

// routerConfig is instance i's configuration: its own NATS node first, then the others.
func (c *Cluster) routerConfig(i int, r *Router, webURLs []string) string {
	var nats []string
	for j := range c.NATS {
		nats = append(nats, c.NATS[(i+j)%len(c.NATS)].URL())
	}
	replicas := min(len(c.NATS), 3)
	return fmt.Sprintf(`listen: 127.0.0.1:%d
admin: {listen: "127.0.0.1:%d", pprof: true}
backends:
  - {name: web, urls: [%s], timeout: %s}
  - {name: cli, command: [%q, stdio, "--tick=0s", --log-level, warn], instances: %d, timeout: %s}
nats: {url: %q, name: %s, replicas: %d, lease: %s}
`, r.Port, r.AdminPort, strings.Join(quoteAll(webURLs), ", "), c.o.BackendTimeout, c.bins["mcpbackend"], c.o.CLIReplicas,
		c.o.BackendTimeout, strings.Join(nats, ","), r.Name, replicas, c.o.Lease)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// URLs are the routers' MCP endpoints.
func (c *Cluster) URLs() []string { return URLsOf(c.Routers) }

// URLsOf are the MCP endpoints of routers, in their order.
func URLsOf(routers []*Router) []string {
	var out []string
	for _, r := range routers {
		out = append(out, r.URL())
	}
	return out
}

// Close stops every process the cluster started (routers first, then backends, then
// NATS), each by its own PID.
func (c *Cluster) Close() {
	for _, r := range c.Routers {
		if r.Proc != nil {
			r.Proc.Stop()
		}
	}
	for _, w := range c.Web {
		if w.Proxy != nil {
			w.Proxy.Close()
		}
		if w.Proc != nil {
			w.Proc.Stop()
		}
	}
	for _, n := range c.NATS {
		if n.Proc != nil {
			n.Proc.Stop()
		}
	}
}

// BuildCommand builds the project's command cmd (mcprouter, mcpbackend, mcpload) into
// dir and returns the binary's path; the error carries the compiler's output. It is the
// bench commands' build (tests build with internal/testbin, which caches per test
// process and follows the race flag).
func BuildCommand(ctx context.Context, dir, cmd string) (string, error) {
	path := filepath.Join(dir, cmd)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/mcprouter/mcprouter/cmd/"+cmd).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", cmd, err, out)
	}
	return path, nil
}

// FreePorts reserves n loopback ports and releases them for the children to take;
// they stay the children's across restarts. Any command that starts servers as child
// processes on loopback may use it.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
