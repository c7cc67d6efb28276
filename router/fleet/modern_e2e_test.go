package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router/modern"
)

// startRouter starts mcprouter fronting the one backend at url, with era as its pin
// ("" for the default) and extra top-level configuration, and returns its MCP endpoint
// and process.
func startRouter(t *testing.T, url, era string, extra ...string) (string, *testbin.Proc) {
	t.Helper()
	bin := testbin.Build(t, testbin.Router)
	yaml := "listen: 127.0.0.1:0\nhealth:\n  interval: 200ms\nbackends:\n  - name: ev\n    prefix: \"\"\n    url: " + url + "\n"
	if era != "" {
		yaml += "    era: " + era + "\n"
	}
	yaml += strings.Join(extra, "")
	cfg := filepath.Join(t.TempDir(), "mcprouter.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testbin.Start(t, testbin.Spec{Bin: bin, Args: []string{"--config", cfg}, Ready: []string{"mcprouter listening"}})
	return "http://" + p.Addr() + "/mcp", p
}

// legacyClient connects the Go SDK client pinned to 2025-11-25 to endpoint, with
// handlers that report what the router sends it outside replies.
type legacyClientNotes struct {
	updated  chan string
	tools    chan struct{}
	logs     chan string
	progress chan float64
}

func connectLegacy(t *testing.T, endpoint string) (*mcp.ClientSession, *legacyClientNotes) {
	t.Helper()
	n := &legacyClientNotes{updated: make(chan string, 16), tools: make(chan struct{}, 16),
		logs: make(chan string, 16), progress: make(chan float64, 16)}
	cs := connectPinned(t, mcp.NewClient(&mcp.Implementation{Name: "e2e-2025", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case n.updated <- r.Params.URI:
			default:
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case n.tools <- struct{}{}:
			default:
			}
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			select {
			case n.logs <- string(r.Params.Level):
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case n.progress <- r.Params.Progress:
			default:
			}
		},
	}), endpoint)
	return cs, n
}

// connectPinned connects client to endpoint pinned to 2025-11-25 and checks that this
// is what it negotiated; the session closes with the test.
func connectPinned(t *testing.T, client *mcp.Client, endpoint string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("the client negotiated %q, want 2025-11-25", v)
	}
	return cs
}

// within waits for one value from ch, failing the test after d.
func within[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
	}
	var zero T
	return zero
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestLegacyClientThroughStatelessBackend: a 2025-11-25 client (the Go SDK's, pinned)
// in front of the Go SDK's conformance server speaking 2026-07-28 statelessly, through
// a real mcprouter: the router holds the client's session and uses the backend without
// one (server/discover, per-request _meta, subscriptions/listen). The server is
// dual-era, so the configuration pins it to 2026 (auto would keep a session).
func TestLegacyClientThroughStatelessBackend(t *testing.T) {
	testbin.Long(t, "starts mcprouter and the Go SDK's conformance server")
	addr := testbin.FreeAddr(t)
	startEverything(t, addr, true)
	endpoint, router := startRouter(t, "http://"+addr+"/mcp", "2026")
	if v := router.Log.Value("backend instance connected", "protocol"); v != modern.Version {
		t.Fatalf("the router speaks %q to the backend, want %s:\n%s", v, modern.Version, router.Log)
	}
	cs, notes := connectLegacy(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("tools", func(t *testing.T) {
		if !listsTool(t, ctx, cs, "test_simple_text") {
			t.Fatal("tools/list lacks test_simple_text")
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
		if err != nil {
			t.Fatal(err)
		}
		if got := textOf(t, res); got != "This is a simple text response for testing." {
			t.Fatalf("tools/call: %q", got)
		}
	})

	t.Run("resources", func(t *testing.T) {
		list, err := cs.ListResources(ctx, nil)
		if err != nil || len(list.Resources) == 0 {
			t.Fatalf("resources/list: %v %v", list, err)
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "static text resource") {
			t.Fatalf("resources/read: %+v", res.Contents)
		}
	})

	t.Run("prompts and completion", func(t *testing.T) {
		list, err := cs.ListPrompts(ctx, nil)
		if err != nil || len(list.Prompts) == 0 {
			t.Fatalf("prompts/list: %v %v", list, err)
		}
		p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_simple_prompt"})
		if err != nil || len(p.Messages) == 0 {
			t.Fatalf("prompts/get: %v %v", p, err)
		}
		if _, err := cs.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
			Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "a"},
		}); err != nil {
			t.Fatalf("completion/complete: %v", err)
		}
	})

	t.Run("progress", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "test_tool_with_progress"}
		params.SetProgressToken("p1")
		if _, err := cs.CallTool(ctx, params); err != nil {
			t.Fatal(err)
		}
		within(t, notes.progress, 10*time.Second, "progress notification")
	})

	t.Run("logging/setLevel becomes the per-request log level", func(t *testing.T) {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging"}); err != nil {
			t.Fatal(err)
		}
		within(t, notes.logs, 10*time.Second, "log message")
	})

	t.Run("resources/subscribe over subscriptions/listen", func(t *testing.T) {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
			t.Fatal(err)
		}
		// The server updates the resource every 3 seconds.
		if uri := within(t, notes.updated, 15*time.Second, "resource update"); uri != "test://watched-resource" {
			t.Fatalf("update for %q", uri)
		}
	})

	t.Run("list changes over subscriptions/listen", func(t *testing.T) {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_trigger_tool_change"}); err != nil {
			t.Fatal(err)
		}
		within(t, notes.tools, 15*time.Second, "tools/list_changed")
		if !listsTool(t, ctx, cs, "__transient_tool_for_list_changed") {
			t.Fatal("the catalog was not refreshed after the list change")
		}
	})

}

