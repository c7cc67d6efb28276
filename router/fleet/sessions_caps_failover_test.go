package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// declaredElicitation is what the 2026-07-28 client of these tests declares: elicitation
// alone, where the router's shared sessions declare elicitation, roots and sampling.
const declaredElicitation = `{"elicitation":{}}`

// capsReplica is one replica of a real 2025 backend (the Go SDK's server on loopback,
// Streamable HTTP with JSON replies or legacy HTTP+SSE), whose read-only tool who
// reports to seen the replica and the capabilities its session's client declared in
// initialize, and answers with the replica's number; while hang is set, the first
// call blocks until its connection goes.
type capsReplica struct {
	n    int
	url  string
	hs   *http.Server
	seen chan<- capsSeen
	hang *atomic.Bool
	// unavailable makes the replica answer every POST 503, as one shedding load does.
	unavailable atomic.Bool
}

// capsSeen is one tools/call a replica got: where, and on what session.
type capsSeen struct {
	replica int
	caps    *mcp.ClientCapabilities
}

// startCapsReplica serves replica n on addr (host:port, "" for any port) until the
// test ends (or kill).
func startCapsReplica(t *testing.T, n int, addr string, legacy bool, seen chan<- capsSeen, hang *atomic.Bool) *capsReplica {
	t.Helper()
	r := &capsReplica{n: n, seen: seen, hang: hang}
	srv := mcp.NewServer(&mcp.Implementation{Name: "replica", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "who", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			var caps *mcp.ClientCapabilities
			if p := req.Session.InitializeParams(); p != nil {
				caps = p.Capabilities
			}
			hang := r.hang.CompareAndSwap(true, false) // before the test hears of the call
			r.seen <- capsSeen{replica: n, caps: caps}
			if hang {
				<-ctx.Done() // the replica is killed under it
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "replica " + strconv.Itoa(n)}}}, nil, nil
		})
	get := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: true})
	if legacy {
		h = mcp.NewSSEHandler(get, nil)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.url = "http://" + l.Addr().String() + "/mcp"
	r.hs = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost && r.unavailable.Load() {
			http.Error(w, "shedding load", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, req)
	})}
	go r.hs.Serve(l)
	t.Cleanup(r.kill)
	return r
}

// kill closes the replica's listener and every connection at once, as a replica whose
// process is killed loses them.
func (r *capsReplica) kill() { r.hs.Close() }

// capsPair is a router in front of backend "a" of two capsReplicas.
type capsPair struct {
	f    *Fleet
	r    *router.Router
	reps [2]*capsReplica
	seen chan capsSeen
	hang atomic.Bool
	// refuse makes a replica's dialer refuse new sessions, as an instance that went
	// down refuses them before its health check has seen it.
	refuse [2]atomic.Bool
	// gate, when set, holds a replica's new sessions until it is closed.
	gate [2]atomic.Pointer[chan struct{}]
}

// startCapsPair starts the two replicas and a fleet and router in front of them; the
// backend's sessions are per client when perClient.
func startCapsPair(t *testing.T, legacy, perClient bool) *capsPair {
	t.Helper()
	p := &capsPair{seen: make(chan capsSeen, 8)}
	var dialers []Dialer
	for i := range p.reps {
		rep := startCapsReplica(t, i, "", legacy, p.seen, &p.hang)
		p.reps[i] = rep
		dialers = append(dialers, Dialer{Addr: rep.url, Dial: func(ctx context.Context, sink upstream.Sink) (upstream.Conn, error) {
			if p.refuse[i].Load() {
				return nil, fmt.Errorf("%w: replica %d refuses", upstream.ErrBackendDown, i)
			}
			if g := p.gate[i].Load(); g != nil {
				<-*g
			}
			if legacy {
				return upstream.DialSSE(ctx, rep.url, upstream.HTTPOptions{Name: "a"}, sink)
			}
			return upstream.DialHTTP(ctx, rep.url, upstream.HTTPOptions{Name: "a"}, sink)
		}})
	}
	log := slog.New(slog.DiscardHandler)
	p.f = New(Config{Logger: log, HealthInterval: time.Hour, Backends: []BackendConfig{{
		Name: "a", Timeout: 20 * time.Second, Era: Era2025, PerClient: perClient, Dialers: dialers,
	}}})
	p.f.Start(10 * time.Second)
	var err error
	if p.r, err = router.New(router.Config{Fleet: p.f, Stateless: router.StatelessOn, Logger: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.r.Close(context.Background()) })
	t.Cleanup(p.f.Close)
	testwait.For(t, "both replicas usable", 10*time.Second, func() bool {
		in := p.f.set.all()[0].instances
		return in[0].usable() && in[1].usable()
	})
	return p
}

