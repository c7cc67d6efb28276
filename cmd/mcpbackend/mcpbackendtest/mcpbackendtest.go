// Package mcpbackendtest starts the reference backend for tests and drives it with the
// official Go SDK client. The backend's own tests use it, and so can any test that needs
// a real MCP server behind something (the router's end-to-end tests, load-generator
// tests), in-process or as a process.
package mcpbackendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

// Wait bounds every wait of this package: generous on a busy machine, and never an
// assertion about speed.
const Wait = 30 * time.Second

// Start starts an in-process backend listening on a loopback port; it is closed when the
// test ends.
func Start(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	testwait.Cleanup(t, Wait, s.Close)
	return s
}

// StartAB starts two backends, "a" and "b", with cfg but for the name, and returns the
// backends section of a router configuration (YAML) that routes to both: the setup of
// the end-to-end tests that give the two different rights or endpoints.
func StartAB(t testing.TB, cfg server.Config) string {
	t.Helper()
	var yaml strings.Builder
	yaml.WriteString("backends:\n")
	for _, name := range []string{"a", "b"} {
		cfg.Name = name
		fmt.Fprintf(&yaml, "  - {name: %s, url: %q}\n", name, Start(t, cfg).URL())
	}
	return yaml.String()
}

// Client is a go-sdk client session whose notifications are recorded.
type Client struct {
	Session  *mcp.ClientSession
	Progress chan *mcp.ProgressNotificationParams
	Updated  chan string // URIs of notifications/resources/updated
	Logs     chan *mcp.LoggingMessageParams
}

// Connect connects a go-sdk client over t with sampling support (it answers
// "sampled: <prompt>") and notification recording. version is the revision to ask for;
// "" lets the SDK choose (its newest, which makes it probe server/discover first and
// fall back to initialize). The session is closed when the test ends.
func Connect(tb testing.TB, ctx context.Context, t mcp.Transport, version string) *Client {
	tb.Helper()
	c := &Client{
		Progress: make(chan *mcp.ProgressNotificationParams, 1024),
		Updated:  make(chan string, 1024),
		Logs:     make(chan *mcp.LoggingMessageParams, 1024),
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbackendtest", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := ""
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					prompt = tc.Text
				}
			}
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled: " + prompt}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			nonBlocking(c.Progress, req.Params)
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			nonBlocking(c.Updated, req.Params.URI)
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			nonBlocking(c.Logs, req.Params)
		},
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, t, opts)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	c.Session = cs
	tb.Cleanup(func() { cs.Close() })
	return c
}

func nonBlocking[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default: // a test that does not read a channel must not stall the client
	}
}

// Version is the revision the session negotiated.
func (c *Client) Version() string { return c.Session.InitializeResult().ProtocolVersion }

// CheckOptions describe the backend under test.
type CheckOptions struct {
	ExtraTools int // the backend's --tools
	PageSize   int // the backend's --page-size
	// Skip names steps not to run (ListToolPages, Sampling, Subscribe...), each with
	// why: what a client in front of a router that does not offer it yet cannot check.
	Skip map[string]string
}

// builtinTools is the number of tools the backend always offers.
const builtinTools = 9

// Check walks everything the backend offers through the client: tool pages, every tool,
// progress, sampling, logging, resources and subscriptions, prompts, completions and
// the cancellation of a running call. Each step is a subtest when tb is a *testing.T.
func Check(tb testing.TB, ctx context.Context, c *Client, o CheckOptions) {
	steps := []struct {
		name string
		fn   func(testing.TB, context.Context, *Client, CheckOptions)
	}{
		{"ListToolPages", checkToolPages},
		{"Tools", checkTools},
		{"Progress", checkProgress},
		{"Sampling", checkSampling},
		{"Logging", checkLogging},
		{"Resources", checkResources},
		{"Subscribe", checkSubscribe},
		{"Prompts", checkPrompts},
		{"Cancel", checkCancel},
	}
	for _, st := range steps {
		if why, skip := o.Skip[st.name]; skip {
			tb.Logf("%s not checked: %s", st.name, why)
			continue
		}
		if t, ok := tb.(*testing.T); ok {
			t.Run(st.name, func(t *testing.T) { st.fn(t, ctx, c, o) })
		} else {
			st.fn(tb, ctx, c, o)
		}
	}
}

