package main

// Several input requests for one call: a 2025 backend that asks its client more than
// one thing, one after the other or in parallel, while a 2026-07-28 client's call runs.
// The backend is the Go SDK's own server (stateful, so it speaks 2025-11-25 and sends
// real server-to-client requests), in this process on loopback.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/loadgen/sdktest"
)

// askMeta declares every capability a backend may ask for.
const askMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{},"roots":{}}}`

// startAskingBackend serves, on loopback, a 2025-era Go SDK server with three tools:
// ask_twice elicits a name, then asks for a sampling with it (sdktest.AskTwice, whose
// progress notification these tests never ask for); ask_parallel elicits a
// name and lists the roots at the same time; ask_progress elicits a name and reports
// progress with it. Each answers with what it was told.
func startAskingBackend(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_twice"}, sdktest.AskTwice)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_parallel"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		var wg sync.WaitGroup
		var name string
		var roots *mcp.ListRootsResult
		var errName, errRoots error
		wg.Add(2)
		go func() { defer wg.Done(); name, errName = sdktest.ElicitName(ctx, req.Session) }()
		go func() { defer wg.Done(); roots, errRoots = req.Session.ListRoots(ctx, nil) }()
		wg.Wait()
		if err := errors.Join(errName, errRoots); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s:%d roots", name, len(roots.Roots))}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask_progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		return sdktest.TextResult(sdktest.ElicitNameNotifying(ctx, req))
	})
	return sdktest.Serve(t, srv)
}

// answerFor is the client's answer to an input request of method.
func answerFor(t *testing.T, method string) string {
	switch method {
	case "elicitation/create":
		return `{"action":"accept","content":{"name":"Ann"}}`
	case "sampling/createMessage":
		return `{"role":"assistant","model":"m","content":{"type":"text","text":"hello"}}`
	case "roots/list":
		return `{"roots":[{"uri":"file:///r","name":"r"}]}`
	}
	t.Fatalf("unexpected input request %s", method)
	return ""
}

// round is one input_required answer: its input requests' methods by key, and its state.
type round struct {
	methods map[string]string
	state   string
}

// callRounds calls tool and retries, answering every input request, until the call
// completes; it returns the rounds the client was asked and the final text.
func callRounds(t *testing.T, p *routerProc, tool string) ([]round, string) {
	t.Helper()
	var rounds []round
	extra := ""
	for range 6 {
		status, a := toolCallAs(t, p, "", tool, `{}`, askMeta+extra)
		if status != 200 || a.Error != nil {
			t.Fatalf("%s after %d rounds: %d %+v", tool, len(rounds), status, a)
		}
		if a.Result.ResultType != "input_required" {
			if len(a.Result.Content) == 0 {
				t.Fatalf("%s: %+v, want a text result", tool, a)
			}
			return rounds, a.Result.Content[0].Text
		}
		r := round{methods: map[string]string{}, state: a.Result.RequestState}
		var answers []string
		for key, raw := range a.Result.InputRequests {
			var ir struct{ Method string }
			if err := json.Unmarshal(raw, &ir); err != nil {
				t.Fatal(err)
			}
			r.methods[key] = ir.Method
			answers = append(answers, fmt.Sprintf("%q:%s", key, answerFor(t, ir.Method)))
		}
		rounds = append(rounds, r)
		extra = `,"inputResponses":{` + strings.Join(answers, ",") + `},"requestState":"` + r.state + `"`
	}
	t.Fatalf("%s still asks after %d rounds", tool, len(rounds))
	return nil, ""
}

// TestInputRequiredRounds: a backend asking twice in a row gets both answers, the
// client seeing input_required again for the second ask with a new state, and the
// first round's state no longer claims the call; a backend asking twice in parallel
// gets both answers too, both shown at once as the router gathers parallel asks (or,
// should one come later than the gathering, in a second round).
func TestInputRequiredRounds(t *testing.T) {
	testbin.Long(t, "starts processes")
	p := startRouterFor(t, startAskingBackend(t))

	t.Run("one after the other", func(t *testing.T) {
		rounds, text := callRounds(t, p, "ask_twice")
		if len(rounds) != 2 || len(rounds[0].methods) != 1 || len(rounds[1].methods) != 1 {
			t.Fatalf("rounds %+v, want two of one input request each", rounds)
		}
		for i, want := range []string{"elicitation/create", "sampling/createMessage"} {
			for _, m := range rounds[i].methods {
				if m != want {
					t.Errorf("round %d asks %s, want %s", i+1, m, want)
				}
			}
		}
		if rounds[0].state == rounds[1].state || rounds[0].state == "" {
			t.Error("the second round reuses the first one's requestState")
		}
		if text != "Ann:hello" {
			t.Errorf("result %q, want both answers (Ann:hello)", text)
		}
	})

	t.Run("an earlier round's state", func(t *testing.T) {
		_, a := toolCallAs(t, p, "", "ask_twice", `{}`, askMeta)
		var key string
		for k := range a.Result.InputRequests {
			key = k
		}
		first := `,"inputResponses":{"` + key + `":` + answerFor(t, "elicitation/create") + `},"requestState":"` + a.Result.RequestState + `"`
		if _, b := toolCallAs(t, p, "", "ask_twice", `{}`, askMeta+first); b.Result.ResultType != "input_required" {
			t.Fatalf("second round: %+v", b)
		}
		status, c := toolCallAs(t, p, "", "ask_twice", `{}`, askMeta+first)
		wantInvalidParams(t, "the first round's state again", status, c, "answered already")
	})

	t.Run("in parallel", func(t *testing.T) {
		rounds, text := callRounds(t, p, "ask_parallel")
		var methods []string
		for _, r := range rounds {
			for _, m := range r.methods {
				methods = append(methods, m)
			}
		}
		slices.Sort(methods)
		if !slices.Equal(methods, []string{"elicitation/create", "roots/list"}) {
			t.Fatalf("asked %v, want the elicitation and the roots once each", methods)
		}
		if len(rounds) != 1 {
			t.Logf("the parallel asks came in %d rounds (one came after the gathering)", len(rounds))
		}
		if text != "Ann:1 roots" {
			t.Errorf("result %q, want both answers (Ann:1 roots)", text)
		}
	})
}