// call sends a 2026-07-28 tools/call of who from a client declaring
// declaredElicitation, and returns the client that reads its answer.
func (p *capsPair) call(t *testing.T) *statusClient {
	t.Helper()
	return sendWithCaps(t, p.r, "who", declaredElicitation)
}

// answer reads c's answer: the text of its result, or fails the test on an error.
func (p *capsPair) answer(t *testing.T, c *statusClient) string {
	t.Helper()
	r := testwait.Recv(t, "the answer", 30*time.Second, c.reply)
	var a struct {
		Result struct{ Content []struct{ Text string } }
		Error  *struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(r.msg, &a); err != nil || a.Error != nil || len(a.Result.Content) != 1 {
		t.Fatalf("answer %s (%v), want one text", r.msg, err)
	}
	return a.Result.Content[0].Text
}

// firstCall makes the client's first call and answers it, and says which replica got
// it: the one holding the client's session from then on.
func (p *capsPair) firstCall(t *testing.T) int {
	t.Helper()
	c := p.call(t)
	first := p.got(t, "the first call")
	p.answer(t, c)
	return first
}

// callPreferring makes a call while replica want is the less loaded of the two, which
// pick prefers, and says which replica got it (what names it in a failure).
func (p *capsPair) callPreferring(t *testing.T, want int, what string) (*statusClient, int) {
	t.Helper()
	other := p.f.set.all()[0].instances[1-want]
	other.outstanding.Add(1 << 20)
	defer other.outstanding.Add(-(1 << 20))
	c := p.call(t)
	return c, p.got(t, what)
}

// got reads the next call a replica got and checks that the session it came on was
// initialized with exactly what the client declared: elicitation, and neither roots
// nor sampling, which the router's shared session declares.
func (p *capsPair) got(t *testing.T, what string) int {
	t.Helper()
	s := testwait.Recv(t, what, 30*time.Second, p.seen)
	if c := s.caps; c == nil || c.Elicitation == nil || c.Sampling != nil || c.RootsV2 != nil {
		raw, _ := json.Marshal(s.caps)
		t.Fatalf("%s: replica %d got the call on a session that declared %s, want %s", what, s.replica, raw, declaredElicitation)
	}
	return s.replica
}

// TestCapsFailoverLost: a 2026-07-28 client's call in front of a shared (or per-client)
// 2025 backend runs on a session declaring the client's capabilities (or its
// principal's); its replica is killed under it, before any byte of the answer; the call
// (a read-only tool) goes to the other replica on a session declaring the same
// capabilities, opened there for it, never on that replica's shared session, which
// declares the router's. Over Streamable HTTP the lost exchange's Send sees it
// (forward_retry.go); over legacy HTTP+SSE the dropped stream does (forward_failover.go,
// through a stand-in while the session opens).
func TestCapsFailoverLost(t *testing.T) {
	for _, tc := range []struct {
		name              string
		legacy, perClient bool
	}{
		{"http/caps", false, false},
		{"http/principal", false, true},
		{"sse/caps", true, false},
		{"sse/principal", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startCapsPair(t, tc.legacy, tc.perClient)
			p.hang.Store(true)
			c := p.call(t)
			first := p.got(t, "the call")
			p.reps[first].kill()
			second := p.got(t, "the call sent again")
			if second == first {
				t.Fatalf("the call was sent again to replica %d, which was killed", first)
			}
			if text := p.answer(t, c); text != "replica "+strconv.Itoa(second) {
				t.Fatalf("answer %q, want replica %d's", text, second)
			}
			if n := p.f.Stats.Failovers.Load(); n != 1 {
				t.Fatalf("Failovers = %d, want 1", n)
			}
			select {
			case s := <-p.seen:
				t.Fatalf("replica %d got the call once more", s.replica)
			default:
			}
		})
	}
}