func checkToolPages(t testing.TB, ctx context.Context, c *Client, o CheckOptions) {
	want := builtinTools + o.ExtraTools
	wantPages := int(math.Ceil(float64(want) / float64(o.PageSize)))
	var names []string
	pages, cursor := 0, ""
	for pages <= wantPages { // bounded: one page more than expected shows the bug
		res, err := c.Session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list page %d: %v", pages+1, err)
		}
		pages++
		if len(res.Tools) > o.PageSize {
			t.Fatalf("page %d has %d tools, page size %d", pages, len(res.Tools), o.PageSize)
		}
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if len(names) != want || pages != wantPages {
		t.Fatalf("listed %d tools in %d pages, want %d in %d", len(names), pages, want, wantPages)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Fatalf("tool %s listed twice", n)
		}
		seen[n] = true
	}
	if o.ExtraTools > 0 && !seen[fmt.Sprintf("tool_%04d", o.ExtraTools)] {
		t.Fatalf("last generated tool missing from %v", names)
	}
}

// call calls a tool and returns its result (failing the test on a protocol error).
func call(t testing.TB, ctx context.Context, c *Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

func text(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return tc.Text
}

func checkTools(t testing.TB, ctx context.Context, c *Client, o CheckOptions) {
	structured := c.Version() >= "2025-06-18"
	const s = "héllo \"world\"\n\u2028"
	for _, name := range []string{"echo", fmt.Sprintf("tool_%04d", max(o.ExtraTools, 1))} {
		if name != "echo" && o.ExtraTools == 0 {
			continue
		}
		res := call(t, ctx, c, name, map[string]any{"text": s})
		if got := text(t, res); got != s || res.IsError {
			t.Fatalf("%s: %q (isError %v), want %q", name, got, res.IsError, s)
		}
		if structured {
			if m, ok := res.StructuredContent.(map[string]any); !ok || m["text"] != s {
				t.Fatalf("%s: structured content %#v", name, res.StructuredContent)
			}
		} else if res.StructuredContent != nil {
			t.Fatalf("%s: structured content before 2025-06-18: %#v", name, res.StructuredContent)
		}
	}
	if got := text(t, call(t, ctx, c, "sleep", map[string]any{"ms": 1})); got != "slept 1 ms" {
		t.Fatalf("sleep: %q", got)
	}
	if got := text(t, call(t, ctx, c, "payload", map[string]any{"bytes": 5000})); len(got) != 5000 {
		t.Fatalf("payload: %d bytes, want 5000", len(got))
	}
	if res := call(t, ctx, c, "fail", map[string]any{"message": "boom"}); !res.IsError || text(t, res) != "boom" {
		t.Fatalf("fail: isError %v, %q", res.IsError, text(t, res))
	}
	_, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: "fail_rpc", Arguments: map[string]any{"message": "bad", "code": -32050}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32050 || werr.Message != "bad" {
		t.Fatalf("fail_rpc: want JSON-RPC error -32050, got %v", err)
	}
	// 2025-11-25's URL elicitation required reaches a 2025 client as it is. 2026-07-28
	// forbids the code: a router turns it into input_required (cmd/mcprouter
	// TestStatelessURLElicitation), so a 2026-07-28 client is not asked it here.
	if !c.Modern() {
		_, err = c.Session.CallTool(ctx, &mcp.CallToolParams{Name: "fail_rpc", Arguments: map[string]any{"message": "bad", "code": -32042}})
		if !errors.As(err, &werr) || werr.Code != -32042 || werr.Message != "bad" {
			t.Fatalf("fail_rpc: want JSON-RPC error -32042, got %v", err)
		}
	}
	if _, err := c.Session.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); !errors.As(err, &werr) || werr.Code != -32602 {
		t.Fatalf("unknown tool: want -32602, got %v", err)
	}
	if res := call(t, ctx, c, "touch", map[string]any{"uri": "memo://board"}); res.IsError || !strings.HasPrefix(text(t, res), "touched memo://board") {
		t.Fatalf("touch: %q", text(t, res))
	}
}

