package main

// A 2026-07-28 client whose call's replica is killed (issue 12): the real router in
// front of two replicas of a real 2025 backend (the Go SDK's server on loopback), the Go
// SDK's client on its default revision declaring elicitation alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// whoSeen is one tools/call of who a replica got, and the capabilities the client of
// the session it came on declared in initialize.
type whoSeen struct {
	replica int
	caps    *mcp.ClientCapabilities
}

// startWhoReplica serves replica n of a 2025 backend (Streamable HTTP with sessions and
// JSON replies, or legacy HTTP+SSE) whose read-only tool who reports each call to seen
// and answers with the replica's number; the first call while hang is set blocks until
// its connection goes. It returns the MCP endpoint's URL (legacy: ending in /sse, which
// tells the router) and the server, whose Close kills the replica's connections at once.
func startWhoReplica(t *testing.T, n int, legacy bool, seen chan<- whoSeen, hang *atomic.Bool) (string, *http.Server) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "who", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "who", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			s := whoSeen{replica: n}
			if p := req.Session.InitializeParams(); p != nil {
				s.caps = p.Capabilities
			}
			hanging := hang.CompareAndSwap(true, false) // before the test hears of the call
			seen <- s
			if hanging {
				<-ctx.Done()
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "replica " + strconv.Itoa(n)}}}, nil, nil
		})
	get := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: true})
	path := "/mcp"
	if legacy {
		h, path = mcp.NewSSEHandler(get, nil), "/sse"
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return "http://" + l.Addr().String() + path, hs
}

// TestFailoverCapsKilledReplica: the replica running a 2026-07-28 client's read-only
// call is killed before any byte of its answer; the router sends the call to the other
// replica on an upstream session initialized with exactly the capabilities the client
// declared (elicitation), opened there for it, never on that replica's shared session
// (which declares the router's: roots, sampling and elicitation), and the client gets
// the other replica's answer. With shared sessions the session is the one of the
// client's set of capabilities; per client, its principal's. Over Streamable HTTP the
// call's own exchange sees the loss; over legacy HTTP+SSE the dropped event stream does.
func TestFailoverCapsKilledReplica(t *testing.T) {
	testbin.Long(t, "starts a router in front of two replicas and kills one mid-call")
	for _, tc := range []struct {
		sessions string
		legacy   bool
	}{{"shared", false}, {"per-client", false}, {"shared", true}, {"per-client", true}} {
		sessions := tc.sessions
		t.Run(sessions+"/legacy="+strconv.FormatBool(tc.legacy), func(t *testing.T) {
			seen := make(chan whoSeen, 4)
			var hang atomic.Bool
			hang.Store(true)
			var urls [2]string
			var reps [2]*http.Server
			for i := range reps {
				urls[i], reps[i] = startWhoReplica(t, i, tc.legacy, seen, &hang)
			}
			cfg := fmt.Sprintf("stateless: on\nadmin: {listen: \"127.0.0.1:0\"}\nbackends:\n"+
				"  - {name: a, prefix: \"\", era: \"2025\", sessions: %s, timeout: 30s, urls: [%q, %q]}\n", sessions, urls[0], urls[1])
			p := startRouter(t, "--config", writeConfig(t, cfg))
			metrics := adminURL(t, p) + "/metrics"

			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			cl := mcp.NewClient(&mcp.Implementation{Name: "failover-caps", Version: "1"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{}, // nothing but what the handler below declares
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "decline"}, nil
				},
			})
			cs, err := cl.Connect(ctx, p.streamable(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
				t.Fatalf("the client speaks %q through the router, want 2026-07-28", v)
			}
			type result struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "who", Arguments: map[string]any{}})
				done <- result{res, err}
			}()
			got := func(what string) int {
				t.Helper()
				s := testwait.Recv(t, what, testTimeout, seen)
				if c := s.caps; c == nil || c.Elicitation == nil || c.Sampling != nil || c.RootsV2 != nil {
					raw, _ := json.Marshal(s.caps)
					t.Fatalf("%s: replica %d got it on a session that declared %s, want elicitation alone", what, s.replica, raw)
				}
				return s.replica
			}
			first := got("the call")
			reps[first].Close()
			second := got("the call sent again")
			if second == first {
				t.Fatalf("the call was sent again to replica %d, which was killed", first)
			}
			r := testwait.Recv(t, "the answer", testTimeout, done)
			if r.err != nil || r.res.IsError || len(r.res.Content) != 1 {
				t.Fatalf("answer %+v, %v; want replica %d's", r.res, r.err, second)
			}
			if tc, ok := r.res.Content[0].(*mcp.TextContent); !ok || tc.Text != "replica "+strconv.Itoa(second) {
				t.Fatalf("answer %+v, want replica %d's", r.res.Content[0], second)
			}
			if n := gaugeValue(t, metrics, "mcprouter_backend_failovers_total"); n != 1 {
				t.Errorf("backend_failovers_total = %v, want 1", n)
			}
		})
	}
}
