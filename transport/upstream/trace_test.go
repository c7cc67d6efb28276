package upstream

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestTraceHeaders(t *testing.T) {
	var hd fasthttp.RequestHeader
	setTraceHeaders(context.Background(), &hd)
	if hd.Peek("traceparent") != nil {
		t.Fatal("a context without trace headers set some")
	}
	ctx := WithTraceHeaders(context.Background(), []byte("traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\ntracestate: congo=t61rcWkgMzE\n"))
	setTraceHeaders(ctx, &hd)
	if got := string(hd.Peek("traceparent")); got != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Errorf("traceparent %q", got)
	}
	if got := string(hd.Peek("tracestate")); got != "congo=t61rcWkgMzE" {
		t.Errorf("tracestate %q", got)
	}
}