func checkProgress(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	drain(c.Progress)
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3, "intervalMs": 1}}
	params.SetProgressToken("tok-progress")
	res, err := c.Session.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("progress: %v %v", err, res)
	}
	for i := 1; i <= 3; i++ {
		select {
		case p := <-c.Progress:
			if p.ProgressToken != "tok-progress" || p.Progress != float64(i) || p.Total != 3 {
				t.Fatalf("progress %d: %+v", i, p)
			}
		case <-time.After(Wait):
			t.Fatalf("progress notification %d not received", i)
		}
	}
}

func checkSampling(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	res := call(t, ctx, c, "sample", map[string]any{"prompt": "say hi"})
	if got := text(t, res); got != "sampled: say hi" || res.IsError {
		t.Fatalf("sample: %q (isError %v)", got, res.IsError)
	}
}

func checkLogging(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	if c.Modern() {
		checkLoggingModern(t, ctx, c)
		return
	}
	if err := c.Session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	drain(c.Logs)
	call(t, ctx, c, "log", map[string]any{"level": "info", "message": "filtered out"})
	call(t, ctx, c, "log", map[string]any{"level": "error", "message": "let through"})
	expectLog(t, c, "error", "let through")
	if err := c.Session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
}

// expectLog waits for the next log message, which must be data at level.
func expectLog(t testing.TB, c *Client, level, data string) {
	t.Helper()
	select {
	case l := <-c.Logs:
		if string(l.Level) != level || l.Data != data {
			t.Fatalf("log: %+v", l)
		}
	case <-time.After(Wait):
		t.Fatal("log notification not received")
	}
}

// checkLoggingModern: 2026-07-28 has no logging/setLevel; each request carries its level
// in _meta, and a request without one gets no log message at all.
func checkLoggingModern(t testing.TB, ctx context.Context, c *Client) {
	drain(c.Logs)
	call(t, ctx, c, "log", map[string]any{"level": "error", "message": "no level asked"})
	logAt := func(level, msg string) {
		p := &mcp.CallToolParams{Name: "log", Arguments: map[string]any{"level": level, "message": msg}}
		p.Meta = mcp.Meta{"io.modelcontextprotocol/logLevel": "warning"}
		if _, err := c.Session.CallTool(ctx, p); err != nil {
			t.Fatalf("log: %v", err)
		}
	}
	logAt("info", "filtered out")
	logAt("error", "let through")
	expectLog(t, c, "error", "let through")
}

// Modern reports whether the session speaks 2026-07-28 (stateless) rather than a 2025
// revision.
func (c *Client) Modern() bool { return c.Version() >= "2026-07-28" }

func checkResources(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	var uris []string
	for r, err := range c.Session.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		uris = append(uris, r.URI)
	}
	if len(uris) < 3 || uris[0] != "counter://tick" {
		t.Fatalf("resources: %v", uris)
	}
	read, err := c.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "counter://tick"})
	if err != nil || len(read.Contents) != 1 || !strings.HasPrefix(read.Contents[0].Text, "tick ") {
		t.Fatalf("read counter://tick: %v %+v", err, read)
	}
	tmpl, err := c.Session.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) != 2 {
		t.Fatalf("templates: %v %+v", err, tmpl)
	}
	read, err = c.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "echo://hello%20you"})
	if err != nil || read.Contents[0].Text != "hello you" {
		t.Fatalf("read echo template: %v %+v", err, read)
	}
	_, err = c.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "nope://x"})
	var werr *jsonrpc.Error
	wantCode := int64(codec.CodeResourceNotFound)
	if c.Modern() {
		wantCode = codec.CodeInvalidParams // 2026-07-28 renumbered it
	}
	if !errors.As(err, &werr) || werr.Code != wantCode {
		t.Fatalf("read unknown: want %d, got %v", wantCode, err)
	}
	comp, err := c.Session.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: "echo://{text}"},
		Argument: mcp.CompleteParamsArgument{Name: "text", Value: "hel"},
	})
	if err != nil || len(comp.Completion.Values) != 3 {
		t.Fatalf("complete template: %v %+v", err, comp)
	}
}

