package upstream

import (
	"bytes"
	"context"

	"github.com/valyala/fasthttp"
)

// A request's context may carry header lines, one "Name: value\n" line each, that its
// HTTP request to the backend sets as they are. Two kinds, each under its own key so
// that each transport sets only the ones it speaks:
//
//   - Mcp-Param-* (WithParamHeaders): a 2026-07-28 client mirrors some tool arguments
//     in them (those the tool's inputSchema marks with x-mcp-header), and a backend
//     checks them against the body. The router passes them on as the client sent them
//     (the tool's arguments travel unchanged too); StatelessConn sets them.
//   - the W3C trace context (WithTraceHeaders: traceparent, tracestate, baggage), in
//     headers as well as in params._meta, so that a backend whose HTTP layer is
//     instrumented continues the same trace as one that reads _meta. The router builds
//     the values (package tracing); HTTPConn and StatelessConn set them, transports
//     without headers (stdio) ignore them.
//
// The lines must stay unchanged until Send returns.

// headerLinesKey keys one kind of header lines in a request's context.
type headerLinesKey uint8

const (
	paramHeadersKey headerLinesKey = iota
	traceHeadersKey
)

// WithParamHeaders returns ctx carrying a client's Mcp-Param-* headers
// (transport.StatelessHeaders.Params), for the request sent with it on a StatelessConn.
func WithParamHeaders(ctx context.Context, lines []byte) context.Context {
	return withHeaderLines(ctx, paramHeadersKey, lines)
}

// WithTraceHeaders returns ctx carrying trace context headers, for the request sent
// with it on an HTTPConn or a StatelessConn.
func WithTraceHeaders(ctx context.Context, lines []byte) context.Context {
	return withHeaderLines(ctx, traceHeadersKey, lines)
}

// setParamHeaders sets the Mcp-Param-* headers ctx carries (WithParamHeaders).
func setParamHeaders(ctx context.Context, hd *fasthttp.RequestHeader) {
	setHeaderLines(ctx, paramHeadersKey, hd)
}

// setTraceHeaders sets the trace context headers ctx carries (WithTraceHeaders).
func setTraceHeaders(ctx context.Context, hd *fasthttp.RequestHeader) {
	setHeaderLines(ctx, traceHeadersKey, hd)
}

// hasTraceHeaders reports whether ctx carries trace context headers (WithTraceHeaders).
func hasTraceHeaders(ctx context.Context) bool {
	return ctx.Value(traceHeadersKey) != nil
}

// withHeaderLines returns ctx carrying lines under key; ctx itself when there are none.
func withHeaderLines(ctx context.Context, key headerLinesKey, lines []byte) context.Context {
	if len(lines) == 0 {
		return ctx
	}
	return context.WithValue(ctx, key, lines)
}

// setHeaderLines adds to hd the headers of the lines ctx carries under key; a line
// without ": " or without a name is skipped.
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
