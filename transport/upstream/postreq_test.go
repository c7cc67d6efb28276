package upstream

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// TestPostHeadersKept: the POSTs of one HTTPConn reuse their requests with the headers
// kept (acquirePost), and each still carries exactly what prepare gives it: no session
// or revision on the initialize, the session and the revision after it, a new revision
// once it changes, trace headers only on the POST whose context has them, and always
// its own body.
func TestPostHeadersKept(t *testing.T) {
	type seen struct{ session, version, trace, ctype, accept, body string }
	var mu sync.Mutex
	var got []seen
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Header.Get("Mcp-Session-Id"), r.Header.Get("Mcp-Protocol-Version"),
			r.Header.Get("traceparent"), r.Header.Get("Content-Type"), r.Header.Get("Accept"), string(body)})
		mu.Unlock()
		var m codec.Message
		if codec.Scan(body, &m) != nil || m.Kind != codec.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if string(m.Method) == "initialize" {
			w.Header().Set("Mcp-Session-Id", "s1")
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{}}`)
	})
	c, _ := dialHTTP(t, srv.URL, HTTPOptions{})
	defer c.Close()
	ctx := testCtx(t)
	const trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	steps := []struct {
		version string // set before the POST, "" for no change
		traced  bool
		want    seen
	}{
		{"", false, seen{}},
		{"2025-06-18", false, seen{session: "s1", version: "2025-06-18"}},
		{"", false, seen{session: "s1", version: "2025-06-18"}},
		{"", true, seen{session: "s1", version: "2025-06-18", trace: trace}},
		{"", false, seen{session: "s1", version: "2025-06-18"}},
		{"2025-11-25", false, seen{session: "s1", version: "2025-11-25"}},
		{"", false, seen{session: "s1", version: "2025-11-25"}},
	}
	for i, st := range steps {
		if st.version != "" {
			c.SetProtocolVersion(st.version)
		}
		msg := msgCall(i+1, "echo", "call "+strconv.Itoa(i))
		if i == 0 {
			msg = msgInit
		}
		sctx := ctx
		if st.traced {
			sctx = WithTraceHeaders(ctx, []byte("traceparent: "+trace))
		}
		if err := c.Send(sctx, []byte(msg)); err != nil {
			t.Fatalf("POST %d: %v", i, err)
		}
		mu.Lock()
		g := got[len(got)-1]
		mu.Unlock()
		want := st.want
		want.ctype, want.accept, want.body = "application/json", "application/json, text/event-stream", msg
		if g != want {
			t.Errorf("POST %d: the backend saw %+v, want %+v", i, g, want)
		}
	}
}
