package upstream

import (
	"bytes"
	"context"

	"github.com/valyala/fasthttp"
)

// A 2026-07-28 client mirrors some tool arguments in Mcp-Param-* headers (those the
// tool's inputSchema marks with x-mcp-header), and a backend checks them against the
// body. The router passes them on as the client sent them (the tool's arguments travel
// unchanged too), carried to StatelessConn.Send by the request's context.

type paramHeadersKey struct{}

// WithParamHeaders returns ctx carrying a client's Mcp-Param-* headers, one
// "Name: value\n" line each (transport.StatelessHeaders.Params), for the request sent
// with it on a StatelessConn. lines must stay unchanged until Send returns.
func WithParamHeaders(ctx context.Context, lines []byte) context.Context {
	if len(lines) == 0 {
		return ctx
	}
	return context.WithValue(ctx, paramHeadersKey{}, lines)
}

// setParamHeaders sets the Mcp-Param-* headers ctx carries (WithParamHeaders).
func setParamHeaders(ctx context.Context, hd *fasthttp.RequestHeader) {
	lines, _ := ctx.Value(paramHeadersKey{}).([]byte)
	addHeaderLines(hd, lines)
}

// addHeaderLines adds the headers of lines, one "Name: value\n" line each, to hd.
func addHeaderLines(hd *fasthttp.RequestHeader, lines []byte) {
	for len(lines) > 0 {
		line := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			line, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		name, value, ok := bytes.Cut(line, []byte(": "))
		if ok && len(name) > 0 {
			hd.AddBytesKV(name, value)
		}
	}
}
