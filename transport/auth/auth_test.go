package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

const resource = "http://127.0.0.1:8080/mcp"

// jwtConfig is a valid jwt configuration for provider p.
func jwtConfig(p *authtest.Provider) auth.Config {
	return auth.Config{Mode: auth.ModeJWT, Resource: resource, Issuer: p.Issuer}
}

// startJWT starts an OpenID provider and an Authenticator that trusts it (jwtConfig,
// then edit when not nil), built with o; both stop at the end of the test.
func startJWT(t testing.TB, o auth.Options, edit func(*auth.Config)) (*authtest.Provider, *auth.Authenticator) {
	t.Helper()
	p := authtest.Start(t, authtest.Options{})
	cfg := jwtConfig(p)
	if edit != nil {
		edit(&cfg)
	}
	return p, start(t, cfg, o)
}

// start applies Defaults and Validate to cfg and builds its Authenticator, closed at the
// end of the test.
func start(t testing.TB, cfg auth.Config, o auth.Options) *auth.Authenticator {
	t.Helper()
	cfg.Defaults()
	if err := cfg.Validate(true); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := auth.New(ctx, cfg, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(a.Close)
	return a
}

func bearer(tok string) []byte { return []byte("Bearer " + tok) }

const metaURL = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"

func TestCheckJWT(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, func(c *auth.Config) {
		c.Audiences = []string{"https://mcp.example.com/"}
	})
	good := authtest.Claims{Subject: "alice", Audience: []string{resource}, Scopes: []string{"mcp:tools"}}
	with := func(f func(c *authtest.Claims)) authtest.Claims {
		c := good
		f(&c)
		return c
	}
	now := time.Now()
	invalid := func(desc string) string {
		return `Bearer resource_metadata="` + metaURL + `", error="invalid_token", error_description="` + desc + `"`
	}
	cases := []struct {
		name      string
		header    string
		query     bool
		status    int
		reason    auth.Reason
		challenge string // exact, when set
		subject   string
	}{
		{name: "good", header: "Bearer " + p.Token(good), reason: auth.ReasonOK, subject: "alice"},
		{name: "scheme in lower case", header: "bearer " + p.Token(good), reason: auth.ReasonOK, subject: "alice"},
		{name: "audience with a trailing slash", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Audience = []string{resource + "/"} })), reason: auth.ReasonOK},
		{name: "audience in upper case", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Audience = []string{"HTTP://127.0.0.1:8080/mcp"} })), reason: auth.ReasonOK},
		{name: "extra audience", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Audience = []string{"https://other", "https://mcp.example.com"} })), reason: auth.ReasonOK},
		{name: "scp array", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.SCP = true })), reason: auth.ReasonOK},
		{name: "expired within the skew", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Expiry = now.Add(-30 * time.Second) })), reason: auth.ReasonOK},
		{name: "missing", status: 401, reason: auth.ReasonMissing,
			challenge: `Bearer resource_metadata="` + metaURL + `"`},
		{name: "another scheme", header: "Basic YWxpY2U6c2VjcmV0", status: 401, reason: auth.ReasonMalformed,
			challenge: `Bearer resource_metadata="` + metaURL + `"`},
		{name: "Bearer without token", header: "Bearer", status: 400, reason: auth.ReasonMalformed},
		{name: "Bearer and spaces", header: "Bearer   ", status: 400, reason: auth.ReasonMalformed},
		{name: "two tokens", header: "Bearer a b", status: 400, reason: auth.ReasonMalformed,
			challenge: `Bearer resource_metadata="` + metaURL + `", error="invalid_request", error_description="the Authorization header is not Bearer followed by one token"`},
		{name: "not a JWT", header: "Bearer abc", status: 401, reason: auth.ReasonMalformed,
			challenge: invalid("the access token is not a JWT")},
		{name: "token in query", header: "Bearer " + p.Token(good), query: true, status: 400, reason: auth.ReasonTokenInQuery,
			challenge: `Bearer resource_metadata="` + metaURL + `", error="invalid_request", error_description="access tokens are not accepted in the URL query; send them in the Authorization header"`},
		{name: "token in query only", query: true, status: 400, reason: auth.ReasonTokenInQuery},
		{name: "expired", header: "Bearer " + p.Expired(good), status: 401, reason: auth.ReasonExpired,
			challenge: invalid("the access token expired")},
		{name: "expired beyond the skew", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Expiry = now.Add(-90 * time.Second) })), status: 401, reason: auth.ReasonExpired},
		{name: "not yet valid", header: "Bearer " + p.NotYetValid(good), status: 401, reason: auth.ReasonNotYetValid},
		{name: "issued in the future", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.IssuedAt = now.Add(time.Hour); c.Omit = []string{"nbf"} })), status: 401, reason: auth.ReasonNotYetValid},
		{name: "wrong issuer", header: "Bearer " + p.WrongIssuer(good), status: 401, reason: auth.ReasonWrongIssuer},
		{name: "wrong audience", header: "Bearer " + p.WrongAudience(good), status: 401, reason: auth.ReasonWrongAudience,
			challenge: invalid("the access token was issued for another resource")},
		{name: "no audience", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Audience = nil })), status: 401, reason: auth.ReasonWrongAudience},
		{name: "audience a prefix of ours", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Audience = []string{"http://127.0.0.1:8080"} })), status: 401, reason: auth.ReasonWrongAudience},
		{name: "unsigned", header: "Bearer " + p.Unsigned(good), status: 401, reason: auth.ReasonUnsigned},
		{name: "HS256 with the public key", header: "Bearer " + p.HMACWithPublicKey(good), status: 401, reason: auth.ReasonBadAlgorithm},
		{name: "tampered", header: "Bearer " + p.Tampered(good), status: 401, reason: auth.ReasonBadSignature},
		{name: "unknown key", header: "Bearer " + p.UnknownKey(good), status: 401, reason: auth.ReasonBadSignature},
		{name: "forged kid", header: "Bearer " + p.ForgedKid(good), status: 401, reason: auth.ReasonBadSignature},
		{name: "no exp", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Omit = []string{"exp"} })), status: 401, reason: auth.ReasonBadClaims},
		{name: "no sub", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Omit = []string{"sub"} })), status: 401, reason: auth.ReasonBadClaims},
		{name: "scope not a string", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Extra = map[string]any{"scope": 7} })), status: 401, reason: auth.ReasonBadClaims},
		{name: "exp not a number", header: "Bearer " + p.Token(with(func(c *authtest.Claims) { c.Extra = map[string]any{"exp": "tomorrow"} })), status: 401, reason: auth.ReasonBadClaims},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h []byte
			if tc.header != "" {
				h = []byte(tc.header)
			}
			v := a.Check(h, tc.query)
			if v.Status != tc.status || v.Reason != tc.reason {
				t.Fatalf("Check = %d %s (%s), want %d %s", v.Status, v.Reason, v.Description, tc.status, tc.reason)
			}
			if tc.challenge != "" && v.Challenge != tc.challenge {
				t.Errorf("challenge:\n got %s\nwant %s", v.Challenge, tc.challenge)
			}
			switch {
			case v.Status == 0 && v.Principal == nil:
				t.Error("ok without a principal")
			case v.Status != 0 && v.Principal != nil:
				t.Errorf("refused with principal %v", v.Principal)
			case v.Status == 401 && !strings.HasPrefix(v.Challenge, `Bearer resource_metadata="`+metaURL+`"`):
				t.Errorf("401 challenge %q", v.Challenge)
			}
			if tc.subject != "" && v.Principal.Subject != tc.subject {
				t.Errorf("subject %q, want %q", v.Principal.Subject, tc.subject)
			}
		})
	}
}