func checkSubscribe(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	if err := c.Session.Subscribe(ctx, &mcp.SubscribeParams{URI: "memo://board"}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	drain(c.Updated)
	call(t, ctx, c, "touch", map[string]any{"uri": "memo://board"})
	waitUpdated(t, c, "memo://board")
	if err := c.Session.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "memo://board"}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
}

// waitUpdated waits for notifications/resources/updated of uri, skipping others (the
// tick counter may be subscribed too).
func waitUpdated(t testing.TB, c *Client, uri string) {
	t.Helper()
	deadline := time.After(Wait)
	for {
		select {
		case u := <-c.Updated:
			if u == uri {
				return
			}
		case <-deadline:
			t.Fatalf("no notifications/resources/updated for %s", uri)
		}
	}
}

func checkPrompts(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	list, err := c.Session.ListPrompts(ctx, nil)
	if err != nil || len(list.Prompts) != 2 {
		t.Fatalf("prompts/list: %v %+v", err, list)
	}
	got, err := c.Session.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada", "style": "pirate"}})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("prompts/get: %v %+v", err, got)
	}
	if tc, ok := got.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Ahoy, Ada!" {
		t.Fatalf("prompt text: %+v", got.Messages[0].Content)
	}
	if _, err := c.Session.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); err == nil {
		t.Fatal("prompts/get without the required argument succeeded")
	}
	comp, err := c.Session.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "style", Value: "p"},
	})
	if err != nil || len(comp.Completion.Values) != 1 || comp.Completion.Values[0] != "pirate" {
		t.Fatalf("complete prompt: %v %+v", err, comp)
	}
}

// Stats reads the backend's counters through the stats://server resource.
func Stats(t testing.TB, ctx context.Context, c *Client) map[string]float64 {
	t.Helper()
	read, err := c.Session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "stats://server"})
	if err != nil || len(read.Contents) != 1 {
		t.Fatalf("read stats://server: %v", err)
	}
	var m map[string]float64
	if err := json.Unmarshal([]byte(read.Contents[0].Text), &m); err != nil {
		t.Fatalf("stats://server: %v: %s", err, read.Contents[0].Text)
	}
	return m
}

// checkCancel starts a long progress call, cancels it once it runs, and checks through
// stats://server that the backend stopped it.
func checkCancel(t testing.TB, ctx context.Context, c *Client, _ CheckOptions) {
	before := Stats(t, ctx, c)["cancelled"]
	drain(c.Progress)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 10000, "intervalMs": 20}}
	params.SetProgressToken("tok-cancel")
	errc := make(chan error, 1)
	go func() {
		_, err := c.Session.CallTool(callCtx, params)
		errc <- err
	}()
	select { // the first progress notification proves the call runs on the backend
	case <-c.Progress:
	case <-time.After(Wait):
		t.Fatal("the call to cancel never started")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call returned %v", err)
		}
	case <-time.After(Wait):
		t.Fatal("cancelled call did not return")
	}
	var st map[string]float64
	if !testwait.Poll(Wait, func() bool {
		st = Stats(t, ctx, c)
		return st["cancelled"] > before && st["inFlight"] == 0
	}) {
		t.Fatalf("the backend did not cancel the call: %v", st)
	}
}

func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
