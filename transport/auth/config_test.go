package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
	"go.yaml.in/yaml/v3"
)

func TestValidate(t *testing.T) {
	good := sum("x")
	jwt := func(f func(c *auth.Config)) auth.Config {
		c := auth.Config{Mode: auth.ModeJWT, Resource: resource, Issuer: "https://id.example.com"}
		f(&c)
		return c
	}
	brr := func(f func(c *auth.Config)) auth.Config {
		c := auth.Config{Mode: auth.ModeBearer, Resource: resource, BearerTokens: []auth.BearerToken{{Principal: "a", SHA256: good}}}
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name     string
		cfg      auth.Config
		loopback bool
		want     string // prefix of the error; "" for none
	}{
		{"empty mode on loopback", auth.Config{}, true, ""},
		{"empty mode exposed", auth.Config{}, false, "auth.mode: the router listens on a non-loopback address; set auth.mode"},
		{"off exposed", auth.Config{Mode: "off"}, false, ""},
		{"unknown mode", auth.Config{Mode: "basic"}, true, `auth.mode: unknown mode "basic"`},
		{"good jwt", jwt(func(*auth.Config) {}), false, ""},
		{"good bearer", brr(func(*auth.Config) {}), false, ""},
		{"no resource", jwt(func(c *auth.Config) { c.Resource = "" }), true, "auth.resource: required"},
		{"relative resource", jwt(func(c *auth.Config) { c.Resource = "mcp.example.com" }), true, "auth.resource: "},
		{"resource with fragment", jwt(func(c *auth.Config) { c.Resource = "https://mcp.example.com#x" }), true, "auth.resource: "},
		{"resource with quote", jwt(func(c *auth.Config) { c.Resource = `https://mcp.example.com/"` }), true, "auth.resource: "},
		{"no issuer", jwt(func(c *auth.Config) { c.Issuer = "" }), true, "auth.issuer: required"},
		{"http issuer", jwt(func(c *auth.Config) { c.Issuer = "http://id.example.com" }), true, "auth.issuer: \"http://id.example.com\": must be https"},
		{"http loopback issuer", jwt(func(c *auth.Config) { c.Issuer = "http://127.0.0.1:9000" }), true, ""},
		{"http jwks", jwt(func(c *auth.Config) { c.JWKSURL = "http://id.example.com/keys" }), true, "auth.jwks_url: "},
		{"bad audience", jwt(func(c *auth.Config) { c.Audiences = []string{resource, "urn:x"} }), true, "auth.audiences[1]: "},
		{"negative skew", jwt(func(c *auth.Config) { c.ClockSkew = -time.Second }), true, "auth.clock_skew: "},
		{"huge skew", jwt(func(c *auth.Config) { c.ClockSkew = time.Hour }), true, "auth.clock_skew: "},
		{"HS256", jwt(func(c *auth.Config) { c.Algorithms = []string{"RS256", "HS256"} }), true, `auth.algorithms[1]: "HS256" is not accepted`},
		{"none", jwt(func(c *auth.Config) { c.Algorithms = []string{"none"} }), true, `auth.algorithms[0]: "none" is not accepted`},
		{"bearer tokens in jwt", jwt(func(c *auth.Config) { c.BearerTokens = []auth.BearerToken{{Principal: "a", SHA256: good}} }), true, "auth.bearer_tokens: only in mode bearer"},
		{"no bearer tokens", brr(func(c *auth.Config) { c.BearerTokens = nil }), true, "auth.bearer_tokens: required"},
		{"no principal", brr(func(c *auth.Config) { c.BearerTokens = append(c.BearerTokens, auth.BearerToken{SHA256: sum("y")}) }), true, "auth.bearer_tokens[1].principal: required"},
		{"principal like a JWT user", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "https://id.example.com alice" }), true,
			`auth.bearer_tokens[0].principal: "https://id.example.com alice" has a space`},
		{"principal with tab", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ci\tbot" }), true, "auth.bearer_tokens[0].principal: "},
		{"principal with newline", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ci\nlevel=ERROR" }), true, "auth.bearer_tokens[0].principal: "},
		{"principal with NUL", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ci\x00" }), true, "auth.bearer_tokens[0].principal: "},
		{"principal with zero-width space", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ad\u200bmin" }), true, "auth.bearer_tokens[0].principal: "},
		{"principal with no-break space", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ad\u00a0min" }), true, "auth.bearer_tokens[0].principal: "},
		{"principal not UTF-8", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ad\xffmin" }), true, "auth.bearer_tokens[0].principal: not valid UTF-8"},
		{"principal unicode and punctuation", brr(func(c *auth.Config) { c.BearerTokens[0].Principal = "ci-bot@example.com/Zoë" }), true, ""},
		{"short sha256", brr(func(c *auth.Config) {
			c.BearerTokens = append(c.BearerTokens, auth.BearerToken{Principal: "b", SHA256: "abc"})
		}), true, "auth.bearer_tokens[1].sha256: want the SHA-256"},
		{"token in clear", brr(func(c *auth.Config) { c.BearerTokens[0].SHA256 = "my-secret-token" }), true, "auth.bearer_tokens[0].sha256: "},
		{"duplicate token", brr(func(c *auth.Config) {
			c.BearerTokens = append(c.BearerTokens, auth.BearerToken{Principal: "b", SHA256: strings.ToUpper(good)})
		}), true, "auth.bearer_tokens[1].sha256: the same token as auth.bearer_tokens[0]"},
		{"bad token scope", brr(func(c *auth.Config) { c.BearerTokens[0].Scopes = []string{"a b"} }), true, "auth.bearer_tokens[0].scopes[0]: "},
		{"bad required scope", jwt(func(c *auth.Config) { c.RequiredScopes = []string{"ok", `no"`} }), true, "auth.required_scopes[1]: "},
		{"empty supported scope", jwt(func(c *auth.Config) { c.ScopesSupported = []string{""} }), true, "auth.scopes_supported[0]: empty scope"},
		{"bad authorization server", jwt(func(c *auth.Config) { c.AuthorizationServers = []string{"ftp://x"} }), true, "auth.authorization_servers[0]: "},
		{"bad metadata url", jwt(func(c *auth.Config) { c.ResourceMetadataURL = "/relative" }), true, "auth.resource_metadata_url: "},
		{"bad resource name", jwt(func(c *auth.Config) { c.ResourceName = `a"b` }), true, "auth.resource_name: "},
	} {
		tc.cfg.Defaults()
		err := tc.cfg.Validate(tc.loopback)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q...", tc.name, err, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	var c auth.Config
	const doc = `
mode: jwt
resource: https://mcp.example.com/mcp
issuer: https://id.example.com
required_scopes: [mcp]
clock_skew: 30s
`
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	c.Defaults()
	if c.ClockSkew != 30*time.Second || strings.Join(c.AuthorizationServers, ",") != "https://id.example.com" ||
		strings.Join(c.ScopesSupported, ",") != "mcp" || c.ResourceName != auth.DefaultResourceName ||
		strings.Join(c.Algorithms, ",") != strings.Join(auth.DefaultAlgorithms, ",") {
		t.Errorf("Defaults: %+v", c)
	}
	c.Algorithms[0] = "changed"
	if auth.DefaultAlgorithms[0] == "changed" {
		t.Error("Defaults shares DefaultAlgorithms")
	}
	var d auth.Config
	d.Defaults()
	if d.ClockSkew != auth.DefaultClockSkew || d.AuthorizationServers != nil {
		t.Errorf("Defaults of an empty config: %+v", d)
	}
}
