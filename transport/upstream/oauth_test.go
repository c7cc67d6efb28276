package upstream

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcprouter/mcprouter/internal/testio"

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

// startGuarded serves the SDK backend name behind an oidcGuard of p on loopback until the
// test ends, and returns the guard and the backend's URL.
func startGuarded(t *testing.T, p *authtest.Provider, name string) (*oidcGuard, string) {
	t.Helper()
	g := newOIDCGuard(t, p, sdkStreamable(name))
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	return g, ts.URL
}

// dialClientCredentials dials the backend "crm" at url with the router's client
// credentials at p (its secret as given).
func dialClientCredentials(t *testing.T, p *authtest.Provider, url, secret string) (*HTTPConn, *recSink) {
	t.Helper()
	cred, err := ClientCredentials(routerClient(p, secret))
	if err != nil {
		t.Fatal(err)
	}
	return dialHTTP(t, url, HTTPOptions{Name: "crm", Credentials: []Credential{cred}})
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
	g, url := startGuarded(t, p, "cc")
	c, s := dialClientCredentials(t, p, url, "s3cret")
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
	g, url := startGuarded(t, p, "cc")
	c, _ := dialClientCredentials(t, p, url, "wrong")
	defer c.Close()
	err := c.Send(testCtx(t), []byte(msgInit))
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

// startExchange starts an authorization server and a TokenExchange with o for the
// router's client of it.
func startExchange(t *testing.T, o TokenExchangeOptions) (*authtest.Provider, *TokenExchange) {
	t.Helper()
	p := startOP(t)
	x, err := NewTokenExchange(routerClient(p, "s3cret"), o)
	if err != nil {
		t.Fatal(err)
	}
	return p, x
}

// skewed makes x's token cache read a clock the test moves forward by storing into
// the value it returns.
func skewed(x *TokenExchange) *atomic.Int64 {
	d := new(atomic.Int64)
	x.cache.now = offsetClock(d)
	return d
}

// TestTokenExchangePerPrincipal: each client's upstream session carries a token the
// authorization server issued for that user and that backend, by RFC 8693 exchange of
// the client's own token; the client's token itself never reaches the backend. One
// exchange per principal serves its requests until the token expires.
func TestTokenExchangePerPrincipal(t *testing.T) {
	p, x := startExchange(t, TokenExchangeOptions{})
	g, url := startGuarded(t, p, "tx")
	skew := skewed(x)
	const exchanges = "urn:ietf:params:oauth:grant-type:token-exchange"

	alice, bob := principal(p, "alice"), principal(p, "bob")
	conns := map[string]*HTTPConn{}
	sinks := map[string]*recSink{}
	for _, pr := range []*auth.Principal{alice, bob} {
		ctx := WithClient(testCtx(t), pr)
		s := newRecSink()
		c, err := DialHTTP(ctx, url, HTTPOptions{Name: "crm", Credentials: []Credential{x.For(pr)}}, s)
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
	p, x := startExchange(t, TokenExchangeOptions{CacheSize: 2})
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
	p, x := startExchange(t, TokenExchangeOptions{})
	stale := &auth.Principal{Subject: "frank", Issuer: p.Issuer, Token: p.Expired(authtest.Claims{Subject: "frank"})}
	cred := x.For(stale)
	_, err := cred.Value(testCtx(t))
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

// TestTokenExchangePerSubjectToken: two tokens of one user (two client apps, or a token
// narrowed to fewer scopes) are two subject tokens: the backend's token for the second
// must come from exchanging the second, not from the first's exchange cached under the
// user's ID (the authorization server must see each token it vouches for). The same
// holds on one session whose requests come with either token, and each token's
// exchange is still made once.
func TestTokenExchangePerSubjectToken(t *testing.T) {
	p, x := startExchange(t, TokenExchangeOptions{})
	admin := &auth.Principal{Subject: "alice", Issuer: p.Issuer, Scopes: []string{"admin"},
		Token: p.Token(authtest.Claims{Subject: "alice", Audience: []string{routerResource}, Scopes: []string{"admin"},
			Extra: map[string]any{"client_id": "admin-console"}})}
	narrow := &auth.Principal{Subject: "alice", Issuer: p.Issuer, Scopes: []string{"read"},
		Token: p.Token(authtest.Claims{Subject: "alice", Audience: []string{routerResource}, Scopes: []string{"read"},
			Extra: map[string]any{"client_id": "third-party-agent"}})}
	va, err := x.For(admin).Value(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	vn, err := x.For(narrow).Value(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if vn == va || p.TokenRequests(GrantTokenExchange) != 2 {
		t.Fatalf("the narrow token's session got the admin token's exchange (same value %v, %d exchanges for 2 subject tokens)",
			vn == va, p.TokenRequests(GrantTokenExchange))
	}

	// One session of alice's, its requests made with either token.
	cred := x.For(admin)
	for i, pr := range []*auth.Principal{narrow, admin, narrow} {
		v, err := cred.Value(WithClient(testCtx(t), pr))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[*auth.Principal]string{admin: va, narrow: vn}[pr]; v != want {
			t.Fatalf("request %d with the %s token carried the other token's exchange", i, pr.Scopes[0])
		}
	}
	if n := p.TokenRequests(GrantTokenExchange); n != 2 || x.cached() != 2 {
		t.Fatalf("%d exchanges and %d cached for 2 subject tokens, want 2 and 2", n, x.cached())
	}
}

// TestTokenExchangeSubjectLifetime: an exchanged token is not used past the expiry of
// the token it was exchanged for, even if the authorization server gave it a longer
// life; a backend's refusal drops it at once.
func TestTokenExchangeSubjectLifetime(t *testing.T) {
	p, x := startExchange(t, TokenExchangeOptions{})
	skew := skewed(x)
	exp := time.Now().Add(time.Minute).Truncate(time.Second) // the exchanged token lives 5 minutes
	short := &auth.Principal{Subject: "gina", Issuer: p.Issuer, Expiry: exp,
		Token: p.Token(authtest.Claims{Subject: "gina", Audience: []string{routerResource}, Expiry: exp})}
	cred := x.For(short)
	_, err := cred.Value(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(55 * time.Second)) // past exp - refreshAhead, long before 5 minutes
	if _, err := cred.Value(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := p.TokenRequests(GrantTokenExchange); n != 2 {
		t.Fatalf("%d exchanges, want 2: the exchanged token outlived its subject token", n)
	}
	v2, _ := cred.Value(testCtx(t))
	if !cred.Refused(v2) {
		t.Fatal("a refused exchanged token has no renewal")
	}
	v3, err := cred.Value(testCtx(t))
	if err != nil || p.TokenRequests(GrantTokenExchange) != 3 || v3 == "" {
		t.Fatalf("after the refusal: %v, %d exchanges, want 3", err, p.TokenRequests(GrantTokenExchange))
	}
}

// TestTokenEndpointErrorMessages: what a failed token request says becomes the client's
// error message, so it is built from OAuth's error fields (status, code, description)
// alone: a body without an error code (a proxy's page that echoes the request) and the
// token URL stay out of it, and go to the debug log without the secret or the subject
// token.
func TestTokenEndpointErrorMessages(t *testing.T) {
	const secret, subject = "s3cret-value", "subject-token-value"
	answers := map[string]struct {
		status int
		ctype  string
		body   string
	}{
		"/nocode":   {400, "text/html", "<html>internal proxy 10.0.0.7 saw client_secret=" + secret + "&subject_token=" + subject + "</html>"},
		"/code":     {400, "application/json", `{"error":"invalid_grant","error_description":"subject token expired\n"}`},
		"/gateway":  {502, "text/plain", "upstream 10.0.0.7:8443 down " + subject},
		"/ok-empty": {200, "application/json", `{"token_type":"bearer"}`},
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok { // a connection cut without an answer
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", a.ctype)
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
	defer ts.Close()
	for _, tc := range []struct {
		path         string
		unauthorized bool
		want         []string
	}{
		{"/nocode", true, []string{"token exchange for alice", "HTTP 400"}},
		{"/code", true, []string{"HTTP 400 invalid_grant (subject token expired )"}},
		{"/gateway", false, []string{"HTTP 502"}},
		{"/ok-empty", false, []string{"without a usable token"}},
		{"/nowhere", false, []string{"cannot be reached"}},
	} {
		var logs testio.Buffer
		c := OAuthClient{TokenURL: ts.URL + tc.path, ClientID: "router", AuthStyle: oauth2.AuthStyleInParams,
			ClientSecret: func() (string, error) { return secret, nil },
			Logger:       slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		_, err := c.fetch(testCtx(t), "token exchange for alice", url.Values{"subject_token": {subject}})
		if err == nil {
			t.Fatalf("%s: no error", tc.path)
		}
		msg := err.Error()
		if errors.Is(err, ErrUnauthorized) != tc.unauthorized {
			t.Errorf("%s: %q: ErrUnauthorized %v, want %v", tc.path, msg, !tc.unauthorized, tc.unauthorized)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", tc.path, msg, w)
			}
		}
		for _, leak := range []string{"10.0.0.7", "html", ts.URL, "127.0.0.1", secret, subject, "\n"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the error %q shows %q", tc.path, msg, leak)
			}
		}
		if l := logs.String(); !strings.Contains(l, "level=DEBUG") || !strings.Contains(l, ts.URL) ||
			strings.Contains(l, secret) || strings.Contains(l, subject) {
			t.Errorf("%s: debug log %q: want the detail with the token URL, without the secrets", tc.path, l)
		}
	}
	var re *oauth2.RetrieveError
	_, err := (&OAuthClient{TokenURL: ts.URL + "/code", ClientID: "router",
		ClientSecret: func() (string, error) { return secret, nil }}).fetch(testCtx(t), "g", url.Values{})
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("the server's error is not kept as the cause: %v", err)
	}
}
