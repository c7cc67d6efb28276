// Package authtest runs a real OpenID provider on loopback for tests: the op package of
// github.com/zitadel/oidc/v3 over an in-memory store, with discovery, a JWKS that can be
// rotated in the middle of a test, JWT access tokens whose audience the test chooses
// (RFC 8707 resource), the client credentials and RFC 8693 token exchange grants, and
// helpers that mint deliberately bad tokens (expired, wrong audience, alg none, ...) for
// negative tests.
//
// It is a test fixture: it serves plain HTTP on 127.0.0.1 and accepts any registered
// client's secret in clear.
package authtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Options shape a Provider; the zero value is a working one.
type Options struct {
	// AccessTokenTTL is the lifetime of the access tokens the token endpoint issues and
	// of minted tokens without an expiry. Default 5 minutes.
	AccessTokenTTL time.Duration
	// Algorithm of the first signing key. Default RS256; ES256 and EdDSA also work.
	Algorithm jose.SignatureAlgorithm
}

// Provider is a running OpenID provider. Its methods are safe for concurrent use.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:<port>), the value of iss
	// in its tokens and the base of its discovery document.
	Issuer string

	tb     testing.TB
	ttl    time.Duration
	store  *store
	srv    *http.Server
	done   chan struct{}
	grants sync.Map // grant type -> *atomic.Int64
}

// Start runs a Provider on a loopback port until the end of tb.
func Start(tb testing.TB, o Options) *Provider {
	tb.Helper()
	if o.AccessTokenTTL <= 0 {
		o.AccessTokenTTL = 5 * time.Minute
	}
	if o.Algorithm == "" {
		o.Algorithm = jose.RS256
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("authtest: listen: %v", err)
	}
	p := &Provider{
		Issuer: "http://" + ln.Addr().String(),
		tb:     tb,
		ttl:    o.AccessTokenTTL,
		done:   make(chan struct{}),
	}
	first, err := newKey(o.Algorithm)
	if err != nil {
		ln.Close()
		tb.Fatalf("authtest: %v", err)
	}
	p.store = newStore(p.Issuer, p.ttl, first)
	cfg := &op.Config{
		// The key that encrypts opaque tokens; this provider issues JWTs only.
		CryptoKey:      sha256.Sum256([]byte("authtest")),
		AuthMethodPost: true,
	}
	prov, err := op.NewProvider(cfg, p.store, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		ln.Close()
		tb.Fatalf("authtest: provider: %v", err)
	}
	p.srv = &http.Server{
		Handler:           p.resourceIndicators(prov),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() {
		defer close(p.done)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("authtest: serve: %v", err)
		}
	}()
	tb.Cleanup(p.Close)
	return p
}

// Close stops the provider (Start registers it with the test's cleanup).
func (p *Provider) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		p.srv.Close()
	}
	<-p.done
}

// DiscoveryURL is the provider's OpenID discovery document.
func (p *Provider) DiscoveryURL() string { return p.Issuer + oidc.DiscoveryEndpoint }

// TokenURL is the provider's token endpoint (client credentials, token exchange).
func (p *Provider) TokenURL() string { return p.Issuer + "/oauth/token" }

// JWKSURL is the provider's key set.
func (p *Provider) JWKSURL() string { return p.Issuer + "/keys" }

// TokenRequests counts the requests to the token endpoint with this grant_type (for
// example "client_credentials" or oidc.GrantTypeTokenExchange): a test of a token cache
// reads it before and after.
func (p *Provider) TokenRequests(grantType string) int64 {
	if c, ok := p.grants.Load(grantType); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

type resourceKey struct{}

// resourceIndicators gives the token endpoint RFC 8707: op's client credentials request
// has no resource parameter and its token exchange takes the audience from `audience`
// only, so the resource values travel in the context (client credentials) or become the
// audience (token exchange, when it names none).
func (p *Provider) resourceIndicators(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
			if err := r.ParseForm(); err != nil {
				http.Error(w, "bad form", http.StatusBadRequest)
				return
			}
			grant := r.PostForm.Get("grant_type")
			c, _ := p.grants.LoadOrStore(grant, new(atomic.Int64))
			c.(*atomic.Int64).Add(1)
			if res := r.PostForm["resource"]; len(res) > 0 {
				r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
				if len(r.PostForm["audience"]) == 0 {
					r.Form["audience"] = res
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

func resources(ctx context.Context) []string {
	res, _ := ctx.Value(resourceKey{}).([]string)
	return res
}
