package upstream

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/auth/authtest"
)

// The resources of the tests: what the router's clients present tokens for, and the
// backend's own identifier at the authorization server.
const (
	routerResource  = "http://127.0.0.1:8080/mcp"
	backendResource = "https://crm.internal/mcp"
)

// oidcGuard is a backend that accepts only access tokens of p meant for it (audience
// backendResource), checked by go-oidc, a verifier independent of the provider; who is
// the token's subject. Tokens put in deny are refused, as if revoked.
type oidcGuard struct {
	*guard
	deny sync.Map // token -> true
}

func newOIDCGuard(t *testing.T, p *authtest.Provider, next http.Handler) *oidcGuard {
	t.Helper()
	disc, err := oidc.NewProvider(testCtx(t), p.Issuer)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	v := disc.Verifier(&oidc.Config{ClientID: backendResource})
	g := &oidcGuard{}
	g.guard = &guard{next: next, check: func(r *http.Request) (string, bool) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return "", false
		}
		if _, denied := g.deny.Load(tok); denied {
			return "", false
		}
		id, err := v.Verify(r.Context(), tok)
		if err != nil {
			return "", false
		}
		return id.Subject, true
	}}
	return g
}

// lastToken is the bearer token of the last request the guard accepted.
func (g *oidcGuard) lastToken() string {
	rs := g.requests()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].ok {
			return strings.TrimPrefix(rs[i].header.Get("Authorization"), "Bearer ")
		}
	}
	return ""
}

func startOP(t *testing.T) *authtest.Provider {
	p := authtest.Start(t, authtest.Options{})
	p.AddClient("router", "s3cret")
	return p
}

func routerClient(p *authtest.Provider, secret string) OAuthClient {
	return OAuthClient{TokenURL: p.TokenURL(), ClientID: "router",
		ClientSecret: func() (string, error) { return secret, nil },
		Resource:     backendResource, Scopes: []string{"crm"}}
}

