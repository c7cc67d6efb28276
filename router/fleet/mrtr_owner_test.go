package fleet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// A retry routed to the instance that owns its requestState, in one process: two
// fleets, each behind its own router, on a real NATS (the first one's embedded
// server, listening on loopback; the second connects to it as another instance does),
// in front of one 2025 backend (the Go SDK's stateful server) whose tool elicits a
// name, reports progress, then asks for a sampling. The client's requests enter each
// router as stateless requests through transport.ServeRelayed, whose output the test
// reads.

// relayClient is a transport.RelayOutput that keeps what a router sends.
type relayClient struct {
	related chan []byte
	reply   chan []byte
}

func newRelayClient() *relayClient {
	return &relayClient{related: make(chan []byte, 64), reply: make(chan []byte, 1)}
}

func (c *relayClient) Related(msg []byte) error {
	c.related <- append([]byte(nil), msg...)
	return nil
}

func (c *relayClient) Reply(msg []byte, _ int) { c.reply <- append([]byte(nil), msg...) }

// startOwnerBackend serves the asking tools on loopback: ask elicits a name, reports
// progress, then asks for a sampling; ask_once elicits a name and answers it; ask_wait elicits a name, then tells waiting and
// waits until it is cancelled, which it tells on cancelled. It returns the address.
func startOwnerBackend(t testing.TB, waiting, cancelled chan<- struct{}) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_once"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return sdktest.TextResult(sdktest.ElicitName(ctx, req.Session))
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_wait"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		if _, err := sdktest.ElicitName(ctx, req.Session); err != nil {
			return nil, nil, err
		}
		waiting <- struct{}{}
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, sdktest.AskTwice)
	return sdktest.Serve(t, srv)
}

// ownerNode is one router instance of the test: its fleet and router.
type ownerNode struct {
	f *Fleet
	r *router.Router
}

// startOwnerNode starts a fleet in front of the backend at addr on bus, sealing with
// key, behind a router.
func startOwnerNode(t testing.TB, addr string, bus *natsbus.Bus, key []byte) *ownerNode {
	t.Helper()
	return startNode(t, addr, bus, key, false)
}

