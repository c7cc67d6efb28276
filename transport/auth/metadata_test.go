package auth_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mcprouter/mcprouter/transport/auth"
)

func TestMetadata(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, func(c *auth.Config) {
		c.RequiredScopes = []string{"mcp"}
		c.ScopesSupported = []string{"mcp", "tools:write"}
	})
	var doc map[string]any
	if err := json.Unmarshal(a.Metadata(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 resource,
		"authorization_servers":    []any{p.Issuer},
		"scopes_supported":         []any{"mcp", "tools:write"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "mcprouter",
	}
	if len(doc) != len(want) {
		t.Errorf("metadata %s", a.Metadata())
	}
	for k, v := range want {
		got, _ := json.Marshal(doc[k])
		exp, _ := json.Marshal(v)
		if string(got) != string(exp) {
			t.Errorf("%s: %s, want %s", k, got, exp)
		}
	}

	paths := a.MetadataPaths("/mcp", "/sse", "/", "mcp/", "/a/../mcp")
	wantPaths := []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-protected-resource/sse"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("MetadataPaths: %q, want %q", paths, wantPaths)
	}
}

func TestMetadataURL(t *testing.T) {
	for _, tc := range []struct{ resource, override, want string }{
		{"https://mcp.example.com/mcp", "", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"},
		{"https://mcp.example.com/public/mcp/", "", "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp"},
		{"https://mcp.example.com", "", "https://mcp.example.com/.well-known/oauth-protected-resource"},
		{"https://mcp.example.com:8443/", "", "https://mcp.example.com:8443/.well-known/oauth-protected-resource"},
		{"https://mcp.example.com/mcp", "https://meta.example.com/prm", "https://meta.example.com/prm"},
	} {
		cfg := auth.Config{Mode: auth.ModeBearer, Resource: tc.resource, ResourceMetadataURL: tc.override,
			BearerTokens: []auth.BearerToken{{Principal: "a", SHA256: sum("a")}}}
		a := start(t, cfg, auth.Options{})
		want := `Bearer resource_metadata="` + tc.want + `"`
		if v := a.Check(nil, false); v.Challenge != want {
			t.Errorf("%s: %q, want %q", tc.resource, v.Challenge, want)
		}
		var doc map[string]any
		if err := json.Unmarshal(a.Metadata(), &doc); err != nil || doc["resource"] != tc.resource {
			t.Errorf("%s: metadata %s", tc.resource, a.Metadata())
		}
		if _, ok := doc["authorization_servers"]; ok {
			t.Errorf("%s: bearer mode lists authorization servers: %s", tc.resource, a.Metadata())
		}
	}
}
