package tsclient

// The TypeScript SDK v2 client (@modelcontextprotocol/client, which speaks 2026-07-28)
// in front of backends of each era through mcprouter (issue 12). Set to negotiate
// ("auto": server/discover first, initialize if the server is not modern) or pinned to
// 2026-07-28, it speaks 2026-07-28 with the router whatever the backend's era: the router
// relays to a 2026-07-28 backend and translates for a 2025 one. On its default setting
// ("legacy", the plain initialize) it holds a 2025-11-25 session; that is its only way
// to 2025-11-25, since it refuses a pin below 2026-07-28.

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// clientV2 finds the TypeScript SDK v2 client package that .ci/deps.sh installs next to
// the v1 SDK (node finds Node); without it the test skips outside CI and fails in CI.
func clientV2(t *testing.T) (nodeBin, pkg string) {
	nodeBin, sdk := node(t)
	pkg = filepath.Join(filepath.Dir(sdk), "client")
	if _, err := os.Stat(filepath.Join(pkg, "dist", "index.mjs")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing: .ci/deps.sh should have installed it", pkg)
		}
		t.Skipf("the TypeScript SDK v2 client is not installed (bash .ci/deps.sh): %v", err)
	}
	return nodeBin, pkg
}

// v2Negotiations are the v2 client's versionNegotiation settings under test and the
// revision each gets from the router.
var v2Negotiations = []struct{ name, mode, negotiated string }{
	{"auto", "auto", "2026-07-28"},
	{"pinned 2026-07-28", "pin:2026-07-28", "2026-07-28"},
	{"legacy", "legacy", "2025-11-25"},
}

type eras2026Result struct {
	erasResult
	Era          string `json:"era"`
	Session      string `json:"session"`
	SubscribedBy string `json:"subscribedBy"`
}

// TestTypeScriptClient2026Eras: the v2 client, on 2026-07-28 (negotiated or pinned) and
// on a 2025-11-25 session, calls a tool, reads a resource, gets a prompt, follows progress,
// answers sampling with its own handler, hears the update of a resource it subscribed
// to and cancels a running call (the backend stops it), in front of the reference
// backend serving 2025 revisions only and 2026-07-28 only.
func TestTypeScriptClient2026Eras(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, pkg := clientV2(t)
	for _, era := range []backendsrv.Eras{backendsrv.ErasLegacy, backendsrv.ErasModern} {
		for _, n := range v2Negotiations {
			t.Run(era.String()+"/"+n.name, func(t *testing.T) {
				be := mcpbackendtest.Start(t, backendsrv.Config{Name: era.String(), Eras: era, Tick: -1})
				r := runScript[eras2026Result](t, nodeBin, "eras2026.mjs", pkg, n.mode, startRouter(t, be.URL(), ""), "reference")
				t.Logf("%+v", r)
				if r.Negotiated != n.negotiated || r.Server != "mcprouter" {
					t.Errorf("negotiated %q (era %q) with %q, want %s with mcprouter", r.Negotiated, r.Era, r.Server, n.negotiated)
				}
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
			})
		}
	}
}

// TestTypeScriptClient2026ErasElicitation: the v2 client's elicitation handler answers
// the Go SDK conformance server in stateful mode (2025) and stateless mode (2026-07-28),
// the client on 2026-07-28 (the elicitation comes as an input_required result, the
// client retries with the answer) and on a 2025-11-25 session (elicitation/create on
// the session).
func TestTypeScriptClient2026ErasElicitation(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, pkg := clientV2(t)
	everything := testbin.BuildFixture(t, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	for _, be := range []struct{ name, stateless, tool, want string }{
		{"2025", "false", "test_elicitation", "Elicitation result: action=accept, content=map[username:ada]"},
		{"2026", "true", "test_input_required_result_elicitation", "Hello, Ada!"},
	} {
		for _, n := range v2Negotiations {
			t.Run("backend "+be.name+"/"+n.name, func(t *testing.T) {
				addr := testbin.FreeAddr(t)
				testbin.Start(t, testbin.Spec{Name: "everything-server", Bin: everything, Args: []string{"-http", addr, "-stateless=" + be.stateless}})
				testbin.WaitListening(t, addr, mcpbackendtest.Wait)
				url := startRouter(t, "http://"+addr+"/mcp", be.name)
				r := runScript[eras2026Result](t, nodeBin, "eras2026.mjs", pkg, n.mode, url, "elicit", be.tool, "Who are you?")
				t.Logf("%+v", r)
				if r.Negotiated != n.negotiated || r.Elicited != be.want {
					t.Fatalf("negotiated %q, elicited %q; want %s, %q", r.Negotiated, r.Elicited, n.negotiated, be.want)
				}
			})
		}
	}
}
