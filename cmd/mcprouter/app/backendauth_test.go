package app

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/internal/testio"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// backendYAML is a configuration with one HTTP backend whose auth section is auth
// (indented under it) and whose other keys are extra.
func backendYAML(auth, extra string) string {
	var b strings.Builder
	b.WriteString("backends:\n  - name: crm\n    url: http://127.0.0.1:9/mcp\n")
	for _, l := range strings.Split(extra, "\n") {
		if l != "" {
			b.WriteString("    " + l + "\n")
		}
	}
	if auth != "" {
		b.WriteString("    auth:\n")
		for _, l := range strings.Split(auth, "\n") {
			b.WriteString("      " + l + "\n")
		}
	}
	return b.String()
}

// jwtClients is an auth section whose clients present JWT access tokens: what a
// token_exchange backend needs.
const jwtClients = "auth: {mode: jwt, resource: \"http://127.0.0.1:8080/mcp\", issuer: \"https://idp.example\"}\n"

// TestBackendAuthConfig: each mistake is named by its key.
func TestBackendAuthConfig(t *testing.T) {
	const cc = "client_credentials: {token_url: https://idp.example/token, client_id: router, client_secret_env: SECRET}"
	const tx = "token_exchange: {token_url: https://idp.example/token, client_id: router, client_secret_file: /run/secret}"
	for _, tc := range []struct {
		name, auth, extra, want string
	}{
		{"headers", "headers: {X-Api-Key: {env: KEY}, X-Tenant: acme, X-File: {file: /run/k}}", "", ""},
		{"bearer env", "bearer_env: CRM_TOKEN", "", ""},
		{"bearer file", "bearer_file: /run/token", "", ""},
		{"client credentials", cc, "", ""},
		{"token exchange", tx, "sessions: per-client", ""},
		{"exchange and own token", tx + "\n" + cc, "sessions: per-client", ""},
		{"loopback http token url", "client_credentials: {token_url: http://127.0.0.1:9/token, client_id: r, client_secret_env: S}", "", ""},

		{"two own tokens", "bearer_env: A\nbearer_file: /b", "", "backends[0].auth: bearer_env and bearer_file are both"},
		{"authorization twice", "bearer_env: A\nheaders: {authorization: x}", "", "backends[0].auth.headers.authorization: Authorization is set by bearer_env"},
		{"reserved header", "headers: {Mcp-Session-Id: x}", "", "backends[0].auth.headers.Mcp-Session-Id:"},
		{"bad header name", "headers: {\"X Key\": x}", "", "backends[0].auth.headers.X Key:"},
		{"header value two sources", "headers: {X-Key: {env: A, file: /b}}", "", "exactly one of value, env, file"},
		{"header value unknown key", "headers: {X-Key: {envv: A}}", "", "field envv not found"},
		{"header value null", "headers: {X-Key: null}", "", "empty header value"},
		{"header value list", "headers: {X-Key: [a]}", "", "a header value is a string"},
		{"no token url", "client_credentials: {client_id: r, client_secret_env: S}", "", "backends[0].auth.client_credentials.token_url: required"},
		{"plain http token url", "client_credentials: {token_url: http://idp.example/token, client_id: r, client_secret_env: S}", "", "backends[0].auth.client_credentials.token_url: \"http://idp.example/token\" must be https"},
		{"no client id", "client_credentials: {token_url: https://i/t, client_secret_env: S}", "", "backends[0].auth.client_credentials.client_id: required"},
		{"no secret", "client_credentials: {token_url: https://i/t, client_id: r}", "", "backends[0].auth.client_credentials: exactly one of client_secret_env, client_secret_file"},
		{"auth method", "client_credentials: {token_url: https://i/t, client_id: r, client_secret_env: S, auth_method: private_key_jwt}", "", "backends[0].auth.client_credentials.auth_method:"},
		{"exchange on shared sessions", tx, "", "backends[0].auth.token_exchange: needs sessions: per-client"},
		{"unknown key", "bearer: x", "", "field bearer not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(jwtClients + backendYAML(tc.auth, tc.extra)))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	for _, kind := range []string{"command: [x]", "nats: svc"} {
		cfg := "backends:\n  - name: crm\n    " + kind + "\n    auth: {bearer_env: T}\n"
		if _, err := ParseConfig([]byte(cfg)); err == nil || !strings.Contains(err.Error(), "backends[0].auth: only HTTP backends") {
			t.Errorf("%s with auth: %v", kind, err)
		}
	}
	x := "token_exchange: {token_url: https://i/t, client_id: r, client_secret_env: S, subject_token_type: saml, cache_size: 5}"
	if _, err := ParseConfig([]byte(jwtClients + backendYAML(x, "sessions: per-client"))); err == nil || !strings.Contains(err.Error(), "backends[0].auth.token_exchange.subject_token_type") {
		t.Errorf("subject_token_type saml: %v", err)
	}
}

// TestBackendAuthBuild: the secrets are read at start, a missing one fails the start
// naming its key, and each upstream session gets the credentials for whom it is dialed.
func TestBackendAuthBuild(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CRM_TOKEN", "env-token")
	t.Setenv("CRM_TENANT", "acme")
	cfg := &Config{Backends: make([]BackendConfig, 3)}
	a := &cfg.Backends[0].Auth
	*a = BackendAuthConfig{
		Headers: map[string]SecretValue{
			"X-Key": {File: keyFile}, "X-Tenant": {Env: "CRM_TENANT"}, "X-Static": {Value: "v"},
		},
		BearerEnv: "CRM_TOKEN",
		TokenExchange: &TokenExchangeConfig{OAuthClientConfig: OAuthClientConfig{
			TokenURL: "http://127.0.0.1:9/token", ClientID: "router", ClientSecretFile: secretFile}},
	}
	bc, err := buildBackendAuth(cfg, 0, discard)
	if err != nil {
		t.Fatal(err)
	}
	values := func(creds []upstream.Credential) map[string]string {
		m := map[string]string{}
		for _, c := range creds {
			if c.Header() == upstream.AuthorizationHeader && strings.HasPrefix(c.(interface{ String() string }).String(), "token exchange") {
				m[c.Header()] = "exchange"
				continue
			}
			v, err := c.Value(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m[c.Header()] = v
		}
		return m
	}
	own := values(bc.forDial(context.Background()))
	want := map[string]string{"X-Key": "file-key", "X-Tenant": "acme", "X-Static": "v", "Authorization": "Bearer env-token"}
	for k, v := range want {
		if own[k] != v {
			t.Errorf("router's session: %s = %q, want %q", k, own[k], v)
		}
	}
	client := values(bc.forDial(upstream.WithClient(context.Background(), &auth.Principal{Subject: "alice", Token: "t"})))
	if client["Authorization"] != "exchange" || client["X-Key"] != "file-key" || len(client) != 4 {
		t.Errorf("client's session: %v", client)
	}

	t.Setenv("CRM_TOKEN", "")
	cfg.Backends[2].Auth = *a
	if _, err := buildBackendAuth(cfg, 2, discard); err == nil || !strings.Contains(err.Error(), "backends[2].auth.bearer_env: CRM_TOKEN is not set") {
		t.Errorf("unset variable: %v", err)
	}
	a.BearerEnv, a.BearerFile = "", filepath.Join(dir, "missing")
	if _, err := buildBackendAuth(cfg, 0, discard); err == nil || !strings.Contains(err.Error(), "backends[0].auth.bearer_file:") {
		t.Errorf("missing file: %v", err)
	}
	a.BearerFile = ""
	a.TokenExchange.ClientSecretFile = filepath.Join(dir, "missing")
	if _, err := buildBackendAuth(cfg, 0, discard); err == nil || !strings.Contains(err.Error(), "backends[0].auth.token_exchange.client_secret_file:") {
		t.Errorf("missing secret file: %v", err)
	}
}

// FuzzBackendAuthConfig: any auth section parses and validates without a panic, and an
// accepted one has at most one token of the router's own.
func FuzzBackendAuthConfig(f *testing.F) {
	for _, s := range []string{
		"headers: {X-Api-Key: {env: KEY}, X-Tenant: acme}",
		"bearer_file: /run/token",
		"client_credentials: {token_url: https://idp/token, client_id: r, client_secret_env: S, scopes: [a, b]}",
		"token_exchange: {token_url: https://idp/token, client_id: r, client_secret_file: /s, audience: crm, resource: https://crm/mcp}",
		"headers: {X-K: {value: a, env: b}}",
		"headers: {X-K: !!binary aGk=}",
		"headers: [a, b]",
		"bearer_env: &a x\nbearer_file: *a",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, auth string, perClient bool) {
		extra := ""
		if perClient {
			extra = "sessions: per-client"
		}
		c, err := ParseConfig([]byte(jwtClients + backendYAML(auth, extra)))
		if err != nil || len(c.Backends) != 1 {
			return
		}
		if own := c.Backends[0].Auth.ownTokens(); len(own) > 1 {
			t.Fatalf("accepted two own tokens: %v", own)
		}
	})
}

// discard is the logger of tests that do not look at the log.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestTokenExchangeNeedsJWTClients: token exchange sends each client's token to the
// backend's token endpoint as subject_token. With auth.mode bearer that token is one of
// the router's own static secrets; with auth.mode off there is none. Either is a
// configuration mistake to refuse, naming the key.
func TestTokenExchangeNeedsJWTClients(t *testing.T) {
	const tx = "token_exchange: {token_url: \"http://127.0.0.1:9/token\", client_id: router, client_secret_env: HOME}"
	for _, clients := range []string{
		"auth:\n  mode: bearer\n  resource: http://127.0.0.1:8080/mcp\n  bearer_tokens: [{principal: alice, sha256: \"" +
			"2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90\"}]\n",
		"auth: {mode: off}\n",
		"listen: 127.0.0.1:0\n", // mode empty: off on a loopback listener
	} {
		_, err := ParseConfig([]byte(clients + backendYAML(tx, "sessions: per-client")))
		if err == nil || !strings.Contains(err.Error(), "backends[0].auth.token_exchange: needs auth.mode: jwt") {
			t.Errorf("%q with a token_exchange backend: %v", clients, err)
		}
	}
	if _, err := ParseConfig([]byte(jwtClients + backendYAML(tx, "sessions: per-client"))); err != nil {
		t.Errorf("mode jwt: %v", err)
	}
}

// TestTokenExchangeForeignTokenURL: a token_url on another host than the issuer's sends
// the users' tokens to another party: the start warns, naming the key, unless
// allow_foreign_token_url says it is meant.
func TestTokenExchangeForeignTokenURL(t *testing.T) {
	t.Setenv("ROUTER_SECRET", "s3cret")
	for _, tc := range []struct {
		tokenURL, extra string
		warn            bool
	}{
		{"https://IDP.example:8443/oauth/token", "", false},
		{"https://tokens.other.example/token", "", true},
		{"https://tokens.other.example/token", ", allow_foreign_token_url: true", false},
	} {
		cfg, err := ParseConfig([]byte(jwtClients + backendYAML("token_exchange: {token_url: \""+tc.tokenURL+
			"\", client_id: router, client_secret_env: ROUTER_SECRET"+tc.extra+"}", "sessions: per-client")))
		if err != nil {
			t.Fatal(err)
		}
		var logs testio.Buffer
		if _, err := buildBackendAuth(&cfg, 0, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(logs.String(), "level=WARN") &&
			strings.Contains(logs.String(), "backends[0].auth.token_exchange.token_url is not on auth.issuer's host") &&
			strings.Contains(logs.String(), "allow_foreign_token_url")
		if warned != tc.warn {
			t.Errorf("token_url %s%s: warned %v, want %v (log %q)", tc.tokenURL, tc.extra, warned, tc.warn, logs.String())
		}
	}
}
