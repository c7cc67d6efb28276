// Package mcphttp maps request paths onto the three MCP HTTP endpoints of a
// transport.HTTPServer. The router (cmd/mcprouter/app) and the reference backend
// (cmd/mcpbackend/server) both serve the same three endpoints, under paths of their own.
// The handler runs on fasthttp's serving goroutine of each request.
package mcphttp

import (
	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/transport"
)

// Paths are where the endpoints are served.
type Paths struct {
	MCP     string // Streamable HTTP
	SSE     string // legacy HTTP+SSE: the event stream (GET)
	Message string // legacy HTTP+SSE: the POST endpoint the stream announces
}

// Handler serves srv's endpoints at p; any other path gets 404 with notFound as its
// body, which should name where the endpoints are.
func Handler(srv *transport.HTTPServer, p Paths, notFound string) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case p.MCP:
			srv.ServeStreamable(ctx)
		case p.SSE:
			srv.ServeLegacyStream(ctx)
		case p.Message:
			srv.ServeLegacyMessage(ctx)
		default:
			ctx.Error(notFound, fasthttp.StatusNotFound)
		}
	}
}
