package router

import (
	"strings"
	"testing"
)

// TestReshapeErrorWithoutReshaper: a -32042 for a 2026-07-28 client whose fleet cannot
// reshape it still never reaches the client with that code: it becomes an internal
// error that names it. Other errors are not reshaped.
func TestReshapeErrorWithoutReshaper(t *testing.T) {
	r := newTestRouter(t, nil)
	x := statelessExchange(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+testMeta+`}}}`)
	out := string(r.ScreenReply(x, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"m","data":{"elicitations":[]}}}`), nil))
	if !strings.Contains(out, `"code":-32603`) || !strings.Contains(out, "-32042") || !strings.Contains(out, `"id":1`) {
		t.Fatalf("screened %s, want an internal error naming -32042", out)
	}
	if re := r.reshapeError(x, []byte(`{"code":-32602,"message":"m"}`)); re != nil {
		t.Fatalf("invalid params reshaped: %s", re)
	}
}
