package tsclient

// The TypeScript SDK v2 client (@modelcontextprotocol/client, which speaks 2026-07-28)
// in front of backends of each era through mcprouter (issue 12). Set to negotiate
// ("auto": server/discover first, initialize if the server is not modern) or pinned to
// 2026-07-28, it speaks 2026-07-28 with the router whatever the backend's era: the router
// relays to a 2026-07-28 backend and translates for a 2025 one. On its default setting
// ("legacy", the plain initialize) it holds a 2025-11-25 session; that is its only way
// to 2025-11-25, since it refuses a pin below 2026-07-28.

import (
	"testing"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

// clientV2 finds Node and the TypeScript SDK v2 client package that .ci/deps.sh
// installs next to the v1 SDK.
func clientV2(t *testing.T) (nodeBin, pkg string) {
	nodeBin, pkgs := testbin.Node(t, "@modelcontextprotocol/client")
	return nodeBin, pkgs[0]
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
	Era     string `json:"era"`
	Session string `json:"session"`
}

// TestTypeScriptClient2026Eras: the v2 client, on 2026-07-28 (negotiated or pinned) and
// on a 2025-11-25 session, calls a tool, reads a resource, gets a prompt, follows
// progress, answers sampling with its own handler, hears the update of a resource it
// subscribed to and cancels a running call (the backend stops it), in front of the
// reference backend serving 2025 revisions only and 2026-07-28 only.
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
				checkReference(t, r.erasResult)
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
	for _, be := range elicitingBackends {
		for _, n := range v2Negotiations {
			t.Run("backend "+be.name+"/"+n.name, func(t *testing.T) {
				r := runScript[eras2026Result](t, nodeBin, "eras2026.mjs", pkg, n.mode, startEliciting(t, everything, be), "elicit", be.tool, "Who are you?")
				t.Logf("%+v", r)
				if r.Negotiated != n.negotiated || r.Elicited != be.want {
					t.Fatalf("negotiated %q, elicited %q; want %s, %q", r.Negotiated, r.Elicited, n.negotiated, be.want)
				}
			})
		}
	}
}
