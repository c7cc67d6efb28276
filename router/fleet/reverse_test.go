package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// askedClient is a 2025-11-25 Go SDK client that answers the server-to-client requests
// the router makes of a stateless backend's input_required results: elicitation (a
// name, a colour, a confirmation, by the question), sampling (sampled) and roots. With
// elicit false it declares no elicitation capability; with decline it declines every
// elicitation; with refuse it answers sampling with an error; hold, when set, receives
// each elicitation's context and the handler waits for it to end.
type askedClient struct {
	sampled string
	refuse  bool
	decline bool
	elicit  bool
	hold    chan context.Context
}

func (a askedClient) connect(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if a.refuse {
				return nil, errors.New("no model here")
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: a.sampled}}, nil
		},
	}
	if a.elicit {
		opts.ElicitationHandler = func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if a.hold != nil {
				a.hold <- ctx
				<-ctx.Done()
				return nil, ctx.Err()
			}
			if a.decline {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			switch msg := r.Params.Message; {
			case strings.Contains(msg, "color"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "blue"}}, nil
			case strings.Contains(msg, "confirm"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
			default:
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-asked", Version: "1"}, opts)
	client.AddRoots(&mcp.Root{URI: "file:///project", Name: "project"})
	return connectPinned(t, client, endpoint)
}

// TestInputRequiredForLegacyClient: a 2026-07-28 backend (the Go SDK's conformance
// server, stateless) answers input_required; a 2025-11-25 client behind the router is
// asked the 2025 way (elicitation/create, sampling/createMessage, roots/list on its
// session) and the router retries with the answers and the echoed requestState, for as
// many rounds as the backend needs, up to the bound.
func TestInputRequiredForLegacyClient(t *testing.T) {
	testbin.Long(t, "starts mcprouter and the Go SDK's conformance server")
	addr := testbin.FreeAddr(t)
	startEverything(t, addr, true)
	endpoint, _ := startRouter(t, "http://"+addr+"/mcp", "2026")
	cs := askedClient{sampled: "Paris", elicit: true}.connect(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	for _, tc := range []struct{ tool, want string }{
		{"test_input_required_result_elicitation", "Hello, Ada!"},
		{"test_input_required_result_sampling", "Sampling response: Paris"},
		{"test_input_required_result_list_roots", "Client exposed 1 root(s): file:///project"},
		{"test_input_required_result_request_state", "state-ok: requestState received and confirmation accepted"},
		{"test_input_required_result_multiple_inputs", "Paris Ada — 1 root(s) visible"},
		{"test_input_required_result_multi_round", "Multi-round complete: Ada likes blue"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool})
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, res); got != tc.want {
				t.Fatalf("%q, want %q", got, tc.want)
			}
		})
	}

	t.Run("a capability the client did not declare", func(t *testing.T) {
		bare := askedClient{sampled: "x"}.connect(t, endpoint)
		_, err := bare.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})
		if err == nil || !strings.Contains(err.Error(), "did not declare the elicitation capability") {
			t.Fatalf("err %v, want the missing capability named", err)
		}
	})

	t.Run("the client's error ends the request", func(t *testing.T) {
		refusing := askedClient{refuse: true}.connect(t, endpoint)
		_, err := refusing.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_sampling"})
		if err == nil || !strings.Contains(err.Error(), "sampling/createMessage for backend ev (input_required) failed: no model here") {
			t.Fatalf("err %v, want the client's error passed on", err)
		}
	})

	t.Run("rounds are bounded", func(t *testing.T) {
		// Declined, the server asks again, round after round.
		declining := askedClient{sampled: "x", elicit: true, decline: true}.connect(t, endpoint)
		_, err := declining.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})
		if err == nil || !strings.Contains(err.Error(), "asked for input 8 times") {
			t.Fatalf("err %v, want the bound named", err)
		}
	})

	t.Run("cancellation ends the round", func(t *testing.T) {
		hold := make(chan context.Context, 1)
		waiting := askedClient{sampled: "x", elicit: true, hold: hold}.connect(t, endpoint)
		callCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := waiting.CallTool(callCtx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})
			done <- err
		}()
		asked := testwait.Recv(t, "the elicitation to reach the client", 20*time.Second, hold)
		stop()
		if err := testwait.Recv(t, "the cancelled call to return", 20*time.Second, done); !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled call returned %v", err)
		}
		// The router tells the client to stop working on the question it asked.
		testwait.Recv(t, "the elicitation to be cancelled", 20*time.Second, asked.Done())
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})
		if err != nil || textOf(t, res) != "Hello, Ada!" {
			t.Fatalf("a call after the cancellation: %v %v", res, err)
		}
	})
}

// TestInputRequiredClientTimeout: a 2025 client that does not answer the router's
// elicitation/create within limits.server_request_timeout is told to stop working on it,
// and its call fails with an error that says so.
func TestInputRequiredClientTimeout(t *testing.T) {
	testbin.Long(t, "starts mcprouter and the Go SDK's conformance server")
	addr := testbin.FreeAddr(t)
	startEverything(t, addr, true)
	endpoint, _ := startRouter(t, "http://"+addr+"/mcp", "2026", "limits:\n  server_request_timeout: 1s\n")
	hold := make(chan context.Context, 1)
	cs := askedClient{elicit: true, hold: hold}.connect(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation"})
	if err == nil || !strings.Contains(err.Error(), "did not answer elicitation/create within 1s") {
		t.Fatalf("err %v, want the client's timeout named", err)
	}
	asked := testwait.Recv(t, "the elicitation to reach the client", 20*time.Second, hold)
	testwait.Recv(t, "the elicitation to be cancelled", 20*time.Second, asked.Done())
}
