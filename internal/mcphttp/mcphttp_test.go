package mcphttp

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// An unknown path gets 404 and the given message, before srv is touched (nil here).
func TestHandlerNotFound(t *testing.T) {
	h := Handler(nil, Paths{MCP: "/mcp", SSE: "/sse", Message: "/message"}, "not found: the MCP endpoint is /mcp")
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/elsewhere")
	h(&ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusNotFound || string(ctx.Response.Body()) != "not found: the MCP endpoint is /mcp" {
		t.Errorf("got %d %q", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}
