package tsclient

// The TypeScript SDK client in front of backends of each era through mcprouter (issue
// 12). The v1 SDK speaks 2025-11-25 at most (the v2 client, which speaks 2026-07-28, is
// in eras2026_test.go), so it holds a session with the router in every case: relayed as
// it is in front of a 2025 backend, translated in front of a 2026-07-28 one (the router
// keeps the session and turns resources/subscribe into subscriptions/listen,
// input_required into sampling and elicitation requests on the client's session, the
// session's cancellation into the closing of the upstream request).

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// tsSession is the newest revision the installed TypeScript SDK negotiates.
const tsSession = "2025-11-25"

type erasResult struct {
	Negotiated       string    `json:"negotiated"`
	Server           string    `json:"server"`
	Echo             string    `json:"echo"`
	Read             string    `json:"read"`
	Prompt           string    `json:"prompt"`
	Progress         []float64 `json:"progress"`
	Sampled          string    `json:"sampled"`
	Updated          bool      `json:"updated"`
	CallRejected     bool      `json:"callRejected"`
	BackendCancelled bool      `json:"backendCancelled"`
	EchoAfter        string    `json:"echoAfter"`
	Elicited         string    `json:"elicited"`
	SubscribedBy     string    `json:"subscribedBy"`
}

// startRouter starts mcprouter in front of one backend at url, without a prefix; era
// pins the backend's era ("" lets the router discover it).
func startRouter(t *testing.T, url, era string) string {
	t.Helper()
	cfg := fmt.Sprintf("stateless: on\nbackends:\n  - name: b\n    prefix: \"\"\n    url: %s\n", url)
	if era != "" {
		cfg += fmt.Sprintf("    era: %q\n", era)
	}
	p := testbin.StartRouter(t, "--config", testbin.RouterConfig(t, cfg), "--listen", "127.0.0.1:0")
	return "http://" + p.Addr() + "/mcp"
}

// TestTypeScriptClientEras: the TypeScript SDK client calls a tool, reads a resource,
// subscribes and hears the update, gets a prompt, follows progress, answers sampling
// with its own handler and cancels a running call (the backend stops it), in front of
// the reference backend serving 2025 revisions only and 2026-07-28 only.
func TestTypeScriptClientEras(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, sdk := node(t)
	for _, era := range []backendsrv.Eras{backendsrv.ErasLegacy, backendsrv.ErasModern} {
		t.Run(era.String(), func(t *testing.T) {
			be := mcpbackendtest.Start(t, backendsrv.Config{Name: era.String(), Eras: era, Tick: -1})
			r := runScript[erasResult](t, nodeBin, "eras.mjs", sdk, startRouter(t, be.URL(), ""), "reference")
			t.Logf("%+v", r)
			if r.Negotiated != tsSession || r.Server != "mcprouter" {
				t.Errorf("negotiated %q with %q, want %s with mcprouter", r.Negotiated, r.Server, tsSession)
			}
			checkReference(t, r)
		})
	}
}

// checkReference checks what a client saw on the walk of the reference backend
// (testdata/walk.mjs).
func checkReference(t *testing.T, r erasResult) {
	t.Helper()
	for _, c := range []struct{ what, got, want string }{
		{"tools/call echo", r.Echo, "from typescript"},
		{"resources/read", r.Read, "hello you"},
		{"prompts/get", r.Prompt, "Ahoy, Ada!"},
		{"sampling", r.Sampled, "sampled: say hi"},
		{"echo after the cancellation", r.EchoAfter, "still here"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if !slices.Equal(r.Progress, []float64{1, 2, 3}) {
		t.Errorf("progress %v, want 1, 2, 3", r.Progress)
	}
	if !r.Updated {
		t.Errorf("no notifications/resources/updated for memo://board after %s", r.SubscribedBy)
	}
	if !r.CallRejected || !r.BackendCancelled {
		t.Errorf("cancellation: call rejected %v, backend stopped it %v", r.CallRejected, r.BackendCancelled)
	}
}

// elicitingBackend is the Go SDK conformance everything-server in one mode, with the
// tool of it that elicits and the text that tool returns once the client's handler
// answered (testdata/walk.mjs's elicit).
type elicitingBackend struct{ name, stateless, tool, want string }

// elicitingBackends: stateful (2025: elicitation/create on the session) and stateless
// (2026-07-28: an input_required result).
var elicitingBackends = []elicitingBackend{
	{"2025", "false", "test_elicitation", "Elicitation result: action=accept, content=map[username:ada]"},
	{"2026", "true", "test_input_required_result_elicitation", "Hello, Ada!"},
}

// startEliciting starts the everything-server binary in be's mode and a router in
// front of it pinned to its era, and returns the router's URL.
func startEliciting(t *testing.T, everything string, be elicitingBackend) string {
	t.Helper()
	addr := testbin.FreeAddr(t)
	testbin.Start(t, testbin.Spec{Name: "everything-server", Bin: everything, Args: []string{"-http", addr, "-stateless=" + be.stateless}})
	testbin.WaitListening(t, addr, mcpbackendtest.Wait)
	return startRouter(t, "http://"+addr+"/mcp", be.name)
}

// TestTypeScriptClientErasElicitation: the TypeScript SDK client's elicitation handler
// answers the Go SDK conformance server in stateful mode (2025: elicitation/create
// relayed) and in stateless mode (2026-07-28: its input_required result becomes
// elicitation/create on the client's session, and the router retries with the answer).
func TestTypeScriptClientErasElicitation(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, sdk := node(t)
	everything := testbin.BuildFixture(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	for _, be := range elicitingBackends {
		t.Run("backend "+be.name, func(t *testing.T) {
			r := runScript[erasResult](t, nodeBin, "eras.mjs", sdk, startEliciting(t, everything, be), "elicit", be.tool, "Who are you?")
			if r.Negotiated != tsSession || r.Elicited != be.want {
				t.Fatalf("negotiated %q, elicited %q; want %s, %q", r.Negotiated, r.Elicited, tsSession, be.want)
			}
		})
	}
}
