package fleet

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestParkedEntry follows a stateless request through the table's parked state: parked,
// it is out of the client index (a cancellation of the answered request finds
// nothing), neither a backend's answer nor the sweeps take it, and only a stateless
// request that was sent can be parked; claimed by a retry, it is sent again under the
// retry's id and a backend's answer takes it; an unclaimed one leaves through
// takeParked alone.
func TestParkedEntry(t *testing.T) {
	tb, c := newTable(), testConn()
	s := new(router.Session)
	stateless := func(id string) *entry {
		e := request(s, id)
		e.x.Stateless = true
		e.backend = &backend{}
		tb.add(e)
		return e
	}
	yes := func(*entry) bool { return true }

	e := stateless("1")
	if tb.park(e.id, yes) != nil {
		t.Fatal("a routed request was parked")
	}
	tb.bind(e, c)
	if tb.park(e.id, func(*entry) bool { return false }) != nil || e.state != stateSent {
		t.Fatal("parked although may refused")
	}
	x := e.x
	if got := tb.park(e.id, yes); got != x || e.state != stateParked || e.x != nil || e.sess != nil || !tb.parked(e.id) {
		t.Fatalf("park: exchange %p (want %p), state %v", got, x, e.state)
	}
	if tb.takeClient(s, []byte("1")) != nil || tb.take(e.id, stateAnswered) != nil ||
		len(tb.takeConn(c, nil)) != 0 || len(tb.expired(1<<62, nil)) != 0 {
		t.Fatal("a parked request was taken by the in-flight paths")
	}
	if tb.len() != 1 {
		t.Fatalf("table holds %d, want the parked one", tb.len())
	}

	retry := &transport.Exchange{}
	retry.Msg.ID = []byte(`"r"`)
	s2 := new(router.Session)
	if !tb.claim(e.id, s2, retry, 0) || e.state != stateSent || e.x != retry || e.sess != s2 || retry.Tag != e || tb.parked(e.id) {
		t.Fatalf("claim: state %v", e.state)
	}
	if tb.claim(e.id, s2, retry, 0) {
		t.Fatal("claimed twice")
	}
	if got := tb.take(e.id, stateAnswered); got != e || tb.len() != 0 {
		t.Fatal("the backend's answer did not take the claimed request")
	}

	plain := request(s, "2")
	plain.backend = &backend{}
	tb.add(plain)
	tb.bind(plain, c)
	if tb.park(plain.id, yes) != nil {
		t.Fatal("a session's request was parked")
	}

	e = stateless("3")
	tb.bind(e, c)
	tb.park(e.id, yes)
	if tb.takeParked(plain.id) != nil {
		t.Fatal("takeParked took a request that is not parked")
	}
	if got := tb.takeParked(e.id); got != e || e.state != stateExpired || tb.claim(e.id, s2, retry, 0) {
		t.Fatal("takeParked")
	}
}

