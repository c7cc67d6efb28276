package auth_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// TestKeyRotation rotates the provider's key in the middle of the test: a token signed by
// the new key is accepted at once (its unknown kid makes the router fetch the JWKS), old
// tokens keep working while the old key is published, and stop when it is dropped.
func TestKeyRotation(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, nil)
	c := authtest.Claims{Audience: []string{resource}}
	check := func(name, tok string, want auth.Reason) {
		t.Helper()
		if v := a.Check(bearer(tok), false); v.Reason != want {
			t.Fatalf("%s: %s (%s), want %s", name, v.Reason, v.Description, want)
		}
	}
	first := p.Token(c)
	check("first key", first, auth.ReasonOK)

	p.Rotate(authtest.RotateOptions{})
	second := p.Token(c)
	check("second key, just published", second, auth.ReasonOK)
	check("first key, still published", first, auth.ReasonOK)

	p.Rotate(authtest.RotateOptions{Algorithm: "ES256", DropOld: true})
	third := p.Token(c)
	check("third key (ES256), old ones dropped", third, auth.ReasonOK)
	check("first key, dropped (its token was cached)", first, auth.ReasonBadSignature)
	check("second key, dropped", second, auth.ReasonBadSignature)
	check("third key again", third, auth.ReasonOK)
}

// TestKeysUnavailable: once the provider is gone, tokens of the keys held still verify
// (no I/O per request) and a token naming an unknown kid gets 503, not a 401 that would
// send the client to an authorization server that cannot help.
func TestKeysUnavailable(t *testing.T) {
	p, a := startJWT(t, auth.Options{CacheSize: -1}, nil)
	c := authtest.Claims{Audience: []string{resource}}
	held := p.Token(c)
	p.Rotate(authtest.RotateOptions{})
	unseen := p.Token(c)
	p.Close()

	if v := a.Check(bearer(held), false); !v.OK() {
		t.Fatalf("token of a held key with the provider down: %+v", v)
	}
	v := a.Check(bearer(unseen), false)
	if v.Status != 503 || v.Reason != auth.ReasonKeysUnavailable || v.Challenge != "" {
		t.Fatalf("token of an unseen key with the provider down: %+v", v)
	}
}

func TestNewFails(t *testing.T) {
	p := authtest.Start(t, authtest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, cfg := range map[string]auth.Config{
		// go-oidc refuses a discovery document whose issuer is not the one asked for.
		"issuer with a slash": {Mode: auth.ModeJWT, Resource: resource, Issuer: p.Issuer + "/"},
		"unreachable issuer":  {Mode: auth.ModeJWT, Resource: resource, Issuer: "http://127.0.0.1:1"},
		"unreachable JWKS":    {Mode: auth.ModeJWT, Resource: resource, Issuer: p.Issuer, JWKSURL: "http://127.0.0.1:1/keys"},
		"not a JWKS":          {Mode: auth.ModeJWT, Resource: resource, Issuer: p.Issuer, JWKSURL: p.DiscoveryURL()},
	} {
		cfg.Defaults()
		if err := cfg.Validate(true); err != nil {
			t.Fatalf("%s: Validate: %v", name, err)
		}
		if a, err := auth.New(ctx, cfg, auth.Options{}); err == nil {
			a.Close()
			t.Errorf("%s: New succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestJWKSOverride(t *testing.T) {
	p := authtest.Start(t, authtest.Options{})
	cfg := jwtConfig(p)
	cfg.JWKSURL = p.JWKSURL()
	a := start(t, cfg, auth.Options{})
	if v := a.Check(bearer(p.Token(authtest.Claims{Audience: []string{resource}})), false); !v.OK() {
		t.Fatalf("%+v", v)
	}
}

func TestAlgorithmsConfigured(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, func(c *auth.Config) {
		c.Algorithms = []string{"ES256"}
	})
	c := authtest.Claims{Audience: []string{resource}}
	if v := a.Check(bearer(p.Token(c)), false); v.Reason != auth.ReasonBadAlgorithm {
		t.Fatalf("RS256 token with algorithms [ES256]: %+v", v)
	}
	p.Rotate(authtest.RotateOptions{Algorithm: "ES256"})
	if v := a.Check(bearer(p.Token(c)), false); !v.OK() {
		t.Fatalf("ES256 token: %+v", v)
	}
}

// TestConcurrentRotation: requests that all bring the first token of a new key at once
// share one JWKS fetch, and none is refused (the refresh rate limit counts fetches, not
// the requests waiting on one).
func TestConcurrentRotation(t *testing.T) {
	p, a := startJWT(t, auth.Options{}, nil)
	for round := range 3 {
		p.Rotate(authtest.RotateOptions{})
		tok := bearer(p.Token(authtest.Claims{Audience: []string{resource}}))
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for range 16 {
			wg.Go(func() {
				if v := a.Check(tok, false); !v.OK() {
					errs <- string(v.Reason)
				}
			})
		}
		wg.Wait()
		close(errs)
		for r := range errs {
			t.Errorf("round %d: refused: %s", round, r)
		}
	}
}

// TestCacheExpiry: a token answered from the cache is refused once its exp (plus the
// skew) has passed on the Authenticator's clock.
func TestCacheExpiry(t *testing.T) {
	p := authtest.Start(t, authtest.Options{})
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	a := start(t, jwtConfig(p), auth.Options{Now: clock})
	tok := bearer(p.Token(authtest.Claims{Audience: []string{resource}, Expiry: clock().Add(30 * time.Second)}))
	for range 2 {
		if v := a.Check(tok, false); !v.OK() {
			t.Fatalf("fresh token: %+v", v)
		}
	}
	now.Add(int64(80 * time.Second)) // exp + 50s: within the 60s skew
	if v := a.Check(tok, false); !v.OK() {
		t.Fatalf("within the skew: %+v", v)
	}
	now.Add(int64(20 * time.Second))
	if v := a.Check(tok, false); v.Reason != auth.ReasonExpired {
		t.Fatalf("past exp and skew: %+v", v)
	}
}
