package fleet

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/mcpraw"
)

// TestStatelessParamHeaders: the declarations of a tool, read when its list comes, reach
// the route a stateless tools/call takes: a call whose Mcp-Param-Region header is missing
// or disagrees with its argument is refused (-32020, HTTP 400) before it is forwarded;
// one whose header agrees is forwarded.
func TestStatelessParamHeaders(t *testing.T) {
	b := &scriptBackend{tools: `{"tools":[{"name":"call","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]}`}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(codec.AppendResult(nil, m.ID, []byte(`{"content":[{"type":"text","text":"done"}]}`)))
	}
	g := newStatelessRig(t, b, 0)
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"call","arguments":{"region":"eu"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, c := range []struct {
		region     string // the header's value; "" for none
		status     int
		wantInBody string
	}{
		{"", http.StatusBadRequest, `"code":-32020`},
		{"us", http.StatusBadRequest, `"code":-32020`},
		{"eu", http.StatusOK, `"resultType":"complete"`},
	} {
		req := mcpraw.NewModernRequest(context.Background(), "http://"+g.addr+"/mcp", body, "tools/call", "call")
		if c.region != "" {
			req.Header.Set("Mcp-Param-Region", c.region)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(got), c.wantInBody) {
			t.Errorf("Mcp-Param-Region %q: %d %s, want %d with %s", c.region, resp.StatusCode, got, c.status, c.wantInBody)
		}
	}
}
