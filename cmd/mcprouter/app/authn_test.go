package app

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/internal/testwait"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// TestAuthConfig: the auth section is validated with the rest, naming the bad key.
func TestAuthConfig(t *testing.T) {
	sum := sha256.Sum256([]byte("t"))
	hash := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		name, yaml string
		err        string // "" when valid
	}{
		{"no section", "", ""},
		{"unknown mode", "auth: {mode: basic}\n", "auth.mode"},
		{"bearer without resource", "auth: {mode: bearer, bearer_tokens: [{principal: a, sha256: " + hash + "}]}\n", "auth.resource"},
		{"bearer without tokens", "auth: {mode: bearer, resource: 'http://127.0.0.1:8080/mcp'}\n", "auth.bearer_tokens"},
		{"bearer token not hashed", "auth: {mode: bearer, resource: 'http://127.0.0.1:8080/mcp', bearer_tokens: [{principal: a, sha256: secret}]}\n", "auth.bearer_tokens[0].sha256"},
		{"bearer", "auth: {mode: bearer, resource: 'http://127.0.0.1:8080/mcp', bearer_tokens: [{principal: a, sha256: " + hash + "}]}\n", ""},
		{"jwt without issuer", "auth: {mode: jwt, resource: 'http://127.0.0.1:8080/mcp'}\n", "auth.issuer"},
		{"jwt over http elsewhere", "auth: {mode: jwt, resource: 'http://127.0.0.1:8080/mcp', issuer: 'http://id.example.com'}\n", "auth.issuer"},
		{"unknown key", "auth: {mode: bearer, tokens: []}\n", "tokens"},
		{"exposed with bearer", "listen: 0.0.0.0:8080\nauth: {mode: bearer, resource: 'https://mcp.example.com/mcp', bearer_tokens: [{principal: a, sha256: " + hash + "}]}\n", ""},
	} {
		_, err := ParseConfig([]byte(c.yaml))
		wantErr(t, c.name, err, c.err)
	}
}

// TestAuthStart: the Authenticator starts with the router. A jwt issuer that cannot be
// discovered fails the start and says which key; the deprecated
// security.allow_unauthenticated runs with authentication off and a warning.
func TestAuthStart(t *testing.T) {
	cfg := testConfig()
	cfg.Auth = auth.Config{Mode: auth.ModeJWT, Resource: "http://127.0.0.1:8080/mcp", Issuer: "http://127.0.0.1:1"}
	if a, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "auth.issuer") {
		if a != nil {
			a.Shutdown(t.Context())
		}
		t.Errorf("an issuer nobody serves: %v", err)
	}

	cfg = testConfig()
	cfg.Listen = "0.0.0.0:0"
	cfg.Security = SecurityConfig{AllowUnauthenticated: true, AllowedHosts: []string{"mcp.example"}, AllowedOrigins: []string{"null"}}
	var logs bytes.Buffer
	a, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(t.Context())
	if a.Auth.Enabled() || !strings.Contains(logs.String(), "security.allow_unauthenticated is deprecated") ||
		!strings.Contains(logs.String(), "not authenticated") {
		t.Errorf("auth enabled %v; log:\n%s", a.Auth.Enabled(), logs.String())
	}
}

// TestMetadataRoutes: with authentication the metadata document is served at the root
// and path-inserted well-known paths, without credentials, while the MCP endpoint asks
// for them; without authentication those paths are unknown.
func TestMetadataRoutes(t *testing.T) {
	sum := sha256.Sum256([]byte("t"))
	cfg := testConfig()
	cfg.Auth = auth.Config{Mode: auth.ModeBearer, Resource: "http://127.0.0.1/mcp",
		BearerTokens: []auth.BearerToken{{Principal: "a", SHA256: hex.EncodeToString(sum[:])}}}
	m := startMemApp(t, cfg)
	get := func(m *memApp, path string) (int, string) {
		resp, err := m.roundTrip(t, []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode(), string(resp.Body())
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if status, body := get(m, p); status != 200 || !strings.Contains(body, `"resource":"http://127.0.0.1/mcp"`) {
			t.Errorf("GET %s: %d %s", p, status, body)
		}
	}
	resp, err := m.roundTrip(t, post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil || resp.StatusCode() != 401 || !strings.Contains(string(resp.Header.Peek("WWW-Authenticate")), "resource_metadata=") {
		t.Errorf("POST /mcp without a token: %v %v", err, resp)
	}
	resp, err = m.roundTrip(t, post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization: Bearer t"))
	if err != nil || resp.StatusCode() != 400 || strings.Contains(string(resp.Body()), "reason") {
		t.Errorf("POST /mcp with the token, no session: %v %v", err, resp)
	}

	off := startMemApp(t, testConfig())
	if status, _ := get(off, "/.well-known/oauth-protected-resource"); status != 404 {
		t.Errorf("metadata without authentication: %d", status)
	}
}

// TestAuditBounded: a flood of refused requests writes at most the audit logger's burst
// of lines (plus its rate over the flood), and a later line says how many were dropped.
func TestAuditBounded(t *testing.T) {
	sum := sha256.Sum256([]byte("t"))
	cfg := testConfig()
	cfg.Auth = auth.Config{Mode: auth.ModeBearer, Resource: "http://127.0.0.1/mcp",
		BearerTokens: []auth.BearerToken{{Principal: "a", SHA256: hex.EncodeToString(sum[:])}}}
	logs := &testio.Buffer{}
	m := startMemAppLog(t, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	const flood = 300
	start := time.Now()
	for i := 0; i < flood; i++ {
		resp, err := m.roundTrip(t, post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization: Bearer wrong"))
		if err != nil || resp.StatusCode() != 401 {
			t.Fatalf("request %d: %v %v", i, err, resp)
		}
	}
	allowed := 50 + int(10*time.Since(start).Seconds()) + 1
	if n := strings.Count(logs.String(), "request refused"); n == 0 || n > allowed {
		t.Errorf("%d audit lines for %d refused requests, want 1..%d", n, flood, allowed)
	}
	// The bucket refills a line every 100ms: the next refused request to pass says
	// how many were dropped.
	testwait.For(t, "a line that says how many were dropped", waitLimit, func() bool {
		if strings.Contains(logs.String(), "suppressed=") {
			return true
		}
		m.roundTrip(t, post("/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		return false
	})
}
