package main

// Clients of each generation against backends of each generation through mcprouter
// (issue 12): the Go SDK and mcp-go clients on their default revision (2026-07-28,
// stateless) and pinned to 2025-11-25, in front of the reference backend serving one
// era (mcpbackend --eras legacy or modern), and for elicitation in front of the Go
// SDK's conformance server (stateful: 2025 only; stateless: 2026-07-28), since the
// reference backend has no tool that elicits. The Go SDK on its default revision
// against mcpbackend is TestStatelessGoSDK's (stateless_test.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// backendEras are mcpbackend's --eras values of one era each.
var backendEras = []string{"legacy", "modern"}

// TestErasGoSDKPinned: the Go SDK client pinned to 2025-11-25 holds a session with the
// router, in front of a 2025 backend (relayed as it is) and a 2026-07-28 one (the
// router keeps the session and translates: per-request _meta and log level,
// subscriptions/listen for resources/subscribe, input_required for sampling).
func TestErasGoSDKPinned(t *testing.T) {
	testbin.Long(t, "starts processes")
	for _, era := range backendEras {
		t.Run(era, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, era))
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			c := mcpbackendtest.Connect(t, ctx, p.streamable(), "2025-11-25")
			if v := c.Version(); v != "2025-11-25" {
				t.Fatalf("the client negotiated %q, want 2025-11-25", v)
			}
			mcpbackendtest.Check(t, ctx, c, mcpbackendtest.CheckOptions{ExtraTools: 60, PageSize: routerPageSize})
		})
	}
}

// mcpgoNotes records what an mcp-go client hears outside replies.
type mcpgoNotes struct {
	progress chan float64
	logs     chan string // the data of notifications/message
	updated  chan string // the URIs of notifications/resources/updated
}

// mcpgoSampler answers sampling "sampled: <prompt>", as mcpbackendtest's client does.
type mcpgoSampler struct{}

func (mcpgoSampler) CreateMessage(_ context.Context, r mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
	prompt := ""
	if len(r.Messages) > 0 {
		// mcp-go hands the content over as a value, a pointer or, for a request of an
		// input_required result, the decoded JSON object.
		switch c := r.Messages[0].Content.(type) {
		case mcpgo.TextContent:
			prompt = c.Text
		case *mcpgo.TextContent:
			prompt = c.Text
		case map[string]any:
			prompt, _ = c["text"].(string)
		}
	}
	return &mcpgo.CreateMessageResult{Model: "test-model", SamplingMessage: mcpgo.SamplingMessage{
		Role: mcpgo.RoleAssistant, Content: mcpgo.NewTextContent("sampled: " + prompt)}}, nil
}

// mcpgoEliciter accepts every elicitation with answers for the conformance server's
// questions: a username for test_elicitation, a name for the input_required tools.
type mcpgoEliciter struct{}

func (mcpgoEliciter) Elicit(_ context.Context, r mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
		Action: mcpgo.ElicitationResponseActionAccept, Content: elicitAnswer(r.Params.Message)}}, nil
}

// elicitAnswer is the content both clients accept an elicitation with.
func elicitAnswer(message string) map[string]any {
	if strings.HasPrefix(message, "What is your name") {
		return map[string]any{"name": "Ada"}
	}
	return map[string]any{"username": "ada"}
}

// connectMCPGo connects an mcp-go client to endpoint, pinned to version ("" for its
// default), with sampling and elicitation handlers and notification recording.
func connectMCPGo(t *testing.T, endpoint, version string) (*mcpgoclient.Client, *mcpgoNotes) {
	t.Helper()
	trOpts := []mcpgotransport.StreamableHTTPCOption{mcpgotransport.WithHTTPTimeout(testTimeout)}
	if version != "" {
		// The GET stream, where a 2025 session's notifications travel; mcp-go takes a
		// transport with one for a 2025-only client.
		trOpts = append(trOpts, mcpgotransport.WithContinuousListening())
	}
	tr, err := mcpgotransport.NewStreamableHTTP(endpoint, trOpts...)
	if err != nil {
		t.Fatal(err)
	}
	opts := []mcpgoclient.ClientOption{mcpgoclient.WithSamplingHandler(mcpgoSampler{}), mcpgoclient.WithElicitationHandler(mcpgoEliciter{})}
	if version != "" {
		opts = append(opts, mcpgoclient.WithProtocolVersion(version))
	}
	c := mcpgoclient.NewClient(tr, opts...)
	n := &mcpgoNotes{progress: make(chan float64, 64), logs: make(chan string, 64), updated: make(chan string, 64)}
	c.OnNotification(func(note mcpgo.JSONRPCNotification) {
		p := note.Params.AdditionalFields
		var ch chan string
		var v string
		switch note.Method {
		case "notifications/progress":
			if f, ok := p["progress"].(float64); ok {
				offer(n.progress, f)
			}
			return
		case "notifications/message":
			ch, v = n.logs, fmt.Sprint(p["data"])
		case "notifications/resources/updated":
			ch, v = n.updated, fmt.Sprint(p["uri"])
		default:
			return
		}
		offer(ch, v)
	})
	// The test's context: the GET stream lives as long as the context Start was given.
	res := startMCPGo(t, t.Context(), c, version, "e2e-mcp-go")
	t.Cleanup(func() { c.Close() })
	want := version
	if want == "" {
		want = "2026-07-28"
	}
	if res.ProtocolVersion != want {
		t.Fatalf("mcp-go negotiated %q, want %q", res.ProtocolVersion, want)
	}
	return c, n
}

