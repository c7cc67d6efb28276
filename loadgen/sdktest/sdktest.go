// Package sdktest starts MCP servers built with the official Go SDK for mcpload's
// tests, and the router's: the reference implementation is the fairest judge of the
// client side. Only test binaries import it, so the SDK never ends up in the mcpload
// binary.
package sdktest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Counters count what a server did, for exact-count assertions.
type Counters struct {
	Calls      atomic.Int64 // tools/call of echo
	Touches    atomic.Int64 // tools/call of touch
	Subscribes atomic.Int64
}

type echoIn struct {
	Text string `json:"text"`
}

type touchIn struct {
	URI string `json:"uri"`
}

// NewServer returns an SDK server with:
//   - tool "echo" {text} returning its text as text content;
//   - tool "touch" {uri} sending notifications/resources/updated for uri to its
//     subscribers;
//   - tool "pingclient" that pings the calling client (a server-to-client request)
//     and answers "pong" once the client has answered;
//   - tool "fail" returning a tool error (isError);
//   - resources test://r/0 .. test://r/{resources-1} (subscribable);
//   - prompt "greet" {name}.
//
// PageSize sets the list page size (0: the SDK default).
func NewServer(c *Counters, resources, pageSize int) *mcp.Server {
	var srv *mcp.Server
	srv = mcp.NewServer(&mcp.Implementation{Name: "sdktest", Version: "1.0.0"}, &mcp.ServerOptions{
		PageSize: pageSize,
		SubscribeHandler: func(context.Context, *mcp.SubscribeRequest) error {
			c.Subscribes.Add(1)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "returns its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			c.Calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "touch", Description: "updates a resource"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in touchIn) (*mcp.CallToolResult, any, error) {
			c.Touches.Add(1)
			if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "pingclient", Description: "pings the calling client before answering"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := req.Session.Ping(ctx, nil); err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "ping: " + err.Error()}}}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail", Description: "always fails"},
		func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failed"}}}, nil, nil
		})
	for i := range resources {
		uri := fmt.Sprintf("test://r/%d", i)
		srv.AddResource(&mcp.Resource{URI: uri, Name: fmt.Sprintf("r%d", i), MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "content"}}}, nil
			})
	}
	srv.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["name"]}}}}, nil
		})
	return srv
}

// Mode picks the HTTP flavour of StartHTTP.
type Mode int

const (
	SessionSSE  Mode = iota // sessions, replies as SSE streams
	SessionJSON             // sessions, replies as JSON bodies
	Stateless               // no sessions, JSON replies (also serves 2026-07-28)
	LegacySSE               // 2024-11-05 HTTP+SSE
)

// StartHTTP serves srv on a loopback httptest server and returns it; the MCP endpoint
// is its URL + "/mcp". The caller closes it.
func StartHTTP(srv *mcp.Server, mode Mode) *httptest.Server {
	return httptest.NewServer(handler(srv, mode))
}

// handler serves srv at /mcp in mode.
func handler(srv *mcp.Server, mode Mode) http.Handler {
	get := func(*http.Request) *mcp.Server { return srv }
	var h http.Handler
	switch mode {
	case LegacySSE:
		h = mcp.NewSSEHandler(get, nil)
	default:
		h = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
			Stateless:    mode == Stateless,
			JSONResponse: mode != SessionSSE,
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	return mux
}

// Serve serves srv on loopback (sessions, SSE replies) until the test ends, and returns
// its address: the MCP endpoint is http://<address>/mcp. The end closes every
// connection without waiting for handlers (a tool still blocked, a session's DELETE
// waiting for it), which httptest.Server.Close would wait for.
func Serve(t testing.TB, srv *mcp.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: handler(srv, SessionSSE)}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return l.Addr().String()
}

// StdioEnv is the environment variable that makes RunStdioIfChild serve stdio.
const StdioEnv = "MCPLOAD_SDKTEST_STDIO"

// Main is the whole TestMain of a package whose tests start the stdio test server:
// func TestMain(m *testing.M) { sdktest.Main(m) }.
func Main(m *testing.M) {
	RunStdioIfChild()
	os.Exit(m.Run())
}

// RunStdioIfChild serves the test server over stdio and exits when the process was
// started with StdioEnv=1 (tests re-execute their own binary as the stdio server).
// Call it first in TestMain (Main does).
func RunStdioIfChild() {
	if os.Getenv(StdioEnv) != "1" {
		return
	}
	var c Counters
	err := NewServer(&c, 10, 4).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
