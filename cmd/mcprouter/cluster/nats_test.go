package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// natsServer is the import path of the NATS server's command, which the tests' cluster
// runs as child processes: built without the race detector, as the external cluster of
// a deployment is. In the test's own process its clustered JetStream code drew race
// reports of its own (in its batching of replicated messages) into these tests.
const natsServer = "github.com/nats-io/nats-server/v2"

// natsNode is one server of the test's NATS cluster, a child process.
type natsNode struct {
	name                 string
	port, route, monitor int
	routes               []int // the other nodes' route ports
	dir                  string
	bin                  string
	proc                 *testbin.Proc
	logs                 []*testbin.Log // of every start, for a failing test
}

func (n *natsNode) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

func (n *natsNode) start(t *testing.T) {
	t.Helper()
	if err := n.tryStart(); err != nil {
		t.Fatal(err)
	}
}

// tryStart starts the node and waits until it takes connections. It returns an error
// rather than failing the test, so that it may run on a goroutine of its own (t.Fatal
// must not) and so that startNATS may try again on other ports.
func (n *natsNode) tryStart() error {
	routes := make([]string, len(n.routes))
	for i, p := range n.routes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	p, err := testbin.Spawn(testbin.Spec{
		Name: "NATS node " + n.name, Bin: n.bin, Wait: 20 * time.Second,
		// Ready once it listens for routes too: a route port taken meanwhile ends it
		// after "Server is ready", and the cluster is then started on other ports.
		Ready: []string{"Server is ready", "Listening for route connections"},
		Args: []string{
			"-a", "127.0.0.1", "-p", strconv.Itoa(n.port), "-m", strconv.Itoa(n.monitor),
			"-n", n.name, "-js", "-sd", n.dir,
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.route), "--cluster_name", "test",
			"--routes", strings.Join(routes, ","),
		},
	})
	if p != nil {
		n.logs = append(n.logs, p.Log)
	}
	if err != nil {
		return err
	}
	n.proc = p
	return nil
}

// stop ends the node gracefully, by its PID.
func (n *natsNode) stop() {
	if n.proc != nil {
		n.proc.Stop(10 * time.Second)
		n.proc = nil
	}
}

// monitorClient reads the nodes' monitoring port; a node that stopped answering fails
// the read rather than the wait it is polled in.
var monitorClient = &http.Client{Timeout: 2 * time.Second}

// routeInterest counts the other nodes that told this one of a subscription to subject
// (from its monitoring port's route list).
func (n *natsNode) routeInterest(subject string) (int, error) {
	resp, err := monitorClient.Get(fmt.Sprintf("http://127.0.0.1:%d/routez?subs=1", n.monitor))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var rz struct {
		Routes []struct {
			Remote string   `json:"remote_name"`
			Subs   []string `json:"subscriptions_list"`
		} `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil {
		return 0, err
	}
	from := map[string]bool{}
	for _, r := range rz.Routes {
		for _, s := range r.Subs {
			if s == subject {
				from[r.Remote] = true
			}
		}
	}
	return len(from), nil
}

// startNATS starts a cluster of n NATS servers with JetStream, routed to each other
// (skipped in -short mode). Its ports come from testbin.FreeAddr, which another process
// may take before the server listens: a cluster that does not come up is started
// again on other ports, up to three times. It returns once the cluster is formed.
func startNATS(t *testing.T, n int) []*natsNode {
	t.Helper()
	testbin.Long(t, "starts a NATS cluster")
	bin := testbin.BuildFixture(t, natsServer)
	var nodes []*natsNode
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if nodes, err = tryCluster(t, bin, n); err == nil {
			break
		}
		t.Logf("NATS cluster, attempt %d: %v", attempt+1, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.stop()
			if t.Failed() {
				for _, l := range nd.logs {
					t.Logf("NATS node %s log (last lines):\n%s", nd.name, l)
				}
			}
		}
	})
	// A node taking connections is not a formed cluster: routes still connecting (and
	// their pooled connections) drop messages between two nodes, and a node that sees
	// no JetStream meta leader yet answers "no responders". Tests that started on such a
	// cluster lost the first update published across it, or saw a router give up the
	// lease bucket after its 10 seconds. Three clean rounds in a row are asked for.
	clean := 0
	testwait.For(t, "every node to reach every other and JetStream", 60*time.Second, func() bool {
		if err := probeMesh(nodes); err != nil {
			clean = 0
			return false
		}
		clean++
		return clean == 3
	})
	return nodes
}

// tryCluster starts n routed nodes on fresh ports; on failure it stops those that
// started.
func tryCluster(t *testing.T, bin string, n int) ([]*natsNode, error) {
	routes := make([]int, n)
	for i := range routes {
		routes[i] = freePort(t)
	}
	nodes := make([]*natsNode, n)
	for i := range nodes {
		nd := &natsNode{name: fmt.Sprintf("n%d", i), port: freePort(t), route: routes[i], monitor: freePort(t), dir: t.TempDir(), bin: bin}
		for j, p := range routes {
			if j != i {
				nd.routes = append(nd.routes, p)
			}
		}
		nodes[i] = nd
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = nd.tryStart() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, nd := range nodes {
			nd.stop()
		}
		return nil, err
	}
	return nodes, nil
}

// probeMesh checks that a message published on each node reaches a subscriber on every
// node, and that each node answers a JetStream API request (which needs the meta
// leader).
func probeMesh(nodes []*natsNode) error {
	conns := make([]*nats.Conn, len(nodes))
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	got := make([]chan struct{}, len(nodes))
	for i, nd := range nodes {
		nc, err := nats.Connect(nd.url(), nats.NoReconnect())
		if err != nil {
			return err
		}
		conns[i] = nc
		ch := make(chan struct{}, len(nodes))
		got[i] = ch
		if _, err := nc.Subscribe("mesh.probe."+strconv.Itoa(i), func(*nats.Msg) { ch <- struct{}{} }); err != nil {
			return err
		}
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	for _, nc := range conns {
		for j := range nodes {
			if err := nc.Publish("mesh.probe."+strconv.Itoa(j), nil); err != nil {
				return err
			}
		}
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	timeout := time.After(time.Second)
	for j := range nodes {
		for range nodes {
			select {
			case <-got[j]:
			case <-timeout:
				return fmt.Errorf("node %d missed a probe", j)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i, nc := range conns {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		if _, err := js.AccountInfo(ctx); err != nil {
			return fmt.Errorf("node %d: JetStream: %w", i, err)
		}
	}
	return nil
}