// mcpgoCall calls tool with args and returns the text of its result.
func mcpgoCall(t *testing.T, ctx context.Context, c *mcpgoclient.Client, tool string, args map[string]any) string {
	t.Helper()
	req := mcpgo.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return mcpgoText(res.Content)
}

func mcpgoText(content []mcpgo.Content) string {
	var b strings.Builder
	for _, c := range content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mcpgoSettings are mcp-go's default revision and the pinned one.
var mcpgoSettings = []struct{ name, version string }{{"default", ""}, {"pinned", "2025-11-25"}}

// TestErasMCPGo: mcp-go on both settings in front of a backend of each era: tools,
// resources, prompts, progress, logging, sampling, cancellation and subscriptions (on
// its default revision with subscriptions/listen, Client.ListenAsync; pinned, mcp-go's
// client offers no resources/subscribe, so it sends one as a raw request).
func TestErasMCPGo(t *testing.T) {
	testbin.Long(t, "starts processes")
	for _, era := range backendEras {
		t.Run(era, func(t *testing.T) {
			p := startRouterFor(t, startEraBackend(t, era))
			for _, set := range mcpgoSettings {
				t.Run(set.name, func(t *testing.T) {
					c, n := connectMCPGo(t, p.url("/mcp"), set.version)
					checkMCPGo(t, c, n, set.version != "")
				})
			}
		})
	}
}

func checkMCPGo(t *testing.T, c *mcpgoclient.Client, n *mcpgoNotes, pinned bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	t.Run("tools", func(t *testing.T) {
		list, err := c.ListTools(ctx, mcpgo.ListToolsRequest{})
		if err != nil || len(list.Tools) == 0 {
			t.Fatalf("tools/list: %v %v", list, err)
		}
		if got := mcpgoCall(t, ctx, c, "echo", map[string]any{"text": "héllo"}); got != "héllo" {
			t.Fatalf("echo: %q", got)
		}
	})
	t.Run("resources", func(t *testing.T) {
		req := mcpgo.ReadResourceRequest{}
		req.Params.URI = "echo://hello%20you"
		res, err := c.ReadResource(ctx, req)
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("resources/read: %v %v", res, err)
		}
		if tc, ok := res.Contents[0].(mcpgo.TextResourceContents); !ok || tc.Text != "hello you" {
			t.Fatalf("resources/read: %#v", res.Contents[0])
		}
	})
	t.Run("prompts", func(t *testing.T) {
		req := mcpgo.GetPromptRequest{}
		req.Params.Name, req.Params.Arguments = "greet", map[string]string{"name": "Ada", "style": "pirate"}
		res, err := c.GetPrompt(ctx, req)
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("prompts/get: %v %v", res, err)
		}
		if tc, ok := res.Messages[0].Content.(mcpgo.TextContent); !ok || tc.Text != "Ahoy, Ada!" {
			t.Fatalf("prompts/get: %#v", res.Messages[0].Content)
		}
	})
	t.Run("progress", func(t *testing.T) {
		req := mcpgo.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "progress", map[string]any{"steps": 3, "intervalMs": 1}
		req.Params.Meta = &mcpgo.Meta{ProgressToken: "tok-mcp-go"}
		if _, err := c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if got := testwait.Recv(t, "a progress notification", testTimeout, n.progress); got != float64(i) {
				t.Fatalf("progress %d: %v", i, got)
			}
		}
	})
	t.Run("logging", func(t *testing.T) {
		req := mcpgo.SetLevelRequest{}
		req.Params.Level = mcpgo.LoggingLevelWarning
		if err := c.SetLevel(ctx, req); err != nil {
			t.Fatalf("logging/setLevel: %v", err)
		}
		mcpgoCall(t, ctx, c, "log", map[string]any{"level": "info", "message": "filtered out"})
		mcpgoCall(t, ctx, c, "log", map[string]any{"level": "error", "message": "let through"})
		if got := testwait.Recv(t, "a log message", testTimeout, n.logs); got != "let through" {
			t.Fatalf("log message %q, want the error only", got)
		}
	})
	t.Run("sampling", func(t *testing.T) {
		if got := mcpgoCall(t, ctx, c, "sample", map[string]any{"prompt": "say hi"}); got != "sampled: say hi" {
			t.Fatalf("sample: %q", got)
		}
	})
	t.Run("cancellation", func(t *testing.T) {
		callCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			req := mcpgo.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = "sleep", map[string]any{"ms": 3000}
			_, err := c.CallTool(callCtx, req)
			done <- err
		}()
		testwait.For(t, "the call running on the backend", testTimeout, func() bool { return mcpgoInFlight(t, ctx, c) >= 1 })
		stop()
		if err := testwait.Recv(t, "the cancelled call to return", testTimeout, done); err == nil {
			t.Fatal("the cancelled call succeeded")
		}
		if got := mcpgoCall(t, ctx, c, "echo", map[string]any{"text": "still here"}); got != "still here" {
			t.Fatalf("echo after the cancellation: %q", got)
		}
	})
	t.Run("subscriptions", func(t *testing.T) {
		if !pinned {
			mcpgoListen(t, ctx, c, n, "memo://board")
			return
		}
		params, _ := json.Marshal(map[string]string{"uri": "memo://board"})
		res, err := c.GetTransport().SendRequest(ctx, mcpgotransport.JSONRPCRequest{JSONRPC: "2.0", ID: mcpgo.NewRequestId("sub-1"),
			Method: "resources/subscribe", Params: json.RawMessage(params)})
		if err != nil || res.Error != nil {
			t.Fatalf("resources/subscribe: %v %+v", err, res)
		}
		// mcp-go opens its GET stream, where the update travels, in the background after
		// initialize: the resource is touched again until an update arrives.
		testwait.For(t, "notifications/resources/updated for memo://board", testTimeout, func() bool {
			mcpgoCall(t, ctx, c, "touch", map[string]any{"uri": "memo://board"})
			for {
				select {
				case uri := <-n.updated:
					if uri == "memo://board" {
						return true
					}
				case <-time.After(200 * time.Millisecond):
					return false
				}
			}
		})
	})
}