// TestCapsFailoverDown: the replica holding a 2026-07-28 client's session by declared
// capabilities (or its principal's) is killed, or answers 503, and the client's next
// call is routed there before the health check has seen it: refused, it goes to the
// other replica on a session declaring the client's capabilities, opened there for it.
func TestCapsFailoverDown(t *testing.T) {
	for _, tc := range []struct {
		perClient, shed bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run("perClient="+strconv.FormatBool(tc.perClient)+"/503="+strconv.FormatBool(tc.shed), func(t *testing.T) {
			p := startCapsPair(t, false, tc.perClient)
			first := p.firstCall(t)
			if tc.shed {
				p.reps[first].unavailable.Store(true)
			} else {
				p.reps[first].kill()
			}
			c, second := p.callPreferring(t, first, "the call after the kill") // the killed one
			if second == first {
				t.Fatalf("replica %d answered after it was killed", first)
			}
			if text := p.answer(t, c); text != "replica "+strconv.Itoa(second) {
				t.Fatalf("answer %q, want replica %d's", text, second)
			}
			if tc.shed && p.f.Stats.Failovers.Load() != 1 {
				t.Fatalf("Failovers = %d, want 1: the 503 moved the call", p.f.Stats.Failovers.Load())
			}
		})
	}
}

// TestCapsSessionRenewed: the replica holding a 2026-07-28 client's session by declared
// capabilities (or its principal's) restarts and forgets its sessions; the client's
// next call there renews the session by replaying its initialize, which declares the
// client's capabilities again, not the router's.
func TestCapsSessionRenewed(t *testing.T) {
	for _, perClient := range []bool{false, true} {
		t.Run("perClient="+strconv.FormatBool(perClient), func(t *testing.T) {
			p := startCapsPair(t, false, perClient)
			first := p.firstCall(t)
			old := p.reps[first]
			old.kill()
			p.reps[first] = startCapsReplica(t, first, strings.TrimSuffix(strings.TrimPrefix(old.url, "http://"), "/mcp"), false, p.seen, &p.hang)
			// Each upstream session's GET stream drops with the old process; the new
			// one does not know the session, which is renewed: the shared one and the
			// client's.
			in := p.f.set.all()[0].instances[first]
			testwait.For(t, "both sessions with the restarted replica renewed", 20*time.Second, func() bool { return in.Renewed.Load() >= 2 })
			c, second := p.callPreferring(t, first, "the call after the restart")
			if text := p.answer(t, c); text != "replica "+strconv.Itoa(second) {
				t.Fatalf("answer %q, want replica %d's", text, second)
			}
			if second != first {
				t.Fatalf("replica %d answered, want the restarted one, %d", second, first)
			}
		})
	}
}

// TestCapsOpenRefused: a 2026-07-28 client's call is routed to a replica that refuses to
// open the session declaring the client's capabilities (or its principal's): nothing
// was sent, so the call goes to the other replica on such a session opened there, and
// the refusing replica is out of the rotation until its health check sees it again.
func TestCapsOpenRefused(t *testing.T) {
	for _, perClient := range []bool{false, true} {
		t.Run("perClient="+strconv.FormatBool(perClient), func(t *testing.T) {
			p := startCapsPair(t, false, perClient)
			p.refuse[0].Store(true)
			c, got := p.callPreferring(t, 0, "the call")
			if text := p.answer(t, c); got != 1 || text != "replica 1" {
				t.Fatalf("replica %d got the call, answer %q; want replica 1", got, text)
			}
			if p.f.set.all()[0].instances[0].healthy.Load() {
				t.Fatal("the refusing replica is still in the rotation")
			}
		})
	}
}

