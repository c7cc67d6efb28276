package auth_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// TestChallengesParse reads every refusal's WWW-Authenticate with the Go SDK's client
// parser: one Bearer challenge whose parameters say what the verdict says.
func TestChallengesParse(t *testing.T) {
	scopes := []string{"mcp", "tools:read"}
	p, a := startJWT(t, auth.Options{}, func(c *auth.Config) { c.RequiredScopes = scopes })
	c := authtest.Claims{Audience: []string{resource}, Scopes: scopes}
	ok := a.Check(bearer(p.Token(c)), false)
	verdicts := map[string]auth.Verdict{
		"missing":        a.Check(nil, false),
		"other scheme":   a.Check([]byte("Basic eDp5"), false),
		"malformed":      a.Check([]byte("Bearer a b"), false),
		"in query":       a.Check(nil, true),
		"expired":        a.Check(bearer(p.Expired(c)), false),
		"wrong audience": a.Check(bearer(p.WrongAudience(c)), false),
		"not a JWT":      a.Check([]byte("Bearer abc"), false),
		"scope":          a.Check(bearer(p.Token(authtest.Claims{Audience: []string{resource}, Scopes: []string{"mcp"}})), false),
		"require":        a.RequireScopes(ok.Principal, []string{"tools:write"}),
	}
	for name, v := range verdicts {
		cs, err := oauthex.ParseWWWAuthenticate([]string{v.Challenge})
		if err != nil || len(cs) != 1 {
			t.Errorf("%s: %q: %v %v", name, v.Challenge, cs, err)
			continue
		}
		ch := cs[0]
		if ch.Scheme != "bearer" || ch.Params["resource_metadata"] != metaURL {
			t.Errorf("%s: %+v", name, ch)
		}
		wantErr := map[int]string{400: "invalid_request", 401: "invalid_token", 403: "insufficient_scope"}[v.Status]
		if name == "missing" || name == "other scheme" { // RFC 6750 3.1: no error code
			wantErr = ""
		}
		if ch.Params["error"] != wantErr {
			t.Errorf("%s: error %q, want %q", name, ch.Params["error"], wantErr)
		}
		if wantErr != "" && ch.Params["error_description"] != v.Description {
			t.Errorf("%s: error_description %q, want %q", name, ch.Params["error_description"], v.Description)
		}
		if v.Status == 401 && ch.Params["scope"] != "mcp tools:read" {
			t.Errorf("%s: scope %q", name, ch.Params["scope"])
		}
	}
	if s := verdicts["require"]; s.Status != 403 || !strings.Contains(s.Challenge, `scope="mcp tools:read tools:write"`) {
		t.Errorf("RequireScopes: %+v", s)
	}
}

// TestMetadataDiscovery serves the metadata at MetadataPaths and runs the Go SDK's
// client discovery on it: from the challenge's resource_metadata, and from the root.
func TestMetadataDiscovery(t *testing.T) {
	p := authtest.Start(t, authtest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	cfg := jwtConfig(p)
	cfg.Resource = base + "/mcp"
	cfg.ScopesSupported = []string{"mcp"}
	a := start(t, cfg, auth.Options{})
	mux := http.NewServeMux()
	for _, path := range a.MetadataPaths("/mcp") {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(a.Metadata())
		})
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := oauthex.ParseWWWAuthenticate([]string{a.Check(nil, false).Challenge})
	if err != nil {
		t.Fatal(err)
	}
	challenged := cs[0].Params["resource_metadata"]
	if challenged != base+"/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("resource_metadata %q", challenged)
	}
	for _, u := range []string{challenged, base + auth.WellKnownPath} {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, u, cfg.Resource, http.DefaultClient)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if !slices.Equal(prm.AuthorizationServers, []string{p.Issuer}) || !slices.Equal(prm.ScopesSupported, []string{"mcp"}) ||
			!slices.Equal(prm.BearerMethodsSupported, []string{"header"}) || prm.ResourceName != "mcprouter" {
			t.Errorf("%s: %+v", u, prm)
		}
	}
}