// TestPinnedEraThroughRouter: era: 2025 in the configuration makes the router
// initialize a session with a dual-era backend that would speak 2026-07-28.
func TestPinnedEraThroughRouter(t *testing.T) {
	testbin.Long(t, "starts mcprouter and the Go SDK's conformance server")
	addr := testbin.FreeAddr(t)
	startEverything(t, addr, true)
	endpoint, router := startRouter(t, "http://"+addr+"/mcp", "2025")
	if v := router.Log.Value("backend instance connected", "protocol"); v != "2025-11-25" {
		t.Fatalf("pinned to 2025, the router speaks %q to the backend", v)
	}
	cs, _ := connectLegacy(t, endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"}); err != nil {
		t.Fatal(err)
	}
}

// TestCancelThroughStatelessBackend: a 2025 client's notifications/cancelled for a call
// to a 2026-only backend (found by auto) ends the call at once for the client, the
// router releases it (the call's stream is closed: the revision's cancellation) and
// keeps serving. The backend here holds its response headers until the call ends, and
// the router's HTTP client sees a cancellation only once they are in: such a backend
// finishes the call on its side (a backend that streams, as the Go SDK's does, sees its
// stream closed).
func TestCancelThroughStatelessBackend(t *testing.T) {
	testbin.Long(t, "starts mcprouter and mcpbackend")
	addr := testbin.FreeAddr(t)
	startModernOnly(t, addr)
	endpoint, router := startRouter(t, "http://"+addr+"/mcp", "")
	if v := router.Log.Value("backend instance connected", "protocol"); v != modern.Version {
		t.Fatalf("auto speaks %q to a 2026-only backend", v)
	}
	cs, _ := connectLegacy(t, endpoint)
	inFlight := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "stats://server"})
		if err != nil || len(res.Contents) != 1 {
			t.Fatalf("stats://server through the router: %v", err)
		}
		var s struct {
			InFlight int64 `json:"inFlight"`
		}
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &s); err != nil {
			t.Fatal(err)
		}
		return s.InFlight
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 2000}})
		done <- err
	}()
	testwait.For(t, "the call running on the backend", 20*time.Second, func() bool { return inFlight() >= 1 })
	cancel()
	if err := testwait.Recv(t, "the cancelled call to return", 20*time.Second, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled call returned %v", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil || textOf(t, res) != "still here" {
		t.Fatalf("echo after the cancellation: %v %v", res, err)
	}
}

// listsTool reports whether tools/list through cs names the tool name.
func listsTool(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string) bool {
	t.Helper()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == name })
}
