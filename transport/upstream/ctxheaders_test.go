package upstream

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestContextHeaders: each kind of header lines a context carries becomes the request's
// headers as they came, only by its own setter; a line without ": " is skipped; a
// context without lines sets none.
func TestContextHeaders(t *testing.T) {
	for _, c := range []struct {
		name       string
		with       func(context.Context, []byte) context.Context
		set, other func(context.Context, *fasthttp.RequestHeader)
		lines      string
		want       [][2]string
	}{
		{"params", WithParamHeaders, setParamHeaders, setTraceHeaders,
			"Mcp-Param-Region: =?base64?SGVsbG8=?=\nMcp-Param-Tier: gold\nbroken line\n",
			[][2]string{{"Mcp-Param-Region", "=?base64?SGVsbG8=?="}, {"Mcp-Param-Tier", "gold"}}},
		{"trace", WithTraceHeaders, setTraceHeaders, setParamHeaders,
			"traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\ntracestate: congo=t61rcWkgMzE",
			[][2]string{{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, {"tracestate", "congo=t61rcWkgMzE"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var hd fasthttp.RequestHeader
			c.set(context.Background(), &hd)
			if hd.Len() != 0 {
				t.Fatalf("headers without lines: %s", hd.Header())
			}
			ctx := c.with(context.Background(), []byte(c.lines))
			c.other(ctx, &hd)
			if hd.Len() != 0 {
				t.Fatalf("the other kind's setter set %s", hd.Header())
			}
			c.set(ctx, &hd)
			for _, kv := range c.want {
				if got := string(hd.Peek(kv[0])); got != kv[1] {
					t.Errorf("%s = %q, want %q", kv[0], got, kv[1])
				}
			}
			if hd.Len() != len(c.want) {
				t.Errorf("want %d headers: %s", len(c.want), hd.Header())
			}
		})
	}
}
