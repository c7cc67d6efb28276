package main

// End-to-end tests: mcprouter is built once per test binary and started as a real process
// on loopback; the official Go SDK client and mcp-go connect to it over Streamable HTTP,
// legacy HTTP+SSE and stdio, initialize at each revision, ping, and end the session.

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"testing"
	"time"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcprouter/mcprouter/internal/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }

// routerBin is the mcprouter under test, with the race detector when the tests have it;
// backendBin the reference backend (cmd/mcpbackend), a fixture for requests that take
// time.
func routerBin(tb testing.TB) string  { return testbin.Build(tb, testbin.Router) }
func backendBin(tb testing.TB) string { return testbin.BuildFixture(tb, testbin.Backend) }

// testTimeout bounds every client operation of these tests.
const testTimeout = 30 * time.Second

// routerProc is a running mcprouter process.
type routerProc struct{ *testbin.Proc }

func (p *routerProc) url(path string) string { return "http://" + p.Addr() + path }

// streamable is the Go SDK's Streamable HTTP transport to p's /mcp, not reconnecting:
// a lost stream is the test's to see.
func (p *routerProc) streamable() *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{Endpoint: p.url("/mcp"), MaxRetries: -1}
}

// startRouter starts mcprouter listening on an ephemeral loopback port and waits for its
// "listening" log line. The process is stopped (SIGTERM, then SIGKILL) at cleanup.
func startRouter(t testing.TB, args ...string) *routerProc {
	t.Helper()
	return startRouterBin(t, routerBin(t), args...)
}

// startRouterBin is startRouter with another mcprouter binary (an older build, to
// compare with).
func startRouterBin(t testing.TB, bin string, args ...string) *routerProc {
	t.Helper()
	p := &routerProc{testbin.Start(t, testbin.Spec{Name: "mcprouter", Bin: bin, Args: append([]string{"--listen", "127.0.0.1:0"}, args...),
		Ready: []string{"mcprouter listening"}, Wait: testTimeout})}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// writeConfig is testbin.RouterConfig under the name this package's tests call: the
// path of a configuration file, of the test's own, holding yaml.
func writeConfig(t testing.TB, yaml string) string { return testbin.RouterConfig(t, yaml) }

// stop ends the process if it is still running: SIGTERM, then SIGKILL after a timeout.
func (p *routerProc) stop(t testing.TB) {
	if !p.Stop(testTimeout) {
		t.Errorf("mcprouter did not stop on SIGTERM\n%s", p.Log)
	}
}

// connectSDK connects the Go SDK client named name, with opts, to p's /mcp as a
// 2025-11-25 client that does not reconnect (a lost stream is the test's to see); the
// session is closed when the test ends. A failure to connect fails the test and shows
// the router's log.
func connectSDK(t *testing.T, ctx context.Context, p *routerProc, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	cs, err := client.Connect(ctx, p.streamable(), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, p.Log)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callOutcome is how a tool call ended.
type callOutcome struct {
	res *mcp.CallToolResult
	err error
}

// progressCall calls tool, a reference backend's progress tool, for steps steps of
// 250 ms with the progress token token, on a goroutine of its own: the test goes on
// while the call is in flight, and the channel gets how it ended.
func progressCall(ctx context.Context, cs *mcp.ClientSession, tool, token string, steps int) <-chan callOutcome {
	params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"steps": steps, "intervalMs": 250}}
	params.SetProgressToken(token)
	done := make(chan callOutcome, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		done <- callOutcome{res, err}
	}()
	return done
}

// offer sends v on ch unless ch is full: how a client's notification handler signals
// the test without ever holding up the session's reader.
func offer[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// sessionRevisions are the revisions negotiated through initialize.
var sessionRevisions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

func goSDKClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-go-sdk", Version: "1"}, nil)
}

// goSDKSession connects, checks the negotiated revision, pings and closes.
func goSDKSession(t *testing.T, tr mcp.Transport, requested, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cs, err := goSDKClient().Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: requested})
	if err != nil {
		t.Fatalf("connect (requested %q): %v", requested, err)
	}
	res := cs.InitializeResult()
	if res.ProtocolVersion != want {
		t.Errorf("negotiated %q, want %q", res.ProtocolVersion, want)
	}
	if res.ServerInfo == nil || res.ServerInfo.Name != "mcprouter" {
		t.Errorf("serverInfo = %+v, want name mcprouter", res.ServerInfo)
	}
	// 2026-07-28 has no ping (nor sessions): the stateless tests call tools instead.
	for i := 0; i < 3 && want != "2026-07-28"; i++ {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	if err := cs.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("close: %v", err)
	}
}