// TestCapsFailoverNoSession: a 2026-07-28 client's call is lost with its replica, and
// the other replica refuses to open a session declaring the client's capabilities: the
// call is not sent on that replica's shared session, and the client gets -32010 saying
// why, over Streamable HTTP (forward_retry.go) and legacy SSE (forward_failover.go).
func TestCapsFailoverNoSession(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run("legacy="+strconv.FormatBool(legacy), func(t *testing.T) {
			p := startCapsPair(t, legacy, false)
			p.hang.Store(true)
			c := p.call(t)
			first := p.got(t, "the call")
			p.refuse[1-first].Store(true)
			p.reps[first].kill()
			r := testwait.Recv(t, "the answer", 30*time.Second, c.reply)
			var a struct {
				Error *struct {
					Code    int
					Message string
				}
			}
			if err := json.Unmarshal(r.msg, &a); err != nil || a.Error == nil || a.Error.Code != codec.CodeBackendUnavailable ||
				!strings.Contains(a.Error.Message, "could not open a session declaring the client's capabilities") {
				t.Fatalf("answer %s, want -32010 saying no session declaring the client's capabilities could be opened", r.msg)
			}
			select {
			case s := <-p.seen:
				t.Fatalf("replica %d got the call again", s.replica)
			default:
			}
		})
	}
}

// TestCapsFailoverCancelledWhileOpening: a 2026-07-28 client's call lost with its legacy
// SSE replica waits on a stand-in while the other replica's session declaring its
// capabilities opens; the client goes away meanwhile. The call is not sent once the
// session is open, and nothing stays counted in flight or outstanding.
func TestCapsFailoverCancelledWhileOpening(t *testing.T) {
	p := startCapsPair(t, true, false)
	p.hang.Store(true)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"who","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + declaredElicitation + `}}}`
	relay, err := transport.ServeRelayed(p.r, []byte(body), nil, &statusClient{reply: make(chan statusReply, 1)})
	if err != nil {
		t.Fatal(err)
	}
	first := p.got(t, "the call")
	gate := make(chan struct{})
	p.gate[1-first].Store(&gate)
	failovers := p.f.Stats.Failovers.Load()
	p.reps[first].kill()
	testwait.For(t, "the call moved to a stand-in", 20*time.Second, func() bool { return p.f.Stats.Failovers.Load() > failovers })
	relay.Abandon()
	testwait.For(t, "the call cancelled", 20*time.Second, func() bool { return p.f.InFlight() == 0 })
	close(gate)
	ins := p.f.set.all()[0].instances
	other := ins[1-first]
	testwait.For(t, "the other replica's session declaring the client's capabilities opened", 20*time.Second, func() bool {
		ss := p.f.sessions
		ss.caps.mu.Lock()
		defer ss.caps.mu.Unlock()
		cc := ss.caps.m[other][declaredElicitation]
		return cc != nil && cc.c != nil
	})
	// A later call of a client declaring the same goes on that session: the only call
	// the other replica gets.
	if text := p.answer(t, p.call(t)); text != "replica "+strconv.Itoa(1-first) {
		t.Fatalf("a later call: %q, want replica %d's", text, 1-first)
	}
	p.got(t, "the later call")
	testwait.For(t, "nothing outstanding", 20*time.Second, func() bool { return ins[0].outstanding.Load() == 0 && other.outstanding.Load() == 0 })
	select {
	case s := <-p.seen:
		t.Fatalf("replica %d got the cancelled call", s.replica)
	default:
	}
}

// TestCapsEjected: the replica holding a 2026-07-28 client's session by declared
// capabilities (or its principal's) is ejected by its health check; the client's next
// call goes to the other replica on a session declaring its capabilities, opened there.
func TestCapsEjected(t *testing.T) {
	for _, perClient := range []bool{false, true} {
		t.Run("perClient="+strconv.FormatBool(perClient), func(t *testing.T) {
			p := startCapsPair(t, false, perClient)
			first := p.firstCall(t)
			p.f.set.all()[0].instances[first].healthy.Store(false) // as two failed checks leave it
			c := p.call(t)
			if second := p.got(t, "the call after the ejection"); second == first {
				t.Fatalf("the ejected replica %d got the call", first)
			}
			if text := p.answer(t, c); text != "replica "+strconv.Itoa(1-first) {
				t.Fatalf("answer %q, want replica %d's", text, 1-first)
			}
		})
	}
}
