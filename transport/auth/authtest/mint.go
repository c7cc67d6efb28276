package authtest

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Claims are the contents of a minted access token. Zero fields take the defaults noted;
// Omit drops registered claims altogether (a token without exp, without sub...).
type Claims struct {
	Subject  string   // sub; default "alice"
	Audience []string // aud; default none (set it: the resource the token is for)
	Scopes   []string // scope (space-separated) or, with SCP, scp (an array)
	SCP      bool
	Issuer   string    // iss; default the provider's issuer
	IssuedAt time.Time // iat; default now
	// NotBefore is nbf; default now.
	NotBefore time.Time
	// Expiry is exp; default now plus the provider's AccessTokenTTL.
	Expiry time.Time
	// Extra claims, added last (they may override the ones above).
	Extra map[string]any
	// Omit names claims to leave out ("exp", "sub", "nbf", ...).
	Omit []string
}

func (p *Provider) claims(c Claims) map[string]any {
	now := time.Now()
	if c.Subject == "" {
		c.Subject = "alice"
	}
	if c.Issuer == "" {
		c.Issuer = p.Issuer
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = now
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = now
	}
	if c.Expiry.IsZero() {
		c.Expiry = now.Add(p.ttl)
	}
	m := map[string]any{
		"iss": c.Issuer,
		"sub": c.Subject,
		"iat": c.IssuedAt.Unix(),
		"nbf": c.NotBefore.Unix(),
		"exp": c.Expiry.Unix(),
		"jti": base64.RawURLEncoding.EncodeToString([]byte(now.String())),
	}
	switch len(c.Audience) {
	case 0:
	case 1:
		m["aud"] = c.Audience[0]
	default:
		m["aud"] = c.Audience
	}
	if len(c.Scopes) > 0 {
		if c.SCP {
			m["scp"] = c.Scopes
		} else {
			m["scope"] = strings.Join(c.Scopes, " ")
		}
	}
	for k, v := range c.Extra {
		m[k] = v
	}
	for _, k := range c.Omit {
		delete(m, k)
	}
	return m
}

func (p *Provider) sign(k *key, kid string, alg jose.SignatureAlgorithm, signingKey any, claims map[string]any) string {
	p.tb.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		p.tb.Fatalf("authtest: claims: %v", err)
	}
	return p.signBytes(kid, alg, signingKey, payload)
}

// signBytes signs payload as it is: no claim is added, none is checked.
func (p *Provider) signBytes(kid string, alg jose.SignatureAlgorithm, signingKey any, payload []byte) string {
	p.tb.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{
		Algorithm: alg,
		Key:       jose.JSONWebKey{Key: signingKey, KeyID: kid, Algorithm: string(alg)},
	}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		p.tb.Fatalf("authtest: signer: %v", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		p.tb.Fatalf("authtest: sign: %v", err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		p.tb.Fatalf("authtest: serialize: %v", err)
	}
	return s
}

// Token mints a valid access token signed by the current key: what the provider would
// issue a user after an authorization code flow, without the browser.
func (p *Provider) Token(c Claims) string {
	p.tb.Helper()
	k := p.signingKey()
	return p.sign(k, k.id, k.alg, k.priv, p.claims(c))
}

// SignPayload signs payload, a claims set written by hand, with the current key: for
// payloads no map can produce (a claim twice, claims in a chosen order).
func (p *Provider) SignPayload(payload string) string {
	p.tb.Helper()
	k := p.signingKey()
	return p.signBytes(k.id, k.alg, k.priv, []byte(payload))
}

// Expired mints a token whose exp passed an hour ago.
func (p *Provider) Expired(c Claims) string {
	p.tb.Helper()
	now := time.Now()
	c.IssuedAt, c.NotBefore, c.Expiry = now.Add(-2*time.Hour), now.Add(-2*time.Hour), now.Add(-time.Hour)
	return p.Token(c)
}

// NotYetValid mints a token whose nbf is an hour ahead.
func (p *Provider) NotYetValid(c Claims) string {
	p.tb.Helper()
	now := time.Now()
	c.NotBefore, c.Expiry = now.Add(time.Hour), now.Add(2*time.Hour)
	return p.Token(c)
}

// WrongIssuer mints a token signed by the provider's key but naming another issuer, one
// that starts with the real one (a prefix match would accept it).
func (p *Provider) WrongIssuer(c Claims) string {
	p.tb.Helper()
	c.Issuer = p.Issuer + "/evil"
	return p.Token(c)
}

// WrongAudience mints a token for another resource.
func (p *Provider) WrongAudience(c Claims) string {
	p.tb.Helper()
	c.Audience = []string{"http://127.0.0.1:1/another-resource"}
	return p.Token(c)
}

// Unsigned mints a token with alg none and an empty signature.
func (p *Provider) Unsigned(c Claims) string {
	p.tb.Helper()
	payload, err := json.Marshal(p.claims(c))
	if err != nil {
		p.tb.Fatalf("authtest: claims: %v", err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString(payload) + "."
}

// Tampered mints a valid token, then changes its payload (sub gains "-admin") and keeps
// the signature.
func (p *Provider) Tampered(c Claims) string {
	p.tb.Helper()
	tok := p.Token(c)
	parts := strings.Split(tok, ".")
	m := p.claims(c)
	m["sub"] = m["sub"].(string) + "-admin"
	payload, err := json.Marshal(m)
	if err != nil {
		p.tb.Fatalf("authtest: claims: %v", err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

// UnknownKey mints a token signed by a key the provider never published, under a kid of
// its own.
func (p *Provider) UnknownKey(c Claims) string {
	p.tb.Helper()
	return p.signStranger(c, false)
}

// ForgedKid mints a token signed by an unpublished key but naming the current key's kid.
func (p *Provider) ForgedKid(c Claims) string {
	p.tb.Helper()
	return p.signStranger(c, true)
}

// signStranger signs c with a fresh key of the current key's algorithm, never
// published, under the current key's kid when forge is set and its own otherwise.
func (p *Provider) signStranger(c Claims, forge bool) string {
	p.tb.Helper()
	k := p.signingKey()
	stranger, err := newKey(k.alg)
	if err != nil {
		p.tb.Fatalf("authtest: %v", err)
	}
	kid := stranger.id
	if forge {
		kid = k.id
	}
	return p.sign(stranger, kid, stranger.alg, stranger.priv, p.claims(c))
}

// HMACWithPublicKey mints the key-confusion forgery: HS256 whose secret is the current
// public key (PEM), under its kid. A verifier that lets the token pick the algorithm
// and feeds it the key it has would accept it.
func (p *Provider) HMACWithPublicKey(c Claims) string {
	p.tb.Helper()
	k := p.signingKey()
	der, err := x509.MarshalPKIXPublicKey(k.priv.Public())
	if err != nil {
		p.tb.Fatalf("authtest: public key: %v", err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return p.sign(k, k.id, jose.HS256, secret, p.claims(c))
}
