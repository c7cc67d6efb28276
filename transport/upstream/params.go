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

// WithParamHeaders returns ctx carrying a client's Mcp-Param-* headers, one
// "Name: value\n" line each (transport.StatelessHeaders.Params), for the request sent
// with it on a StatelessConn. lines must stay unchanged until Send returns.
func WithParamHeaders(ctx context.Context, lines []byte) context.Context {
	return withHeaderLines(ctx, paramHeadersKey, lines)
}

// setParamHeaders sets the Mcp-Param-* headers ctx carries (WithParamHeaders).
func setParamHeaders(ctx context.Context, hd *fasthttp.RequestHeader) {
	setHeaderLines(ctx, paramHeadersKey, hd)
}

// headerLinesKey keys the header lines, one "Name: value\n" line each, that a request's
// context carries for its HTTP request: the client's Mcp-Param-* headers, the trace
// context headers (trace.go).
type headerLinesKey uint8

const (
	paramHeadersKey headerLinesKey = iota
	traceHeadersKey
)

// withHeaderLines returns ctx carrying lines under key; ctx itself when there are none.
func withHeaderLines(ctx context.Context, key headerLinesKey, lines []byte) context.Context {
	if len(lines) == 0 {
		return ctx
	}
	return context.WithValue(ctx, key, lines)
}

// setHeaderLines adds to hd the headers of the lines ctx carries under key.
func setHeaderLines(ctx context.Context, key headerLinesKey, hd *fasthttp.RequestHeader) {
	lines, _ := ctx.Value(key).([]byte)
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