func TestPrincipalOfJWT(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, nil)
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	tok := p.Token(authtest.Claims{Subject: "bob", Audience: []string{resource}, Scopes: []string{"a", "b"}, Expiry: exp,
		Extra: map[string]any{"tenant": "t1"}})
	for i := range 2 { // the second Check is answered from the cache
		v := a.Check(bearer(tok), false)
		pr := v.Principal
		if !v.OK() || pr.Subject != "bob" || pr.Issuer != p.Issuer || strings.Join(pr.Scopes, " ") != "a b" ||
			!pr.Expiry.Equal(exp) || pr.Token != tok || pr.Claims["tenant"] != "t1" {
			t.Fatalf("check %d: %+v", i, v)
		}
		if pr.ID() != p.Issuer+" bob" || pr.String() != pr.ID() {
			t.Errorf("ID %q String %q", pr.ID(), pr.String())
		}
	}
	tok2 := p.Token(authtest.Claims{Subject: "carol", Audience: []string{resource}, SCP: true, Scopes: []string{"x", "y"}})
	if v := a.Check(bearer(tok2), false); !v.OK() || strings.Join(v.Principal.Scopes, " ") != "x y" {
		t.Fatalf("scp: %+v", v)
	}
	tok3 := p.Token(authtest.Claims{Subject: "dave", Audience: []string{resource}, Extra: map[string]any{"scp": "r w"}})
	if v := a.Check(bearer(tok3), false); !v.OK() || strings.Join(v.Principal.Scopes, " ") != "r w" {
		t.Fatalf("scp as a string: %+v", v)
	}
}