// mcpgoInFlight reads the backend's requests in flight from stats://server.
func mcpgoInFlight(t *testing.T, ctx context.Context, c *mcpgoclient.Client) float64 {
	t.Helper()
	req := mcpgo.ReadResourceRequest{}
	req.Params.URI = "stats://server"
	res, err := c.ReadResource(ctx, req)
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("stats://server: %v", err)
	}
	tc, _ := res.Contents[0].(mcpgo.TextResourceContents)
	var s struct {
		InFlight float64 `json:"inFlight"`
	}
	if err := json.Unmarshal([]byte(tc.Text), &s); err != nil {
		t.Fatalf("stats://server: %v: %s", err, tc.Text)
	}
	return s.InFlight
}

// everythingEras are the Go SDK conformance server's modes, the era each speaks, and the
// tool of each that elicits: the stateful server sends elicitation/create itself, the
// stateless one answers input_required.
var everythingEras = []struct{ name, era, stateless, tool, want string }{
	{"2025", "2025", "false", "test_elicitation", "Elicitation result: action=accept, content=map[username:ada]"},
	{"2026", "2026", "true", "test_input_required_result_elicitation", "Hello, Ada!"},
}

// TestErasElicitation: both clients on both settings answer an elicitation asked by a
// backend of each era: relayed as it is (2025 client, 2025 backend), turned into
// input_required (2026 client, 2025 backend), passed on (2026 client, 2026 backend) or
// turned into elicitation/create on the client's session (2025 client, 2026 backend).
func TestErasElicitation(t *testing.T) {
	testbin.Long(t, "starts processes")
	everything := testbin.BuildFixture(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	for _, be := range everythingEras {
		t.Run("backend "+be.name, func(t *testing.T) {
			addr := testbin.FreeAddr(t)
			testbin.Start(t, testbin.Spec{Name: "everything-server", Bin: everything, Args: []string{"-http", addr, "-stateless=" + be.stateless}})
			testbin.WaitListening(t, addr, testTimeout)
			cfg := fmt.Sprintf("stateless: on\nbackends:\n  - name: b\n    prefix: \"\"\n    era: %q\n    url: http://%s/mcp\n", be.era, addr)
			p := startRouter(t, "--config", writeConfig(t, cfg))
			args := map[string]any{"message": "Who are you?"}
			for _, set := range mcpgoSettings {
				t.Run("go-sdk "+set.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
					defer cancel()
					client := mcp.NewClient(&mcp.Implementation{Name: "e2e-eras", Version: "1"}, &mcp.ClientOptions{
						ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
							return &mcp.ElicitResult{Action: "accept", Content: elicitAnswer(r.Params.Message)}, nil
						},
					})
					var opts *mcp.ClientSessionOptions
					if set.version != "" {
						opts = &mcp.ClientSessionOptions{ProtocolVersion: set.version}
					}
					cs, err := client.Connect(ctx, p.streamable(), opts)
					if err != nil {
						t.Fatal(err)
					}
					defer cs.Close()
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: be.tool, Arguments: args})
					if err != nil {
						t.Fatal(err)
					}
					var got strings.Builder
					for _, c := range res.Content {
						if tc, ok := c.(*mcp.TextContent); ok {
							got.WriteString(tc.Text)
						}
					}
					if got.String() != be.want {
						t.Fatalf("%q, want %q", got.String(), be.want)
					}
				})
				t.Run("mcp-go "+set.name, func(t *testing.T) {
					c, _ := connectMCPGo(t, p.url("/mcp"), set.version)
					ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
					defer cancel()
					if got := mcpgoCall(t, ctx, c, be.tool, args); got != be.want {
						t.Fatalf("%q, want %q", got, be.want)
					}
				})
			}
		})
	}
}