// TestClientCredentialsBackend: a backend that accepts only tokens for itself gets the
// router's client credentials token on every request; one token serves them all until
// the backend refuses it (revoked): then a new one is fetched and the request goes
// through on the same session.
func TestClientCredentialsBackend(t *testing.T) {
	p := startOP(t)
	g := newOIDCGuard(t, p, sdkStreamable("cc"))
	ts := httptest.NewServer(g)
	defer ts.Close()
	cred, err := ClientCredentials(routerClient(p, "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	c, s := dialHTTP(t, ts.URL, HTTPOptions{Name: "crm", Credentials: []Credential{cred}})
	defer c.Close()
	doHandshake(t, c, s)
	for i := 0; i < 3; i++ {
		if err := c.Send(testCtx(t), []byte(msgCall(10+i, "echo", "x"))); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.TokenRequests("client_credentials"); n != 1 {
		t.Fatalf("%d client credentials requests for 5 requests, want 1 (the token is kept)", n)
	}
	for _, r := range g.requests() {
		if !r.ok || r.who != "router" {
			t.Fatalf("%s request: accepted %v as %q", r.method, r.ok, r.who)
		}
	}

	g.deny.Store(g.lastToken(), true)
	if err := c.Send(testCtx(t), []byte(msgCall(20, "echo", "after revocation"))); err != nil {
		t.Fatalf("send after the token was revoked: %v", err)
	}
	if got := resultText(t, s.waitResponse(t, "20")); got != "cc:after revocation" {
		t.Fatalf("result %q", got)
	}
	if n := p.TokenRequests("client_credentials"); n != 2 {
		t.Fatalf("%d client credentials requests, want 2 (one after the refusal)", n)
	}
	if n := g.count(http.MethodPost, false); n != 1 {
		t.Fatalf("%d POSTs refused, want 1", n)
	}
}

// TestClientCredentialsRefused: a token endpoint that refuses the router (a wrong
// secret) fails the request with ErrUnauthorized, naming the grant, and the backend is
// never reached without credentials.
func TestClientCredentialsRefused(t *testing.T) {
	p := startOP(t)
	g := newOIDCGuard(t, p, sdkStreamable("cc"))
	ts := httptest.NewServer(g)
	defer ts.Close()
	cred, err := ClientCredentials(routerClient(p, "wrong"))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := dialHTTP(t, ts.URL, HTTPOptions{Name: "crm", Credentials: []Credential{cred}})
	defer c.Close()
	err = c.Send(testCtx(t), []byte(msgInit))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "client credentials") ||
		!strings.Contains(err.Error(), "crm") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("err %v", err)
	}
	if n := len(g.requests()); n != 0 {
		t.Fatalf("the backend saw %d requests", n)
	}
}

// principal is a client of the router as the edge would make it, with a token of p
// for the router.
func principal(p *authtest.Provider, sub string) *auth.Principal {
	return &auth.Principal{Subject: sub, Issuer: p.Issuer,
		Token: p.Token(authtest.Claims{Subject: sub, Audience: []string{routerResource}})}
}

// offsetClock moves the token cache's clock forward by *d.
func offsetClock(d *atomic.Int64) func() time.Time {
	return func() time.Time { return time.Now().Add(time.Duration(d.Load())) }
}

// TestTokenExchangePerPrincipal: each client's upstream session carries a token the
// authorization server issued for that user and that backend, by RFC 8693 exchange of
// the client's own token; the client's token itself never reaches the backend. One
// exchange per principal serves its requests until the token expires.
func TestTokenExchangePerPrincipal(t *testing.T) {
	p := startOP(t)
	g := newOIDCGuard(t, p, sdkStreamable("tx"))
	ts := httptest.NewServer(g)
	defer ts.Close()
	x, err := NewTokenExchange(routerClient(p, "s3cret"), TokenExchangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64
	x.cache.now = offsetClock(&skew)
	const exchanges = "urn:ietf:params:oauth:grant-type:token-exchange"

	alice, bob := principal(p, "alice"), principal(p, "bob")
	conns := map[string]*HTTPConn{}
	sinks := map[string]*recSink{}
	for _, pr := range []*auth.Principal{alice, bob} {
		ctx := WithClient(testCtx(t), pr)
		s := newRecSink()
		c, err := DialHTTP(ctx, ts.URL, HTTPOptions{Name: "crm", Credentials: []Credential{x.For(pr)}}, s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		doHandshake(t, c, s)
		conns[pr.Subject], sinks[pr.Subject] = c, s
	}
	for i, sub := range []string{"alice", "bob", "alice", "bob"} {
		ctx := WithClient(testCtx(t), map[string]*auth.Principal{"alice": alice, "bob": bob}[sub])
		if err := conns[sub].Send(ctx, []byte(msgCall(10+i, "echo", sub))); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.TokenRequests(exchanges); n != 2 {
		t.Fatalf("%d exchanges for two principals, want 2", n)
	}
	tokens := map[string]string{}
	for _, r := range g.requests() {
		if !r.ok {
			t.Fatalf("%s request refused", r.method)
		}
		sid := r.header.Get("Mcp-Session-Id")
		if sid == "" {
			continue // initialize: no session yet
		}
		var want string
		for sub, c := range conns {
			if c.SessionID() == sid {
				want = sub
			}
		}
		if r.who != want {
			t.Fatalf("a request of %s's session carried %q's token", want, r.who)
		}
		tokens[r.who] = r.header.Get("Authorization")
	}
	if tokens["alice"] == "" || tokens["alice"] == tokens["bob"] {
		t.Fatalf("alice and bob did not get tokens of their own")
	}
	g.neverSaw(t, alice.Token)
	g.neverSaw(t, bob.Token)

	// Past the exchanged token's lifetime (5 minutes), the next request exchanges again.
	skew.Store(int64(6 * time.Minute))
	if err := conns["alice"].Send(WithClient(testCtx(t), alice), []byte(msgCall(30, "echo", "later"))); err != nil {
		t.Fatal(err)
	}
	if n := p.TokenRequests(exchanges); n != 3 {
		t.Fatalf("%d exchanges after alice's token expired, want 3", n)
	}
	if x.cached() != 2 {
		t.Fatalf("%d principals cached, want 2", x.cached())
	}
}

// TestTokenExchangeSharedAndBounded: concurrent requests of one principal share one
// exchange; the cache keeps at most CacheSize principals.
func TestTokenExchangeSharedAndBounded(t *testing.T) {
	p := startOP(t)
	x, err := NewTokenExchange(routerClient(p, "s3cret"), TokenExchangeOptions{CacheSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	carol := x.For(principal(p, "carol"))
	var wg sync.WaitGroup
	vals := make([]string, 8)
	errs := make([]error, 8)
	for i := range vals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vals[i], errs[i] = carol.Value(testCtx(t))
		}()
	}
	wg.Wait()
	for i := range vals {
		if errs[i] != nil || vals[i] != vals[0] {
			t.Fatalf("value %d: %v (differs: %v)", i, errs[i], vals[i] != vals[0])
		}
	}
	if n := p.TokenRequests(GrantTokenExchange); n != 1 {
		t.Fatalf("%d exchanges for 8 concurrent requests of one principal, want 1", n)
	}
	for _, sub := range []string{"dave", "erin"} {
		if _, err := x.For(principal(p, sub)).Value(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if n := x.cached(); n != 2 {
		t.Fatalf("%d principals cached, want the bound 2", n)
	}
}

// TestTokenExchangeRefusals: a client token the authorization server will not exchange
// (expired), an anonymous client, and a newer token of the same principal arriving with
// a request.
func TestTokenExchangeRefusals(t *testing.T) {
	p := startOP(t)
	x, err := NewTokenExchange(routerClient(p, "s3cret"), TokenExchangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := &auth.Principal{Subject: "frank", Issuer: p.Issuer, Token: p.Expired(authtest.Claims{Subject: "frank"})}
	cred := x.For(stale)
	_, err = cred.Value(testCtx(t))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "token exchange for "+stale.String()) {
		t.Fatalf("expired subject token: %v", err)
	}
	if strings.Contains(err.Error(), stale.Token) {
		t.Fatal("the error quotes the client's token")
	}
	// The same principal's request comes with its refreshed token: that one is exchanged.
	fresh := principal(p, "frank")
	if _, err := cred.Value(WithClient(testCtx(t), fresh)); err != nil {
		t.Fatalf("with the refreshed token: %v", err)
	}
	if _, err := x.For(nil).Value(testCtx(t)); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("anonymous: %v", err)
	}
	if _, err := NewTokenExchange(routerClient(p, "s3cret"), TokenExchangeOptions{SubjectTokenType: "saml"}); err == nil {
		t.Fatal("an unknown subject token type was accepted")
	}
	if _, err := ClientCredentials(OAuthClient{TokenURL: "ftp://x", ClientID: "a", ClientSecret: func() (string, error) { return "", nil }}); err == nil {
		t.Fatal("an ftp token URL was accepted")
	}
}
