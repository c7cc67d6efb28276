package tsclient

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/mcprouter/mcprouter/cmd/mcpbackend/mcpbackendtest"
	backendsrv "github.com/mcprouter/mcprouter/cmd/mcpbackend/server"
	"github.com/mcprouter/mcprouter/internal/testbin"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

type authResult struct {
	Unauthorized         bool     `json:"unauthorized"`
	Server               string   `json:"server"`
	Echo                 string   `json:"echo"`
	AuthorizationURL     string   `json:"authorizationURL"`
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorizationServers"`
}

// TestTypeScriptClientAuth: the TypeScript SDK client with a JWT of a real OpenID
// provider works over Streamable HTTP and legacy SSE; without a token, the SDK's own
// authorization flow follows the router's challenge to its metadata and to the provider,
// and would send the user to the provider's authorization endpoint for this resource and
// the scope the router asks for.
func TestTypeScriptClientAuth(t *testing.T) {
	testbin.Long(t, "starts processes and Node")
	nodeBin, sdk := node(t)
	op := authtest.Start(t, authtest.Options{})
	be := mcpbackendtest.Start(t, backendsrv.Config{Name: "ref", Tick: -1})
	// The resource is the router's URL, which the configuration names: an address
	// the kernel just handed out.
	addr := testbin.FreeAddr(t)
	resource := "http://" + addr + "/mcp"
	cfg := fmt.Sprintf("backends:\n  - {name: ref, url: %q}\nauth:\n  mode: jwt\n  resource: %s\n  issuer: %s\n  required_scopes: [mcp]\n",
		be.URL(), resource, op.Issuer)
	testbin.StartRouter(t, "--config", testbin.RouterConfig(t, cfg), "--listen", addr)

	run := func(t *testing.T, kind, target, token string) authResult {
		return runScript[authResult](t, nodeBin, "auth.mjs", sdk, kind, target, token)
	}
	token := op.Token(authtest.Claims{Subject: "alice", Audience: []string{resource}, Scopes: []string{"mcp"}})
	for _, c := range []struct{ name, kind, target string }{
		{"streamable-http", "http", resource},
		{"legacy-sse", "sse", "http://" + addr + "/sse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := run(t, c.kind, c.target, token); r.Unauthorized || r.Server != "mcprouter" || r.Echo != "from typescript" {
				t.Fatalf("with a token: %+v", r)
			}
		})
	}
	t.Run("without a token", func(t *testing.T) {
		r := run(t, "http", resource, "-")
		if !r.Unauthorized || r.Resource != resource || len(r.AuthorizationServers) != 1 || r.AuthorizationServers[0] != op.Issuer {
			t.Fatalf("without a token: %+v", r)
		}
		u, err := url.Parse(r.AuthorizationURL)
		if err != nil || u.Scheme+"://"+u.Host != op.Issuer {
			t.Fatalf("authorization URL %q is not the provider's", r.AuthorizationURL)
		}
		if q := u.Query(); q.Get("resource") != resource || q.Get("scope") != "mcp" || q.Get("client_id") != "ts-sdk-auth-test" {
			t.Errorf("authorization URL %s: want resource %s, scope mcp", r.AuthorizationURL, resource)
		}
	})
}
