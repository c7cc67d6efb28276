package upstream

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestParamHeaders: a client's Mcp-Param-* lines become the forwarded request's headers
// as they came; a context without them sets none.
func TestParamHeaders(t *testing.T) {
	var hd fasthttp.RequestHeader
	setParamHeaders(context.Background(), &hd)
	if hd.Len() != 0 {
		t.Fatalf("headers without lines: %s", hd.Header())
	}
	ctx := WithParamHeaders(context.Background(), []byte("Mcp-Param-Region: =?base64?SGVsbG8=?=\nMcp-Param-Tier: gold\nbroken line\n"))
	setParamHeaders(ctx, &hd)
	if got := string(hd.Peek("Mcp-Param-Region")); got != "=?base64?SGVsbG8=?=" {
		t.Errorf("Mcp-Param-Region = %q", got)
	}
	if got := string(hd.Peek("Mcp-Param-Tier")); got != "gold" {
		t.Errorf("Mcp-Param-Tier = %q", got)
	}
	if hd.Len() != 2 {
		t.Errorf("want 2 headers: %s", hd.Header())
	}
}