func TestScopes(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, func(c *auth.Config) {
		c.RequiredScopes = []string{"mcp"}
	})
	missing := `Bearer resource_metadata="` + metaURL + `", scope="mcp"`
	if v := a.Check(nil, false); v.Challenge != missing {
		t.Errorf("missing: %q, want %q", v.Challenge, missing)
	}
	if v := a.Check(bearer("x.y.z"), false); !strings.HasPrefix(v.Challenge, missing+`, error="invalid_token"`) {
		t.Errorf("invalid token challenge %q", v.Challenge)
	}

	none := p.Token(authtest.Claims{Audience: []string{resource}})
	v := a.Check(bearer(none), false)
	want := `Bearer resource_metadata="` + metaURL + `", scope="mcp", error="insufficient_scope", error_description="the access token lacks the scope mcp"`
	if v.Status != 403 || v.Reason != auth.ReasonInsufficientScope || v.Challenge != want {
		t.Fatalf("without the required scope: %d %s %q", v.Status, v.Reason, v.Challenge)
	}

	some := p.Token(authtest.Claims{Audience: []string{resource}, Scopes: []string{"mcp", "tools:read"}})
	v = a.Check(bearer(some), false)
	if !v.OK() {
		t.Fatalf("with the required scope: %+v", v)
	}
	if r := a.RequireScopes(v.Principal, []string{"tools:read"}); !r.OK() || r.Principal != v.Principal {
		t.Errorf("RequireScopes of a held scope: %+v", r)
	}
	r := a.RequireScopes(v.Principal, []string{"tools:read", "tools:write", "admin"})
	want = `Bearer resource_metadata="` + metaURL + `", scope="mcp tools:read tools:write admin", error="insufficient_scope", error_description="the access token lacks the scope tools:write admin"`
	if r.Status != 403 || r.Challenge != want {
		t.Errorf("RequireScopes:\n got %d %q\nwant 403 %q", r.Status, r.Challenge, want)
	}
}

func TestGrantedTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := authtest.Start(t, authtest.Options{})
	p.AddClient("agent", "agent-secret")
	a := start(t, jwtConfig(p), auth.Options{})

	cc, err := p.ClientCredentials(ctx, "agent", "agent-secret", resource, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Check(bearer(cc.AccessToken), false); !v.OK() || v.Principal.Subject != "agent" || !v.Principal.HasScope("mcp") {
		t.Fatalf("client credentials token: %+v", v)
	}
	other, err := p.ClientCredentials(ctx, "agent", "agent-secret", "http://127.0.0.1:9/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Check(bearer(other.AccessToken), false); v.Reason != auth.ReasonWrongAudience {
		t.Fatalf("token for another resource: %+v", v)
	}
	user := p.Token(authtest.Claims{Subject: "alice", Audience: []string{"http://127.0.0.1:9/elsewhere"}})
	ex, err := p.Exchange(ctx, "agent", "agent-secret", user, resource)
	if err != nil {
		t.Fatal(err)
	}
	if v := a.Check(bearer(ex.AccessToken), false); !v.OK() || v.Principal.Subject != "alice" {
		t.Fatalf("exchanged token: %+v", v)
	}
}
