package bench

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/bench/internal/rpccheck"
	"github.com/mcprouter/mcprouter/cmd/mcprouter/app"
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// TestMetricsCallCheck: the check BenchmarkMetricsOverhead makes on every answer accepts
// the echo call's result and rejects what a broken router could answer with status 200:
// an error response (unknown tool) or another call's id.
func TestMetricsCallCheck(t *testing.T) {
	testbin.Long(t, "starts a router and a backend")
	r := startRouter(t, startBackend(t), app.AdminOff, 1)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	var m codec.Message
	sid := r.sessions[0]
	echo := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"x"}}}`)
	if err := r.call(sid, echo, []byte(`7`), resp, &m); err != nil {
		t.Fatalf("echo call: %v", err)
	}
	if err := r.call(sid, echo, []byte(`8`), resp, &m); !errors.Is(err, rpccheck.ErrNotResult) {
		t.Errorf("answer with another id: %v, want ErrNotResult", err)
	}
	unknown := []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"demo__nosuchtool","arguments":{}}}`)
	// The router answers it with status 200 and a JSON-RPC error: what the former check
	// (status only) let through.
	if err := r.call(sid, unknown, []byte(`9`), resp, &m); !errors.Is(err, rpccheck.ErrNotResult) || resp.StatusCode() != fasthttp.StatusOK {
		t.Errorf("unknown tool: status %d, %v; want 200 and ErrNotResult", resp.StatusCode(), err)
	}
	// One round of the benchmark's own loop, for the wiring.
	r.round(t, 10)
}