// startNode is startOwnerNode with the backend's sessions per client when perClient.
func startNode(t testing.TB, addr string, bus *natsbus.Bus, key []byte, perClient bool) *ownerNode {
	t.Helper()
	url := "http://" + addr + "/mcp"
	log := slog.New(slog.DiscardHandler)
	f := New(Config{Logger: log, Bus: bus, StateKey: key, Backends: []BackendConfig{{
		Name: "ask", Timeout: 10 * time.Second, Era: Era2025, PerClient: perClient,
		Dialers: []Dialer{{Addr: url, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			return upstream.DialHTTP(ctx, url, upstream.HTTPOptions{Name: "ask"}, sink)
		}}},
	}}})
	f.Start(10 * time.Second)
	r, err := router.New(router.Config{Fleet: f, Stateless: router.StatelessOn, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	// The fleet closes first: whatever a test left in flight ends with it.
	t.Cleanup(f.Close)
	return &ownerNode{f: f, r: r}
}

// call sends a 2026-07-28 tools/call of ask to n with the further params members
// extra, and returns the client that reads its answer.
func (n *ownerNode) call(t testing.TB, extra string) *relayClient {
	t.Helper()
	c, _ := n.callTool(t, "ask", extra)
	return c
}

// callTool is call of tool; it returns the request too, whose Abandon is the client
// closing its stream.
func (n *ownerNode) callTool(t testing.TB, tool, extra string) (*relayClient, *transport.Relay) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{}},"progressToken":"p1"}` + extra + `}}`
	c := newRelayClient()
	r, err := transport.ServeRelayed(n.r, []byte(body), nil, c)
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// ownerAnswer is what the tests read of an answer.
type ownerAnswer = mcpraw.Answer

// answer waits for c's reply.
func (c *relayClient) answer(t testing.TB) ownerAnswer {
	t.Helper()
	msg := testwait.Recv(t, "the answer", 20*time.Second, c.reply)
	var a ownerAnswer
	if err := json.Unmarshal(msg, &a); err != nil {
		t.Fatalf("answer %s: %v", msg, err)
	}
	return a
}

// asked checks that a is an input_required asking method once, and returns the
// retry's members answering it with answer.
func asked(t testing.TB, a ownerAnswer, method, answer string) string {
	t.Helper()
	if a.Error != nil || a.Result.ResultType != "input_required" || len(a.Result.InputRequests) != 1 {
		t.Fatalf("answer %+v, want input_required asking %s", a, method)
	}
	for key, req := range a.Result.InputRequests {
		if !strings.Contains(string(req), `"method":"`+method+`"`) {
			t.Fatalf("input request %s, want %s", req, method)
		}
		return `,"inputResponses":{"` + key + `":` + answer + `},"requestState":"` + a.Result.RequestState + `"`
	}
	return ""
}

const (
	elicitAnswer = `{"action":"accept","content":{"name":"Ann"}}`
	sampleAnswer = `{"role":"assistant","model":"m","content":{"type":"text","text":"hello"}}`
)

// startNATSPair starts the first instance's bus (an embedded server listening on
// loopback) and the second's, connected to it.
func startNATSPair(t testing.TB) (a, b *natsbus.Bus) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	a, err := natsbus.Start(natsbus.Config{Listen: "127.0.0.1:0", Token: "owner-test", NoJetStream: true}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err = natsbus.Start(natsbus.Config{URL: a.ClientURL(), Token: "owner-test"}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return a, b
}

// TestRetryRoutedToOwner: the call starts on A; its first retry lands on B, which
// sends it to A: the progress the backend reports after the client's answer reaches
// the client through B, then the next round (owned by A) comes back through B; the
// retry of that round, on B again, gets the tool's result. A tampered state is refused
// by B itself; a client that closes its stream on B cancels the call on A; a retry
// whose owner has no subscriber any more (gone) is answered at once.
func TestRetryRoutedToOwner(t *testing.T) {
	waiting, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	addr := startOwnerBackend(t, waiting, cancelled)
	busA, busB := startNATSPair(t)
	key := make([]byte, 32)
	copy(key, "a test key shared by both fleets")
	a := startOwnerNode(t, addr, busA, key)
	b := startOwnerNode(t, addr, busB, key)

	first := a.call(t, "").answer(t)
	retry := asked(t, first, "elicitation/create", elicitAnswer)

	c := b.call(t, retry)
	second := c.answer(t)
	retry = asked(t, second, "sampling/createMessage", sampleAnswer)
	if !strings.Contains(second.Result.RequestState, ":"+hexInstance(a)+":") {
		t.Fatalf("the next round's state %q is not A's", second.Result.RequestState)
	}
	select {
	case msg := <-c.related:
		if !strings.Contains(string(msg), `"notifications/progress"`) || !strings.Contains(string(msg), `"named Ann"`) ||
			!strings.Contains(string(msg), `"progressToken":"p1"`) {
			t.Fatalf("relayed message %s, want the backend's progress under the retry's token", msg)
		}
	default:
		t.Fatal("the progress the owner saw did not come through B before its answer")
	}

	done := b.call(t, retry).answer(t)
	if done.Error != nil || len(done.Result.Content) != 1 || done.Result.Content[0].Text != "Ann:hello" {
		t.Fatalf("last retry through B: %+v, want the tool's result", done)
	}

	t.Run("tampered", func(t *testing.T) {
		retry := asked(t, a.call(t, "").answer(t), "elicitation/create", elicitAnswer)
		i := strings.Index(retry, `"requestState":"mcprouter:`) + len(`"requestState":"mcprouter:`) + 17 + 5
		bad := retry[:i] + string(retry[i]^1) + retry[i+1:]
		got := b.call(t, bad).answer(t)
		if got.Error == nil || !strings.Contains(got.Error.Message, "failed verification") {
			t.Fatalf("tampered state on B: %+v, want a refusal saying it failed verification", got)
		}
		if got := b.call(t, retry).answer(t); got.Error != nil || got.Result.ResultType != "input_required" {
			t.Fatalf("the good retry after the refused one: %+v", got)
		}
	})

	t.Run("cancelled on the receiver", func(t *testing.T) {
		c, _ := a.callTool(t, "ask_wait", "")
		retry := asked(t, c.answer(t), "elicitation/create", elicitAnswer)
		c, r := b.callTool(t, "ask_wait", retry)
		testwait.Recv(t, "the backend's call resumed on its owner", 20*time.Second, waiting)
		if n := b.f.InFlight(); n != 1 {
			t.Errorf("B has %d requests in flight, want the retry it sent (a shutdown waits for it)", n)
		}
		r.Abandon() // the client closes its stream on B
		testwait.Recv(t, "the call cancelled on its owner", 20*time.Second, cancelled)
		if msg := testwait.Recv(t, "the cancelled retry's end", 20*time.Second, c.reply); len(msg) != 0 {
			t.Fatalf("a cancelled retry was answered %s", msg)
		}
		testwait.For(t, "B's sent retry to end", 20*time.Second, func() bool { return b.f.InFlight() == 0 })
	})

	t.Run("owner gone", func(t *testing.T) {
		retry := asked(t, a.call(t, "").answer(t), "elicitation/create", elicitAnswer)
		a.f.srv.park.relay.sub.Unsubscribe() // as when A's process is gone: no responders
		got := b.call(t, retry).answer(t)
		if got.Error == nil || !strings.Contains(got.Error.Message, "is gone") {
			t.Fatalf("retry of a gone owner's state: %+v, want an error saying its owner is gone", got)
		}
	})
}

// hexInstance is n's instance id as its states name it.
func hexInstance(n *ownerNode) string { return hex.EncodeToString(n.f.srv.park.instance[:]) }

// BenchmarkRetry: one call of ask_once, its input_required and the retry that
// completes it, the retry landing on the owner (local) or on the other instance, which
// sends it to the owner over NATS (routed): the difference is the cost of the hop.
//
//	go test -run XXX -bench BenchmarkRetry -benchtime 2s -count 3 ./router/fleet/
func BenchmarkRetry(b *testing.B) {
	addr := startOwnerBackend(b, make(chan struct{}, 1), make(chan struct{}, 1))
	busA, busB := startNATSPair(b)
	key := make([]byte, 32)
	owner := startOwnerNode(b, addr, busA, key)
	other := startOwnerNode(b, addr, busB, key)
	// Without the gathering window (20 ms, for parallel asks) the time is the work's.
	owner.f.srv.park.gather, other.f.srv.park.gather = 0, 0
	for _, bc := range []struct {
		name string
		to   *ownerNode
	}{{"local", owner}, {"routed", other}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, _ := owner.callTool(b, "ask_once", "")
				retry := asked(b, c.answer(b), "elicitation/create", elicitAnswer)
				c, _ = bc.to.callTool(b, "ask_once", retry)
				if a := c.answer(b); a.Error != nil || len(a.Result.Content) != 1 {
					b.Fatalf("retry: %+v", a)
				}
			}
		})
	}
}

// TestShutdownEndsParkedCalls: a call parked for its client's retry does not hold the
// router's shutdown. The router's Close ends it at once (the backend's elicitation is
// refused, the call cancelled upstream, the entry released) where it used to wait the
// whole grace period for a backend that waited for an answer no retry would bring; and
// once the fleet is closing, a backend's request for input is refused at once instead
// of parking a call.
func TestShutdownEndsParkedCalls(t *testing.T) {
	n := startOwnerNode(t, startOwnerBackend(t, nil, nil), nil, nil)
	asked(t, n.call(t, "").answer(t), "elicitation/create", elicitAnswer)
	if got := n.f.srv.park.count(); got != 1 {
		t.Fatalf("%d calls parked, want 1", got)
	}

	n.f.EndParked()
	if got := n.f.srv.park.count(); got != 0 || n.f.Stats.ServerRequestsExpired.Load() != 1 {
		t.Fatalf("after EndParked: %d parked, %d ended, want 0 and 1", got, n.f.Stats.ServerRequestsExpired.Load())
	}
	// A call that asks for input now is not parked: the backend hears why.
	a := n.call(t, "").answer(t)
	if said := fmt.Sprint(a.Error, a.Result.Content); a.Result.ResultType == "input_required" || !strings.Contains(said, shuttingDown) {
		t.Fatalf("a call asking for input while closing: %+v, want its failure saying %q", a, shuttingDown)
	}
	if got := n.f.srv.park.count(); got != 0 {
		t.Fatalf("%d calls parked while closing, want 0", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.r.Close(ctx); err != nil {
		t.Fatalf("router Close: %v (a parked call held it)", err)
	}
	if got := n.f.InFlight(); got != 0 {
		t.Fatalf("%d requests in flight after Close, want 0", got)
	}
}
