package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app/apptest"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// freePort is the port of testbin.FreeAddr, for the NATS servers' options.
func freePort(t *testing.T) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(testbin.FreeAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startCluster starts the three-node NATS cluster and the reference backend most tests
// share.
func startCluster(t *testing.T) ([]*natsNode, *backendsrv.Server) {
	t.Helper()
	return startNATS(t, 3), startBackend(t)
}

// startBackend runs the reference backend in-process on loopback.
func startBackend(t *testing.T) *backendsrv.Server {
	t.Helper()
	return mcpbackendtest.Start(t, backendsrv.Config{Name: "ref", Tick: -1, Logger: quiet(t)})
}

// quiet is the logger of the routers and backends a test starts: their warnings and
// errors are kept and printed if the test fails (all of it on stderr with
// MCPROUTER_TEST_LOG set).
func quiet(t *testing.T) *slog.Logger {
	if os.Getenv("MCPROUTER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	buf := new(testbin.Log)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("warnings and errors logged during the test:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// startRouter runs one router instance on the NATS server at natsURL.
func startRouter(t *testing.T, name, natsURL, backendURL string) *app.App {
	t.Helper()
	return apptest.Start(t, routerConfig(name, natsURL, backendURL), quiet(t), 10*time.Second)
}

// routerConfig is the configuration of instance name of the cluster on the NATS server
// at natsURL, with the one backend (unprefixed).
func routerConfig(name, natsURL, backendURL string) app.Config {
	prefix := ""
	return app.Config{
		Listen:   "127.0.0.1:0",
		Backends: []app.BackendConfig{{Name: "ref", URL: backendURL, Prefix: &prefix}},
		NATS:     natsbus.Config{URL: natsURL, Name: name, Replicas: 3, Lease: 5 * time.Second},
	}
}

// client is a Go SDK client session that records the resource updates it receives.
type client struct {
	cs      *mcp.ClientSession
	mu      sync.Mutex
	updates []string
	got     chan string
}

func connect(t *testing.T, endpoint string) *client {
	t.Helper()
	c := &client{got: make(chan string, 1024)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "cluster-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updates = append(c.updates, req.Params.URI)
			c.mu.Unlock()
			select {
			case c.got <- req.Params.URI:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

func (c *client) waitUpdate(t *testing.T, uri string, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case u := <-c.got:
			if u == uri {
				return
			}
		case <-timer.C:
			t.Fatalf("no notifications/resources/updated for %s within %v", uri, d)
		}
	}
}

func subscribe(t *testing.T, c *client, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
}

func touch(t *testing.T, c *client, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": uri}})
	if err != nil || res.IsError {
		t.Fatalf("touch %s: %v %+v", uri, err, res)
	}
}

func upstreamSubscriptions(routers ...*app.App) int {
	n := 0
	for _, r := range routers {
		if r != nil && r.Fleet != nil {
			n += r.Fleet.Subscriptions()
		}
	}
	return n
}

// TestFanOutAcrossInstances: clients on A, B and C subscribe to one resource; exactly one
// upstream subscription exists in the cluster; an update the backend emits reaches every
// client, whichever instance holds the upstream subscription; releasing the last
// subscriber releases it.
func TestFanOutAcrossInstances(t *testing.T) {
	nodes, backend := startCluster(t)
	routers := make([]*app.App, 3)
	for i := range routers {
		routers[i] = startRouter(t, fmt.Sprintf("r%d", i), nodes[i].url(), backend.URL())
	}
	const uri = "memo://board"
	// C subscribes first, so C holds the upstream subscription.
	clients := make([]*client, 3)
	for _, i := range []int{2, 0, 1} {
		clients[i] = connect(t, routers[i].URL())
		subscribe(t, clients[i], uri)
	}
	if n := upstreamSubscriptions(routers...); n != 1 {
		t.Fatalf("upstream subscriptions in the cluster = %d, want 1", n)
	}
	if routers[2].Fleet.Subscriptions() != 1 {
		t.Fatalf("the first subscriber's instance should hold the upstream subscription")
	}
	touch(t, clients[1], uri)
	for i, c := range clients {
		c.waitUpdate(t, uri, 10*time.Second)
		t.Logf("client on router %d got the update", i)
	}

	// Unsubscribing everywhere releases the upstream subscription.
	for _, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	testwait.For(t, "the upstream subscription to be released", 10*time.Second, func() bool { return upstreamSubscriptions(routers...) == 0 })
}

// TestInstanceLoss: the instance holding the upstream subscription goes away; its lease
// expires and another instance with subscribers takes the upstream subscription over, so
// updates keep flowing; a NATS node restart does not lose delivery on the other nodes.
func TestInstanceLossAndNATSRestart(t *testing.T) {
	nodes, backend := startCluster(t)
	a := startRouter(t, "a", nodes[0].url(), backend.URL())
	b := startRouter(t, "b", nodes[1].url(), backend.URL())
	const uri = "memo://board"
	ca := connect(t, a.URL())
	cb := connect(t, b.URL())
	subscribe(t, ca, uri)
	subscribe(t, cb, uri)
	if a.Fleet.Subscriptions() != 1 || b.Fleet.Subscriptions() != 0 {
		t.Fatalf("a should own the upstream subscription (a=%d b=%d)", a.Fleet.Subscriptions(), b.Fleet.Subscriptions())
	}
	// A goes away: B takes over within the lease.
	a.Shutdown(context.Background())
	testwait.For(t, "b to take over the upstream subscription", 20*time.Second, func() bool { return b.Fleet.Subscriptions() == 1 })
	touch(t, cb, uri)
	cb.waitUpdate(t, uri, 10*time.Second)

	// Restart the NATS node that A used: B, on another node, keeps receiving.
	nodes[0].stop()
	touch(t, cb, uri)
	cb.waitUpdate(t, uri, 10*time.Second)
	nodes[0].start(t)
	touch(t, cb, uri)
	cb.waitUpdate(t, uri, 10*time.Second)
}

// TestSessionMovesToAnotherInstance: a client whose instance goes away reconnects to
// another instance with the same Mcp-Session-Id and Last-Event-ID: the update it had not
// acknowledged reaches it again (change notices are not logged: the new instance sends
// them fresh), its subscription still delivers, and it can go on calling tools.
//
// Each step waits for the event the next one depends on: the upstream subscription
// before a touch (an update emitted before it exists reaches nobody), the session's
// record with its subscription in the store before the move, and one GET at a time on
// the new instance (a GET takes the session's stream over from the one before: an
// abandoned probe still being served would cut the test's stream off).
func TestSessionMovesToAnotherInstance(t *testing.T) {
	nodes, backend := startCluster(t)
	a := startRouter(t, "a", nodes[0].url(), backend.URL())
	b := startRouter(t, "b", nodes[1].url(), backend.URL())
	const uri = "memo://board"

	h := &rawClient{t: t}
	sid := h.initialize(a.URL())
	h.post(a.URL(), sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`)
	testwait.For(t, "a to hold the upstream subscription", 20*time.Second, func() bool { return a.Fleet.Subscriptions() == 1 })
	events, stop := h.stream(a.URL(), sid, "")
	// Two updates arrive on A's stream; the client reads the first one only.
	h.post(a.URL(), sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"`+uri+`"}}}`)
	first := nextData(t, events)
	t.Logf("first %+v", first)
	h.post(a.URL(), sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"`+uri+`"}}}`)
	// A has sent the second update when it is on the stream; the client leaves without
	// acknowledging it (it resumes from the first), so B must deliver it again.
	if missed := nextData(t, events); !strings.Contains(missed.Data, "notifications/resources/updated") {
		t.Fatalf("second event on A: %+v", missed)
	}
	stop()
	if !strings.Contains(first.Data, "notifications/resources/updated") {
		t.Fatalf("first event: %+v", first)
	}
	a.Shutdown(context.Background())
	// A wrote the session's record before it stopped; B reads it from its own NATS
	// node, where it must have arrived with the subscription for B to carry it on.
	var rec string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the session record last read on b's node: %s", rec)
		}
	})
	testwait.For(t, "the session record with its subscription on b's node", 20*time.Second, func() bool {
		rec = storedRecord(t, nodes[1].url(), "mcpr_sessions", natsbus.RecordKey(sid))
		return strings.Contains(rec, uri)
	})

	// The client comes back on B with the id of the last event it read.
	events, stop = h.resume(b.URL(), sid, first.ID)
	defer stop()
	second := nextData(t, events)
	t.Logf("second %+v", second)
	if !strings.Contains(second.Data, "notifications/resources/updated") || second.ID == first.ID {
		t.Fatalf("resumed event: %+v (first %+v)", second, first)
	}
	// The session goes on: calls work and the subscription still delivers once B holds
	// it upstream (at once when A gave it up in time, else at B's next heartbeat).
	testwait.For(t, "b to hold the upstream subscription", 20*time.Second, func() bool { return b.Fleet.Subscriptions() == 1 })
	h.post(b.URL(), sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"touch","arguments":{"uri":"`+uri+`"}}}`)
	third := nextData(t, events)
	if !strings.Contains(third.Data, uri) {
		t.Fatalf("update after the move: %+v", third)
	}
	if b.HTTP.Stats.Adopted.Load() != 1 || b.Router.Stats.Adopted.Load() != 1 {
		t.Fatalf("b adopted %d sessions and carried %d on, want 1 and 1", b.HTTP.Stats.Adopted.Load(), b.Router.Stats.Adopted.Load())
	}
}

// rawClient speaks Streamable HTTP by hand (mcpraw), to move a session between
// instances: each call names the instance's endpoint and the session.
type rawClient struct {
	t *testing.T
}

// initialize opens a session at endpoint (initialize, then initialized) and returns its id.
func (h *rawClient) initialize(endpoint string) string {
	c := &mcpraw.Client{URL: endpoint}
	if r, err := c.Initialize(context.Background(), ""); err != nil || r.Status != http.StatusOK || c.Session == "" {
		h.t.Fatalf("initialize: %v %v", err, r)
	}
	return c.Session
}

func (h *rawClient) post(endpoint, sid, body string) string {
	c := &mcpraw.Client{URL: endpoint, Session: sid}
	r, err := c.Post(context.Background(), body)
	if err != nil || r.Status >= 300 {
		h.t.Fatalf("POST %s: %v %v", body, err, r)
	}
	return string(r.Body)
}

type sseEvent = mcpraw.Event

// resume opens the session's GET stream on another instance from lastID. The instance
// answers 404 when its store did not answer in time (a loaded JetStream): like a real
// client, it tries again, a few times. Only one GET is in flight at a time, and each is
// read to its answer: a GET takes the session's stream over, so one the client gave up
// on but the instance still serves would cut off the next.
func (h *rawClient) resume(endpoint, sid, lastID string) (<-chan sseEvent, func()) {
	const attempts = 3
	for i := 1; ; i++ {
		events, stop, status := h.openStream(endpoint, sid, lastID)
		if status == http.StatusOK || i == attempts {
			if status != http.StatusOK {
				h.t.Fatalf("GET stream on the new instance: %d after %d attempts", status, attempts)
			}
			return events, stop
		}
		if status != http.StatusNotFound {
			h.t.Fatalf("GET stream on the new instance: %d", status)
		}
	}
}

// stream opens the session's GET stream and yields its events with data.
func (h *rawClient) stream(endpoint, sid, lastID string) (<-chan sseEvent, func()) {
	events, stop, status := h.openStream(endpoint, sid, lastID)
	if status != http.StatusOK {
		h.t.Fatalf("GET stream: %d", status)
	}
	return events, stop
}

// openStream is stream that returns the status of an answer other than 200 instead of
// failing.
func (h *rawClient) openStream(endpoint, sid, lastID string) (<-chan sseEvent, func(), int) {
	ctx, cancel := context.WithCancel(context.Background())
	req := (&mcpraw.Client{URL: endpoint, Session: sid}).NewRequest(ctx, http.MethodGet, "")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		h.t.Logf("GET stream: %d %s", resp.StatusCode, b)
		return nil, nil, resp.StatusCode
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer resp.Body.Close()
		mcpraw.ReadEvents(resp.Body, out)
	}()
	return out, cancel, http.StatusOK
}

