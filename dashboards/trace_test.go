package dashboards

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testio"
)

// recorder is a reverse proxy between the router and the backend that keeps a copy of
// every request body the router sends upstream.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

// start starts the proxy in front of the backend at backendURL and returns its URL.
func (r *recorder) start(t *testing.T, backendURL string) string {
	t.Helper()
	return testio.Tap(t, backendURL, func(_ *http.Request, body []byte) {
		r.mu.Lock()
		r.bodies = append(r.bodies, string(body))
		r.mu.Unlock()
	})
}

func (r *recorder) find(substr string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if strings.Contains(b, substr) {
			return b
		}
	}
	return ""
}

// TestTraceparentPassedOn: a client's params._meta.traceparent (and tracestate) reach the
// backend byte for byte, while the router rewrites the id, the tool name and the
// progress token around them; and the router's log lines about the request carry the
// traceparent.
func TestTraceparentPassedOn(t *testing.T) {
	rec := &recorder{}
	s := startStackVia(t, slog.LevelDebug, func(u string) string { return rec.start(t, u) })
	c := s.open()

	const (
		tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		ts = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	)
	meta := `"_meta":{"traceparent":"` + tp + `","tracestate":"` + ts + `","progressToken":"client-token-7"}`
	body := c.call("tools/call", `{"name":"demo__echo","arguments":{"text":"traced"},`+meta+`}`)
	if !strings.Contains(body, "traced") {
		t.Fatalf("echo: %s", body)
	}

	upstream := rec.find("traced")
	if upstream == "" {
		t.Fatal("the tools/call never reached the backend through the recording proxy")
	}
	// Rewritten: the tool name (prefix stripped), the id and the progress token.
	if !strings.Contains(upstream, `"name":"echo"`) || strings.Contains(upstream, "client-token-7") {
		t.Errorf("upstream request not rewritten as expected: %s", upstream)
	}
	// Unchanged: the trace context, byte for byte, in its place.
	if !strings.Contains(upstream, `"_meta":{"traceparent":"`+tp+`","tracestate":"`+ts+`","progressToken":`) {
		t.Errorf("trace context changed on its way to the backend:\n sent: %s\n got:  %s", meta, upstream)
	}

	logs := s.logs.String()
	for _, msg := range []string{`msg="request received"`, `msg="request done"`} {
		found := false
		for _, line := range strings.Split(logs, "\n") {
			if strings.Contains(line, msg) && strings.Contains(line, "method=tools/call") && strings.Contains(line, "traceparent="+tp) {
				found = true
				if msg == `msg="request done"` && !strings.Contains(line, "backend=demo") {
					t.Errorf("request done line without the backend: %s", line)
				}
			}
		}
		if !found {
			t.Errorf("no %s log line with traceparent=%s", msg, tp)
		}
	}
}