func TestGoSDKStreamable(t *testing.T) {
	p := startRouter(t)
	for _, v := range append(sessionRevisions, "") {
		name, want := v, v
		if v == "" {
			// The SDK tries server/discover first; with stateless: auto and reference
			// backends kept in 2025 sessions (they speak both eras), the router answers
			// it as a 2025 server and the SDK falls back to initialize. The stateless
			// tests run the same client with stateless: on.
			name, want = "default", "2025-11-25"
		}
		t.Run(name, func(t *testing.T) {
			goSDKSession(t, p.streamable(), v, want)
		})
	}
}

func TestGoSDKLegacySSE(t *testing.T) {
	p := startRouter(t)
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			goSDKSession(t, &mcp.SSEClientTransport{Endpoint: p.url("/sse")}, v, v)
		})
	}
}

func TestGoSDKStdio(t *testing.T) {
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			cmd := exec.Command(routerBin(t), "stdio")
			stderr := new(testbin.Log)
			cmd.Stderr = stderr
			goSDKSession(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: testTimeout}, v, v)
			// Close closed stdin: the process must have ended on its own, cleanly.
			if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
				t.Errorf("mcprouter stdio did not exit cleanly: %v\n%s", cmd.ProcessState, stderr)
			}
		})
	}
}

// startMCPGo starts c and initializes it, asking for revision requested as client
// name; it fails the test if either fails.
func startMCPGo(t *testing.T, ctx context.Context, c *mcpgoclient.Client, requested, name string) *mcpgo.InitializeResult {
	t.Helper()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	req := mcpgo.InitializeRequest{}
	req.Params.ProtocolVersion = requested
	req.Params.ClientInfo = mcpgo.Implementation{Name: name, Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize (requested %q): %v", requested, err)
	}
	return res
}

// mcpgoSession initializes an mcp-go client at the requested revision, pings and closes.
func mcpgoSession(t *testing.T, c *mcpgoclient.Client, requested, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	defer c.Close()
	res := startMCPGo(t, ctx, c, requested, "e2e-mcp-go")
	if res.ProtocolVersion != want {
		t.Errorf("negotiated %q, want %q", res.ProtocolVersion, want)
	}
	if res.ServerInfo.Name != "mcprouter" {
		t.Errorf("serverInfo.name = %q, want mcprouter", res.ServerInfo.Name)
	}
	// 2026-07-28 has no ping (nor sessions).
	for i := 0; i < 3 && want != "2026-07-28"; i++ {
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
}

func TestMCPGoStreamable(t *testing.T) {
	p := startRouter(t)
	for _, v := range append(sessionRevisions, "") {
		name, want := v, v
		if v == "" {
			name, want = "default", "2025-11-25" // as for the Go SDK: stateless: auto falls back
		}
		t.Run(name, func(t *testing.T) {
			c, err := mcpgoclient.NewStreamableHttpClient(p.url("/mcp"), mcpgotransport.WithHTTPTimeout(testTimeout))
			if err != nil {
				t.Fatal(err)
			}
			mcpgoSession(t, c, v, want)
		})
	}
}

func TestMCPGoLegacySSE(t *testing.T) {
	p := startRouter(t)
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			c, err := mcpgoclient.NewSSEMCPClient(p.url("/sse"), mcpgotransport.WithHTTPClient(&http.Client{}))
			if err != nil {
				t.Fatal(err)
			}
			mcpgoSession(t, c, v, v)
		})
	}
}

func TestMCPGoStdio(t *testing.T) {
	for _, v := range sessionRevisions {
		t.Run(v, func(t *testing.T) {
			c, err := mcpgoclient.NewStdioMCPClient(routerBin(t), nil, "stdio")
			if err != nil {
				t.Fatal(err)
			}
			mcpgoSession(t, c, v, v)
		})
	}
}
