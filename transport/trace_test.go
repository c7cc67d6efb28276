package transport

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func TestTraceHeadersTake(t *testing.T) {
	var h fasthttp.RequestHeader
	h.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01")
	h.Set("Tracestate", "congo=t61rcWkgMzE")
	h.Set("Baggage", strings.Repeat("k=v,", maxTraceHeader)) // past the bound: dropped
	var th TraceHeaders
	th.take(true, &h)
	if string(th.Parent) != "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01" || string(th.State) != "congo=t61rcWkgMzE" || th.Baggage != nil {
		t.Fatalf("took %q %q %q", th.Parent, th.State, th.Baggage)
	}
	th.take(false, &h)
	if th.Parent != nil || th.State != nil || th.Baggage != nil {
		t.Fatalf("off, still holds %q %q %q", th.Parent, th.State, th.Baggage)
	}
	var none fasthttp.RequestHeader
	th.take(true, &none)
	if th.Parent != nil || th.State != nil || th.Baggage != nil {
		t.Fatalf("no headers, holds %q %q %q", th.Parent, th.State, th.Baggage)
	}
}
