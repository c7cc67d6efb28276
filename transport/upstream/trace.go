package upstream

import (
	"context"

	"github.com/valyala/fasthttp"
)

// A traced request carries its W3C trace context (traceparent, tracestate, baggage) to
// an HTTP backend in headers as well as in params._meta, so that a backend whose HTTP
// layer is instrumented continues the same trace as one that reads _meta. The router
// builds the values (package tracing); they reach the request through its context.

// WithTraceHeaders returns ctx carrying trace context headers, one "name: value\n" line
// each, for the request sent with it on an HTTPConn or a StatelessConn. lines must stay
// unchanged until Send returns. Transports without headers (stdio) ignore them.
func WithTraceHeaders(ctx context.Context, lines []byte) context.Context {
	return withHeaderLines(ctx, traceHeadersKey, lines)
}

// setTraceHeaders sets the trace context headers ctx carries (WithTraceHeaders).
func setTraceHeaders(ctx context.Context, hd *fasthttp.RequestHeader) {
	setHeaderLines(ctx, traceHeadersKey, hd)
}
