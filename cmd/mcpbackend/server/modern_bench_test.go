package server_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	"github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
)

// BenchmarkEchoHTTPEras measures tools/call of echo on the same backend, same run, in
// both eras: a 2025-06-18 session call and a 2026-07-28 stateless call (its _meta read
// and judged, its headers checked against the body, its result decorated). The
// stateless call should cost no more than the session call.
func BenchmarkEchoHTTPEras(b *testing.B) {
	addr := mcpbackendtest.Start(b, server.Config{Tick: -1}).Addr()
	hc := &fasthttp.HostClient{Addr: addr, MaxConns: 256, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	b.Run("2025-06-18-session", func(b *testing.B) {
		sid := benchInitialize(b, hc, addr)
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		b.ReportAllocs()
		for b.Loop() {
			benchCall(b, hc, addr, sid, req, resp)
		}
	})
	b.Run("2026-07-28-stateless", func(b *testing.B) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		b.ReportAllocs()
		for b.Loop() {
			benchCallModern(b, hc, addr, req, resp)
		}
	})
}

const benchModernTail = `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"the quick brown fox jumps over the lazy dog"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}}}`

func benchCallModern(b *testing.B, hc *fasthttp.HostClient, addr string, req *fasthttp.Request, resp *fasthttp.Response) {
	var buf [512]byte
	body := append(buf[:0], benchEchoHead...)
	body = strconv.AppendInt(body, benchIDs.Add(1), 10)
	body = append(body, benchModernTail...)
	benchPost(req, addr, "", body)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	if err := hc.Do(req, resp); err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusOK || !bytes.Contains(resp.Body(), echoReplyMark) {
		b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
	}
}