// TestOpenState: what a retry's requestState is refused for, each with its own message
// and invalid params (HTTP 400): altered, another principal's (or an anonymous
// client's), another request's, expired (the sealer's clock moved past the TTL, no
// waiting), sealed by another router process; and what a good one names.
func TestOpenState(t *testing.T) {
	life := newLifecycle()
	t.Cleanup(life.stop)
	p := newParking(newServerRequests(life, newTable(), slog.New(slog.DiscardHandler), &Stats{}, 4, 0), nil, nil)
	now := time.Unix(1_800_000_000, 0)
	p.sealer.Now = func() time.Time { return now }

	retry := func(principal, args string) *transport.Exchange {
		x := &transport.Exchange{Raw: []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sample","arguments":` + args + `}}`)}
		if err := codec.Scan(x.Raw, &x.Msg); err != nil {
			t.Fatal(err)
		}
		if principal != "" {
			x.Principal = &auth.Principal{Issuer: "https://issuer", Subject: principal}
		}
		return x
	}
	orig := retry("alice", `{"prompt":"hi"}`)
	pk := &parked{entryID: 42, principal: principalKey(orig.Principal), digest: modern.RequestDigest(&orig.Msg), ttl: time.Minute,
		shown: []ask{{key: "input-1", method: "sampling/createMessage"}}}
	p.mu.Lock()
	res := p.roundLocked(pk)
	p.mu.Unlock()
	state := modern.RequestState(res) // base64url: nothing escaped
	if !ours(state) {
		t.Fatalf("input_required %s: no state of the router's", res)
	}

	if _, id, seq, _, rej := p.open(state, retry("alice", `{ "prompt" : "hi" }`)); !rej.OK() || id != 42 || seq != pk.seq {
		t.Fatalf("a good state: entry %d round %d (%s), want entry 42 round %d", id, seq, rej.Message, pk.seq)
	}

	tampered := append([]byte(nil), state...)
	tampered[len(statePrefix)+ownerSize+5] ^= 1 // in the sealed part
	// another process (another key and instance), and one sharing this one's key
	other := newParking(p.srv, nil, nil)
	sameKey := newParking(p.srv, nil, nil)
	sameKey.sealer = p.sealer
	forged := append([]byte(statePrefix+hex.EncodeToString(sameKey.instance[:])), state[len(statePrefix)+ownerSize-1:]...)
	for _, tc := range []struct {
		name    string
		p       *parking
		state   []byte
		x       *transport.Exchange
		advance time.Duration
		want    string
	}{
		{"tampered", p, tampered, retry("alice", `{"prompt":"hi"}`), 0, "failed verification"},
		{"another principal", p, state, retry("bob", `{"prompt":"hi"}`), 0, "another principal"},
		{"anonymous", p, state, retry("", `{"prompt":"hi"}`), 0, "another principal"},
		{"another request", p, state, retry("alice", `{"prompt":"bye"}`), 0, "another request"},
		{"after the TTL", p, state, retry("alice", `{"prompt":"hi"}`), time.Minute, "expired"},
		{"another instance", other, state, retry("alice", `{"prompt":"hi"}`), 0, "another router instance"},
		{"owner part rewritten", sameKey, forged, retry("alice", `{"prompt":"hi"}`), 0, "another router instance"},
		{"owner part garbled", p, []byte(statePrefix + "zz" + string(state[len(statePrefix)+2:])), retry("alice", `{"prompt":"hi"}`), 0, "failed verification"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now = now.Add(tc.advance)
			defer func() { now = now.Add(-tc.advance) }()
			_, _, _, _, rej := tc.p.open(tc.state, tc.x)
			if rej.Code != codec.CodeInvalidParams || rej.Status != 400 || !strings.Contains(rej.Message, tc.want) {
				t.Fatalf("refusal %+v, want invalid params (400) saying %q", rej, tc.want)
			}
		})
	}
}

