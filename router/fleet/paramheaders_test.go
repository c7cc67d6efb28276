package fleet

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/router"
)

// headerTools answers tools/list with a tool that declares an Mcp-Param header
// (x-mcp-header on its region argument) and passes the rest to b.
type headerTools struct{ b *scriptBackend }

func (h headerTools) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		raw, _ := io.ReadAll(r.Body)
		var m codec.Message
		if codec.Scan(raw, &m) == nil && string(m.Method) == "tools/list" {
			w.Header().Set("Content-Type", "application/json")
			w.Write(codec.AppendResult(nil, m.ID, []byte(`{"tools":[{"name":"call","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}]}`)))
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(raw)))
	}
	h.b.ServeHTTP(w, r)
}

// TestStatelessParamHeaders: the declarations of a tool, read when its list comes, reach
// the route a stateless tools/call takes: a call whose Mcp-Param-Region header is missing
// or disagrees with its argument is refused (-32020, HTTP 400) before it is forwarded;
// one whose header agrees is forwarded.
func TestStatelessParamHeaders(t *testing.T) {
	b := &scriptBackend{answers: make(chan string, 4)}
	b.call = func(w http.ResponseWriter, r *http.Request, m *codec.Message) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(codec.AppendResult(nil, m.ID, []byte(`{"content":[{"type":"text","text":"done"}]}`)))
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := startInlineFleet(t, headerTools{b}, inlineWait, Era2025, log)
	r, err := router.New(router.Config{Fleet: f, Logger: log, Stateless: router.StatelessOn, ReplyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		testwait.Cleanup(t, inlineWait, r.Close)
	})
	serveHTTPFront(t, ln, r, 0)
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
		req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "call")
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