// TestErasPerClientBackend: 2026-07-28 clients (the Go SDK on its default revision) in
// front of a per-client backend (sessions: per-client) of each era: each principal gets
// one upstream session of its own, which its later connections reuse (the router's
// gauge of per-client upstream sessions, and a 2025 backend's own count of sessions,
// say so), and everything works through it: the backend's sampling request comes back
// to the client as input_required, and a 2025 backend's resource updates come on the
// principal's listen stream.
func TestErasPerClientBackend(t *testing.T) {
	testbin.Long(t, "starts processes")
	for _, era := range backendEras {
		t.Run(era, func(t *testing.T) {
			p := startAliceBobRouter(t, startEraBackend(t, era), "    sessions: per-client\n")
			metrics := adminURL(t, p) + "/metrics"
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			connect := func(token string) *mcpbackendtest.Client {
				c := mcpbackendtest.Connect(t, ctx, &mcp.StreamableClientTransport{Endpoint: p.url("/mcp"), HTTPClient: authClient(token), MaxRetries: -1}, "")
				if !c.Modern() {
					t.Fatalf("the client negotiated %q, want 2026-07-28", c.Version())
				}
				return c
			}
			// open reads the backend's stats through c (a request that needs its
			// principal's upstream session), then checks the router's per-client
			// upstream sessions and a 2025 backend's count of its sessions (base more:
			// the router's shared one).
			var base float64
			open := func(c *mcpbackendtest.Client, want float64, when string) {
				t.Helper()
				sessions := mcpbackendtest.Stats(t, ctx, c)["sessions"]
				if got := gaugeValue(t, metrics, "mcprouter_upstream_client_sessions"); got != want {
					t.Errorf("%s: %v per-client upstream sessions, want %v", when, got, want)
				}
				if era == "legacy" && sessions != base+want {
					t.Errorf("%s: the backend holds %v sessions, want %v", when, sessions, base+want)
				}
			}
			alice := connect(aliceToken)
			base = mcpbackendtest.Stats(t, ctx, alice)["sessions"] - 1
			open(alice, 1, "alice")
			mcpbackendtest.Check(t, ctx, alice, mcpbackendtest.CheckOptions{ExtraTools: 60, PageSize: routerPageSize})
			open(connect(aliceToken), 1, "alice's second connection")
			open(connect(bobToken), 2, "bob")
		})
	}
}

// mcpgoListen: mcp-go on its default revision subscribes to uri with
// subscriptions/listen (Client.ListenAsync), the router acknowledges the stream with uri
// in its filter, and a touch of uri reaches the client as notifications/resources/updated.
func mcpgoListen(t *testing.T, ctx context.Context, c *mcpgoclient.Client, n *mcpgoNotes, uri string) {
	acked := make(chan string, 4)
	c.OnNotification(func(note mcpgo.JSONRPCNotification) {
		if note.Method == "notifications/subscriptions/acknowledged" {
			b, _ := json.Marshal(note.Params.AdditionalFields)
			offer(acked, string(b))
		}
	})
	listenErr := make(chan error, 1)
	stop, err := c.ListenAsync(ctx, mcpgo.SubscriptionFilter{ResourceSubscriptions: []string{uri}}, func(err error) { offer(listenErr, err) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case ack := <-acked:
		if !strings.Contains(ack, uri) {
			t.Fatalf("acknowledgement without %s: %s", uri, ack)
		}
	case err := <-listenErr:
		t.Fatalf("listen: %v", err)
	case <-ctx.Done():
		t.Fatal("no acknowledgement of the listen stream")
	}
	mcpgoCall(t, ctx, c, "touch", map[string]any{"uri": uri})
	if got := testwait.Recv(t, "notifications/resources/updated", testTimeout, n.updated); got != uri {
		t.Fatalf("update for %q, want %s", got, uri)
	}
}