// TestOpenSharedState: instances that share the cluster's key open each other's
// states: the owner is the one sealed inside (a rewritten clear owner part changes
// nothing), and the principal, request and integrity checks hold on every instance.
func TestOpenSharedState(t *testing.T) {
	life := newLifecycle()
	t.Cleanup(life.stop)
	srv := newServerRequests(life, newTable(), slog.New(slog.DiscardHandler), &Stats{}, 4, 0)
	key := make([]byte, 32)
	copy(key, "the cluster's shared test key")
	owner, peer := newParking(srv, nil, key), newParking(srv, nil, key)

	x := &transport.Exchange{Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sample","arguments":{"prompt":"hi"}}}`)}
	if err := codec.Scan(x.Raw, &x.Msg); err != nil {
		t.Fatal(err)
	}
	pk := &parked{entryID: 7, digest: modern.RequestDigest(&x.Msg), ttl: time.Minute, shown: []ask{{key: "input-1", method: "sampling/createMessage"}}}
	owner.mu.Lock()
	state := modern.RequestState(owner.roundLocked(pk))
	owner.mu.Unlock()

	got, id, seq, _, rej := peer.open(state, x)
	if !rej.OK() || got != owner.instance || id != 7 || seq != pk.seq {
		t.Fatalf("peer opened owner %x entry %d round %d (%s), want %x, 7, %d", got, id, seq, rej.Message, owner.instance, pk.seq)
	}
	moved := append([]byte(statePrefix+hex.EncodeToString(peer.instance[:])), state[len(statePrefix)+ownerSize-1:]...)
	if got, _, _, _, rej := peer.open(moved, x); !rej.OK() || got != owner.instance {
		t.Fatalf("clear owner rewritten: owner %x (%s), want the sealed one %x", got, rej.Message, owner.instance)
	}
	x.Principal = &auth.Principal{Subject: "mallory"}
	if _, _, _, _, rej := peer.open(state, x); !strings.Contains(rej.Message, "another principal") {
		t.Fatalf("another principal on the peer: %+v", rej)
	}
	x.Principal = nil
	bad := append([]byte(nil), state...)
	bad[len(bad)-3] ^= 1
	if _, _, _, _, rej := peer.open(bad, x); !strings.Contains(rej.Message, "failed verification") {
		t.Fatalf("tampered on the peer: %+v", rej)
	}
}

// TestParkedAmidPooledCalls: a call parked for its client's input (its exchange answered
// input_required, its Session's request finished) is resumed by its retry after many
// plain stateless calls have taken pooled Sessions and given them back, concurrently,
// and the retry gets the backend's answer; a principal's upstream session, opened by
// the first plain call's Session (a per-client backend), keeps that Session as its
// owner while the calls after it recycle theirs (router.Session.Keep). Under -race, a Session
// recycled under one of its holders races with the write that clears it.
func TestParkedAmidPooledCalls(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_once"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return sdktest.TextResult(sdktest.ElicitName(ctx, req.Session))
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "plain"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return sdktest.TextResult("plain", nil)
	})
	addr := sdktest.Serve(t, srv)
	for _, perClient := range []bool{false, true} {
		n := startNode(t, addr, nil, nil, perClient)
		plainCalls(t, n, 1, 1) // per client: its Session owns the principal's upstream session
		retry := asked(t, n.callTool1(t, "ask_once", "").answer(t), "elicitation/create", elicitAnswer)
		plainCalls(t, n, 4, 25)
		if a := n.callTool1(t, "ask_once", retry).answer(t); a.Error != nil || len(a.Result.Content) != 1 || a.Result.Content[0].Text != "Ann" {
			t.Fatalf("per-client %v: the parked call's retry got %+v, want its answer", perClient, a)
		}
		if !perClient {
			continue
		}
		n.f.sessions.principals.mu.Lock()
		for id, ps := range n.f.sessions.principals.m {
			if s := ps.st.sess; !s.Stateless() || s.Version() != router.V20260728 || string(s.ClientCapabilities()) != `{"sampling":{},"elicitation":{}}` {
				t.Errorf("principal %q's owner reads version %q, caps %s: recycled", id, s.Version(), s.ClientCapabilities())
			}
		}
		n.f.sessions.principals.mu.Unlock()
	}
}

// callTool1 is ownerNode.callTool without the Relay.
func (n *ownerNode) callTool1(t testing.TB, tool, extra string) *relayClient {
	t.Helper()
	c, _ := n.callTool(t, tool, extra)
	return c
}

// plainCalls makes calls of tool plain on n from each of workers goroutines at once,
// each answered before the next, and checks their answers.
func plainCalls(t *testing.T, n *ownerNode, workers, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				if a := n.callTool1(t, "plain", "").answer(t); a.Error != nil || len(a.Result.Content) != 1 || a.Result.Content[0].Text != "plain" {
					t.Errorf("a plain call got %+v", a)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestParkedEndsWithItsSession: a call parked for its client's retry ends when the
// fleet learns that its upstream session is lost (connLost, as the connection's watcher
// calls it): the backend's requests it waits to answer went with the session, so the
// retry is refused at once as a request that ended. Before, the retry claimed the call
// and sent its answers into the lost session, and its client waited for the call's
// deadline. (The session here is still up, so that the test does not wait for a
// connection's close: with the old code the retry would have been answered.)
func TestParkedEndsWithItsSession(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_once"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return sdktest.TextResult(sdktest.ElicitName(ctx, req.Session))
	})
	n := startNode(t, sdktest.Serve(t, srv), nil, nil, false)
	retry := asked(t, n.callTool1(t, "ask_once", "").answer(t), "elicitation/create", elicitAnswer)
	p := n.f.srv.park
	p.mu.Lock()
	var c *upConn
	for _, pk := range p.m {
		c = pk.conn
	}
	p.mu.Unlock()
	if c == nil {
		t.Fatal("no call parked")
	}
	n.f.connLost(c, errors.New("test: session lost"))
	if got := p.count(); got != 0 {
		t.Fatalf("%d calls parked on the lost session, want 0", got)
	}
	a := n.callTool1(t, "ask_once", retry).answer(t)
	if a.Error == nil || !strings.Contains(a.Error.Message, "its request ended") {
		t.Fatalf("the retry of a call whose session was lost got %+v, want its request ended", a)
	}
}
