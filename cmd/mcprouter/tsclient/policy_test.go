package tsclient

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testbin"
)

type policyResult struct {
	Tools  []string `json:"tools"`
	Echo   string   `json:"echo"`
	Denied string   `json:"denied"`
}

// TestTypeScriptClientPolicy: the TypeScript SDK client as a principal a policy allows
// one tool sees that tool alone in the merged list, calls it, and is refused another
// naming the denial; on a virtual server it sees and calls that endpoint's selection
// only.
func TestTypeScriptClientPolicy(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, sdk := node(t)
	backends := mcpbackendtest.StartAB(t, backendsrv.Config{Tick: -1})
	hash := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	addr := testbin.FreeAddr(t)
	cfg := backends + fmt.Sprintf(`auth:
  mode: bearer
  resource: http://%[1]s/mcp
  bearer_tokens: [{principal: bob, sha256: %[2]q}]
policy:
  rules:
    - name: bob-echo
      allow: 'principal.sub == "bob" && mcp.tool == "a__echo"'
virtual_servers:
  - name: team
    backends: [b]
    include: ["b__echo"]
    auth:
      mode: bearer
      resource: http://%[1]s/mcp/team
      bearer_tokens: [{principal: bob, sha256: %[3]q}]
`, addr, hash("ts-policy-bob"), hash("ts-policy-team-bob"))
	testbin.StartRouter(t, "--config", testbin.RouterConfig(t, cfg), "--listen", addr)

	for _, c := range []struct {
		name, path, token, allowed, denied, says string
	}{
		{"main endpoint", "/mcp", "ts-policy-bob", "a__echo", "b__echo", "no allow rule matches"},
		{"virtual server", "/mcp/team", "ts-policy-team-bob", "b__echo", "a__echo", "not exposed by this endpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runScript[policyResult](t, nodeBin, "policy.mjs", sdk, "http://"+addr+c.path, c.token, c.allowed, c.denied)
			if !slices.Equal(r.Tools, []string{c.allowed}) {
				t.Errorf("listed %v, want %s alone", r.Tools, c.allowed)
			}
			if r.Echo != "from typescript" {
				t.Errorf("%s answered %q", c.allowed, r.Echo)
			}
			if !strings.Contains(r.Denied, "policy denies") || !strings.Contains(r.Denied, c.says) {
				t.Errorf("calling %s: %q, want a denial saying %q", c.denied, r.Denied, c.says)
			}
		})
	}
}
