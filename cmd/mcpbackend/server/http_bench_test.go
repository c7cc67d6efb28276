package server_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
	"github.com/mcprouter/mcprouter/internal/testwait"
)

const benchVersion = "2025-06-18"

// The echo request around its id: every request gets its own id, as concurrent requests
// of one session must.
const (
	benchEchoHead = `{"jsonrpc":"2.0","id":`
	benchEchoTail = `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"the quick brown fox jumps over the lazy dog"}}}`
)

var benchIDs atomic.Int64

// BenchmarkEchoHTTP measures tools/call of echo over Streamable HTTP on loopback (JSON
// replies), from a fasthttp client in the same process, against this backend and, side
// by side, the official Go SDK's server with the same tool: absolute numbers on a shared
// machine mean little, the ratio does. allocs/op counts client and server together.
func BenchmarkEchoHTTP(b *testing.B) {
	targets := []struct {
		name  string
		start func(b *testing.B) string // returns host:port
	}{
		{"mcpbackend", func(b *testing.B) string {
			return mcpbackendtest.Start(b, server.Config{Tick: -1}).Addr()
		}},
		{"go-sdk", startSDKEcho},
	}
	for _, tg := range targets {
		b.Run(tg.name, func(b *testing.B) {
			addr := tg.start(b) // lives as long as this sub-benchmark and its modes
			for _, mode := range []string{"serial", "parallel"} {
				b.Run(mode, func(b *testing.B) { benchEcho(b, addr, mode == "parallel") })
			}
		})
	}
}

func benchEcho(b *testing.B, addr string, parallel bool) {
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 256, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	sid := benchInitialize(b, hc, addr)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchEchoHead) + len(benchEchoTail) + 6))
	if !parallel {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for b.Loop() {
			benchCall(b, hc, addr, sid, req, resp)
		}
		return
	}
	b.SetParallelism(8) // 8 x GOMAXPROCS concurrent requests
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			benchCall(b, hc, addr, sid, req, resp)
		}
	})
}

// benchPost makes req a POST of body to the server at addr, in session sid when set.
func benchPost(req *fasthttp.Request, addr, sid string, body []byte) {
	mcpraw.FastPost(req, "http://"+addr+server.PathMCP, sid, benchVersion)
	req.SetBody(body)
}

var echoReplyMark = []byte(`"text":"the quick brown fox jumps over the lazy dog"`)

func benchCall(b *testing.B, hc *fasthttp.HostClient, addr, sid string, req *fasthttp.Request, resp *fasthttp.Response) {
	var buf [256]byte
	body := append(buf[:0], benchEchoHead...)
	body = strconv.AppendInt(body, benchIDs.Add(1), 10)
	body = append(body, benchEchoTail...)
	benchPost(req, addr, sid, body)
	if err := hc.Do(req, resp); err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusOK || !bytes.Contains(resp.Body(), echoReplyMark) {
		b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
	}
}

// benchInitialize opens a session and returns its id.
func benchInitialize(b *testing.B, hc *fasthttp.HostClient, addr string) string {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	benchPost(req, addr, "", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+benchVersion+`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	if err := hc.Do(req, resp); err != nil || resp.StatusCode() != fasthttp.StatusOK {
		b.Fatalf("initialize: %v %d %s", err, resp.StatusCode(), resp.Body())
	}
	sid := string(resp.Header.Peek("Mcp-Session-Id"))
	benchPost(req, addr, sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err := hc.Do(req, resp); err != nil || resp.StatusCode() != fasthttp.StatusAccepted {
		b.Fatalf("initialized: %v %d %s", err, resp.StatusCode(), resp.Body())
	}
	return sid
}

type echoIn struct {
	Text string `json:"text"`
}

// startSDKEcho serves the same echo tool with the official Go SDK's Streamable HTTP
// handler (JSON responses) on net/http, for the side-by-side figure.
func startSDKEcho(b *testing.B) string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk-echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Returns its text argument."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoIn, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, in, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go hs.Serve(ln)
	testwait.Cleanup(b, mcpbackendtest.Wait, hs.Shutdown)
	return ln.Addr().String()
}
