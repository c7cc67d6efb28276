// Command peers serves the same MCP `echo` tool with other MCP implementations, so
// that mcprouter (and anything else) can be measured side by side with them using
// mcpload:
//
//	peers -impl gosdk -mode stateless -addr 127.0.0.1:8081   # official Go SDK
//	peers -impl mcpgo -mode session   -addr 127.0.0.1:8082   # mark3labs/mcp-go
//	mcpload --url http://127.0.0.1:8081/mcp --tool echo --args '{"text":"hi"}' --json gosdk.json
//
// The tool returns its `text` argument as text content. Modes:
//
//	stateless  Streamable HTTP without sessions, JSON replies (gosdk also serves the
//	           stateless 2026-07-28 revision in this mode)
//	session    Streamable HTTP with sessions; gosdk replies as SSE streams, mcpgo as JSON
//	json       gosdk only: Streamable HTTP with sessions and JSON replies
//	sse        legacy HTTP+SSE (2024-11-05); the stream is at /sse
//	stdio      newline-delimited JSON on stdin/stdout (-addr is ignored)
//
// This is a separate Go module so that the router's module does not depend on the
// peers it is compared with.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	impl := flag.String("impl", "gosdk", "implementation: gosdk (modelcontextprotocol/go-sdk) or mcpgo (mark3labs/mcp-go)")
	mode := flag.String("mode", "stateless", "stateless, session, json (gosdk), sse or stdio")
	addr := flag.String("addr", "127.0.0.1:8081", "listen address (loopback by default)")
	path := flag.String("path", "/mcp", "endpoint path for Streamable HTTP")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *impl, *mode, *addr, *path); err != nil {
		log.Fatal(err)
	}
}

func serve(ctx context.Context, impl, mode, addr, path string) error {
	var h http.Handler
	var err error
	switch impl {
	case "gosdk":
		h, err = gosdk(ctx, mode)
	case "mcpgo":
		h, err = mcpGo(mode)
	default:
		return fmt.Errorf("unknown -impl %q", impl)
	}
	if err != nil || h == nil { // stdio ran to completion, or a bad mode
		return err
	}
	mux := http.NewServeMux()
	if mode == "sse" {
		mux.Handle("/", h) // the SSE handlers route their own stream and message paths
	} else {
		mux.Handle(path, h)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("%s %s serving on http://%s%s\n", impl, mode, ln.Addr(), map[bool]string{true: "/sse", false: path}[mode == "sse"])
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

// gosdk builds the official Go SDK server; in stdio mode it serves until stdin ends.
func gosdk(ctx context.Context, mode string) (http.Handler, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "peers-gosdk", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "returns its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	get := func(*http.Request) *mcp.Server { return srv }
	switch mode {
	case "stateless":
		return mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}), nil
	case "session":
		return mcp.NewStreamableHTTPHandler(get, nil), nil
	case "json":
		return mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{JSONResponse: true}), nil
	case "sse":
		sse := mcp.NewSSEHandler(get, nil)
		mux := http.NewServeMux()
		mux.Handle("/sse", sse)
		return mux, nil
	case "stdio":
		return nil, srv.Run(ctx, &mcp.StdioTransport{})
	}
	return nil, fmt.Errorf("gosdk: unknown -mode %q", mode)
}

// mcpGo builds the mark3labs/mcp-go server; in stdio mode it serves until stdin ends.
func mcpGo(mode string) (http.Handler, error) {
	srv := mcpgoserver.NewMCPServer("peers-mcpgo", "1.0.0", mcpgoserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("echo", mcpgo.WithDescription("returns its text"), mcpgo.WithString("text", mcpgo.Required())),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("text", "")), nil
		})
	switch mode {
	case "stateless":
		return mcpgoserver.NewStreamableHTTPServer(srv, mcpgoserver.WithStateLess(true)), nil
	case "session":
		return mcpgoserver.NewStreamableHTTPServer(srv), nil
	case "sse":
		return mcpgoserver.NewSSEServer(srv), nil
	case "stdio":
		return nil, mcpgoserver.ServeStdio(srv)
	}
	return nil, fmt.Errorf("mcpgo: unknown -mode %q", mode)
}