func nextData(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

// TestNATSServiceBackend: backend processes joined NATS as a service on node C; routers on
// nodes A and B reach them over NATS request/reply (no URL), their sessions spread over
// the processes by the queue group, and an update one of them emits reaches a client on A.
func TestNATSServiceBackend(t *testing.T) {
	nodes := startNATS(t, 3)
	for i := 0; i < 2; i++ {
		b, err := backendsrv.New(backendsrv.Config{Name: fmt.Sprintf("svc%d", i), Tick: -1, Logger: quiet(t)})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(nodes[2].url())
		if err != nil {
			t.Fatal(err)
		}
		srv, err := transport.ServeNATS(nc, transport.NATSServeConfig{Service: "refsvc"}, b.Registry(), b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Stop(); nc.Close() })
	}
	routers := make([]*app.App, 2)
	for i := range routers {
		prefix := "svc"
		cfg := app.Config{
			Listen:   "127.0.0.1:0",
			Backends: []app.BackendConfig{{Name: "svc", NATS: "refsvc", Instances: 1, Prefix: &prefix}},
			NATS:     natsbus.Config{URL: nodes[i].url(), Name: fmt.Sprintf("r%d", i), Replicas: 3, Lease: 5 * time.Second},
		}
		routers[i] = apptest.Start(t, cfg, quiet(t), 10*time.Second)
	}
	ca, cb := connect(t, routers[0].URL()), connect(t, routers[1].URL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := ca.cs.CallTool(ctx, &mcp.CallToolParams{Name: "svc__echo", Arguments: map[string]any{"text": "over nats"}})
	if err != nil || res.IsError {
		t.Fatalf("echo over NATS: %v %+v", err, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "over nats" {
		t.Fatalf("echo result: %+v", res.Content)
	}
	const uri = "memo://board"
	if err := ca.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// The reference backend keeps resource state per process, and each router's one
	// upstream session sticks to one process: the touch goes through A, so it reaches
	// the process that holds A's (the owner's) upstream subscription.
	res, err = ca.cs.CallTool(ctx, &mcp.CallToolParams{Name: "svc__touch", Arguments: map[string]any{"uri": uri}})
	if err != nil || res.IsError {
		t.Fatalf("touch: %v %+v", err, res)
	}
	ca.waitUpdate(t, uri, 10*time.Second)
	// B reaches the service too, whichever process its session landed on.
	res, err = cb.cs.CallTool(ctx, &mcp.CallToolParams{Name: "svc__echo", Arguments: map[string]any{"text": "from b"}})
	if err != nil || res.IsError {
		t.Fatalf("echo through b: %v %+v", err, res)
	}
}

// TestListChangedReachesEveryInstance: a backend's tool list changes; every router
// instance refreshes its catalog and each client hears of it exactly once.
func TestListChangedReachesEveryInstance(t *testing.T) {
	nodes := startNATS(t, 3)
	srv := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)
	echo := func(_ context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	schema := map[string]any{"type": "object"}
	srv.AddTool(&mcp.Tool{Name: "first", InputSchema: schema}, echo)
	greet := func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	}
	srv.AddPrompt(&mcp.Prompt{Name: "hello"}, greet)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	backendURL := "http://" + ln.Addr().String()

	routers := []*app.App{
		startRouter(t, "a", nodes[0].url(), backendURL),
		startRouter(t, "b", nodes[1].url(), backendURL),
	}
	var counts, prompts [2]atomic.Int64
	sessions := make([]*mcp.ClientSession, 2)
	for i, r := range routers {
		cl := mcp.NewClient(&mcp.Implementation{Name: "watcher", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler:   func(context.Context, *mcp.ToolListChangedRequest) { counts[i].Add(1) },
			PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { prompts[i].Add(1) },
		})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.URL()}, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		sessions[i] = cs
	}
	srv.AddTool(&mcp.Tool{Name: "second", InputSchema: schema}, echo)
	for i := range counts {
		testwait.For(t, fmt.Sprintf("client %d to hear of the change", i), 15*time.Second, func() bool { return counts[i].Load() >= 1 })
	}
	// A later change travels the same way (backend, owner instance, NATS, each
	// instance, its sessions) behind any duplicate of the first: once each client has
	// heard of it, a duplicate would have arrived.
	srv.AddPrompt(&mcp.Prompt{Name: "goodbye"}, greet)
	for i := range prompts {
		testwait.For(t, fmt.Sprintf("client %d to hear of the later change", i), 15*time.Second, func() bool { return prompts[i].Load() >= 1 })
	}
	for i, cs := range sessions {
		if n := counts[i].Load(); n != 1 {
			t.Errorf("client %d heard of the change %d times, want once", i, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.ListTools(ctx, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if !slices.Contains(names, "second") {
			t.Errorf("router %d catalog not refreshed: %v", i, names)
		}
	}
}

// TestInstanceKilled: an instance dies without a word (SIGKILL): it releases nothing,
// its owner lease stays in the store. An instance that still has subscribers notices at
// once that the holder's process is gone and takes the upstream subscription over, not
// when the lease expires: the lease here is a minute, longer than the test waits, so
// only that can pass. Updates keep flowing to the survivors' clients.
func TestInstanceKilled(t *testing.T) {
	nodes, backend := startCluster(t)
	const lease = time.Minute
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: {listen: \"off\"}\nbackends:\n  - {name: ref, url: %q, prefix: \"\"}\nnats: {url: %q, name: doomed, replicas: 3, lease: %s}\n",
		backend.URL(), nodes[0].url(), lease)
	doomed := testbin.StartRouter(t, "--config", testbin.RouterConfig(t, cfg))
	bcfg := routerConfig("b", nodes[1].url(), backend.URL())
	bcfg.NATS.Lease = lease
	b := apptest.Start(t, bcfg, quiet(t), 10*time.Second)
	const uri = "memo://board"
	ca := connect(t, "http://"+doomed.Addr()+"/mcp")
	cb := connect(t, b.URL())
	subscribe(t, ca, uri) // the doomed instance subscribes first: it owns
	subscribe(t, cb, uri)
	// The doomed instance subscribed first; under load its lease may land a heartbeat
	// later, so wait for the lease store to name it (its name and a random part for
	// this process) before killing it.
	testwait.For(t, "the doomed instance to hold the owner lease", 20*time.Second, func() bool {
		return strings.HasPrefix(storedRecord(t, nodes[1].url(), "mcpr_subs", "s.*.owner"), "doomed-")
	})
	if b.Fleet.Subscriptions() != 0 {
		t.Fatal("b should not hold the upstream subscription while the first instance lives")
	}
	killed := time.Now()
	doomed.Kill()
	testwait.For(t, "b to take over long before the lease expires", lease/2, func() bool { return b.Fleet.Subscriptions() == 1 })
	t.Logf("b took the upstream subscription over %v after the kill (lease %v)", time.Since(killed).Round(time.Millisecond), lease)
	touch(t, cb, uri)
	cb.waitUpdate(t, uri, 10*time.Second)
}

// storedRecord reads, through the NATS server at natsURL, the value of the first key of
// bucket that matches filter: "" when none, the error in parentheses when the store did
// not answer.
func storedRecord(t *testing.T, natsURL, bucket, filter string) string {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	keys, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer keys.Stop()
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(e.Value())
	}
	return ""
}
