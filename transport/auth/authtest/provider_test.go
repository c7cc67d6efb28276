package authtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

const resource = "http://127.0.0.1:8080/mcp"

// verifier checks tokens of p with go-oidc, a verifier independent of the provider.
func verifier(t *testing.T, ctx context.Context, p *Provider, aud string) *oidc.IDTokenVerifier {
	t.Helper()
	disc, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	return disc.Verifier(&oidc.Config{ClientID: aud})
}

type atClaims struct {
	Scope string         `json:"scope"`
	Act   map[string]any `json:"act"`
}

func TestGrantsIssueVerifiableTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := Start(t, Options{})
	p.AddClient("router", "s3cret")
	v := verifier(t, ctx, p, resource)

	cc, err := p.ClientCredentials(ctx, "router", "s3cret", resource, "tools:call", "tools:list")
	if err != nil {
		t.Fatalf("client credentials: %v", err)
	}
	tok, err := v.Verify(ctx, cc.AccessToken)
	if err != nil {
		t.Fatalf("client credentials token: %v", err)
	}
	var c atClaims
	if err := tok.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if tok.Subject != "router" || !slices.Equal(tok.Audience, []string{resource}) || c.Scope != "tools:call tools:list" {
		t.Errorf("client credentials token: sub %q aud %v scope %q", tok.Subject, tok.Audience, c.Scope)
	}
	if got := p.TokenRequests("client_credentials"); got != 1 {
		t.Errorf("TokenRequests(client_credentials) = %d, want 1", got)
	}

	if _, err := p.ClientCredentials(ctx, "router", "wrong", resource); err == nil {
		t.Error("client credentials with a wrong secret: got a token")
	}

	user := p.Token(Claims{Subject: "alice", Audience: []string{resource}, Scopes: []string{"mcp"}})
	const backend = "http://127.0.0.1:9/backend"
	ex, err := p.Exchange(ctx, "router", "s3cret", user, backend, "read")
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	tok, err = verifier(t, ctx, p, backend).Verify(ctx, ex.AccessToken)
	if err != nil {
		t.Fatalf("exchanged token: %v", err)
	}
	c = atClaims{}
	if err := tok.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if tok.Subject != "alice" || c.Scope != "read" || c.Act["sub"] != "router" {
		t.Errorf("exchanged token: sub %q scope %q act %v", tok.Subject, c.Scope, c.Act)
	}
	if ex.Expiry.Before(time.Now()) {
		t.Errorf("exchanged token expiry %v is past", ex.Expiry)
	}
	if _, err := p.Exchange(ctx, "router", "s3cret", p.Expired(Claims{}), backend); err == nil {
		t.Error("exchange of an expired token: got a token")
	}
}

func TestRotate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := Start(t, Options{})
	c := Claims{Audience: []string{resource}}
	old := p.Token(c)
	oldKid := p.KeyID()

	kid := p.Rotate(RotateOptions{})
	if kid == oldKid || p.KeyID() != kid {
		t.Fatalf("Rotate returned %q; KeyID %q, old %q", kid, p.KeyID(), oldKid)
	}
	v := verifier(t, ctx, p, resource)
	for name, tok := range map[string]string{"old": old, "new": p.Token(c)} {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Errorf("%s key kept: %v", name, err)
		}
	}

	p.Rotate(RotateOptions{DropOld: true})
	v = verifier(t, ctx, p, resource)
	if _, err := v.Verify(ctx, old); err == nil {
		t.Error("token of a dropped key still verifies")
	}
	if _, err := v.Verify(ctx, p.Token(c)); err != nil {
		t.Errorf("token of the new key: %v", err)
	}
}

func TestBadTokensAreRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := Start(t, Options{})
	v := verifier(t, ctx, p, resource)
	c := Claims{Audience: []string{resource}}
	if _, err := v.Verify(ctx, p.Token(c)); err != nil {
		t.Fatalf("good token: %v", err)
	}
	for name, tok := range map[string]string{
		"expired":        p.Expired(c),
		"wrong issuer":   p.WrongIssuer(c),
		"wrong audience": p.WrongAudience(c),
		"unsigned":       p.Unsigned(c),
		"tampered":       p.Tampered(c),
		"unknown key":    p.UnknownKey(c),
		"forged kid":     p.ForgedKid(c),
		"hmac":           p.HMACWithPublicKey(c),
	} {
		if strings.Count(tok, ".") != 2 {
			t.Errorf("%s: %q is not a compact JWS", name, tok)
		}
		if _, err := v.Verify(ctx, tok); err == nil {
			t.Errorf("%s: go-oidc accepted it", name)
		}
	}
}

func TestAlgorithms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := Start(t, Options{Algorithm: "ES256"})
	p.Rotate(RotateOptions{Algorithm: "EdDSA"})
	disc, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	v := disc.Verifier(&oidc.Config{ClientID: resource, SupportedSigningAlgs: []string{"ES256", "EdDSA"}})
	if _, err := v.Verify(ctx, p.Token(Claims{Audience: []string{resource}})); err != nil {
		t.Errorf("EdDSA token: %v", err)
	}
}
