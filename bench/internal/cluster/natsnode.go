package cluster

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsRole is the first argument with which the command runs one NATS node for its
// parent (the command re-executes itself: the node is a process of its own, to be
// killed and restarted, and nothing has to be installed).
const natsRole = "nats-node"

// natsReady is the line a node writes once it accepts clients.
const natsReady = "nats node ready"

// ServeNATSNode runs the NATS node and exits when the command was started as one;
// otherwise it returns at once. Commands that use a Cluster call it first in main.
func ServeNATSNode() {
	if len(os.Args) < 2 || os.Args[1] != natsRole {
		return
	}
	fs := flag.NewFlagSet(natsRole, flag.ExitOnError)
	name := fs.String("name", "n0", "server name")
	port := fs.Int("port", 0, "client port")
	routePort := fs.Int("route-port", 0, "route port")
	routes := fs.String("routes", "", "comma-separated route ports of the other nodes")
	store := fs.String("store", "", "JetStream store directory")
	_ = fs.Parse(os.Args[2:])
	o := &server.Options{ServerName: *name, Host: "127.0.0.1", Port: *port, JetStream: true, StoreDir: *store, NoSigs: true, NoLog: true}
	if *routes != "" { // a node alone is no cluster: JetStream would wait for peers
		o.Cluster = server.ClusterOpts{Name: "chaos", Host: "127.0.0.1", Port: *routePort}
	}
	for _, p := range strings.Split(*routes, ",") {
		if p != "" {
			u, _ := url.Parse("nats-route://127.0.0.1:" + p)
			o.Routes = append(o.Routes, u)
		}
	}
	s, err := server.NewServer(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nats node:", err)
		os.Exit(2)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		fmt.Fprintln(os.Stderr, "nats node: not ready")
		os.Exit(2)
	}
	// Ready for the routers once JetStream is: the cluster elected its meta leader and
	// this node caught up (a restarted node rejoins a cluster that has one).
	for deadline := time.Now().Add(time.Minute); !s.JetStreamIsCurrent() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "%s addr=127.0.0.1:%d\n", natsReady, *port)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	os.Exit(0)
}

// NATSNode is one node of the cluster's NATS, run as a child process.
type NATSNode struct {
	Name            string
	Port, RoutePort int
	routes          []int
	store, log, exe string
	Proc            *Proc
}

// URL is the node's client URL.
func (n *NATSNode) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.Port) }

// Start starts (or restarts) the node with its ports and store.
func (n *NATSNode) Start() error {
	var rs []string
	for _, r := range n.routes {
		rs = append(rs, fmt.Sprint(r))
	}
	p, err := StartProc(n.Name, n.log, natsReady, 60*time.Second, n.exe, natsRole, "-name", n.Name,
		"-port", fmt.Sprint(n.Port), "-route-port", fmt.Sprint(n.RoutePort), "-routes", strings.Join(rs, ","), "-store", n.store)
	if err != nil {
		return err
	}
	n.Proc = p
	return nil
}

func newNATSNode(dir, exe string, i int, ports, routePorts []int) *NATSNode {
	n := &NATSNode{Name: fmt.Sprintf("nats%d", i), Port: ports[i], RoutePort: routePorts[i], exe: exe,
		store: filepath.Join(dir, fmt.Sprintf("nats%d-store", i)), log: filepath.Join(dir, fmt.Sprintf("nats%d.log", i))}
	for j, p := range routePorts {
		if j != i {
			n.routes = append(n.routes, p)
		}
	}
	return n
}
