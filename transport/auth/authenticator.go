package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcprouter/mcprouter/internal/asciifold"
)

// DefaultCacheSize is how many verified JWTs an Authenticator remembers by default.
const DefaultCacheSize = 10000

// Options are what New needs besides the configuration.
type Options struct {
	// Logger receives discovery and key-rotation events (never a token). nil: discard.
	Logger *slog.Logger
	// HTTPClient fetches the discovery document and the JWKS. nil: a default client
	// with timeouts.
	HTTPClient *http.Client
	// CacheSize bounds the verified-token cache (mode jwt): 0 means DefaultCacheSize,
	// a negative value turns the cache off (every request verifies its signature).
	CacheSize int
	// Now is the clock (tests). nil: time.Now.
	Now func() time.Time
	// Endpoint names the virtual server the Authenticator guards ("" for the main
	// endpoint): every Principal it makes carries it (Principal.Endpoint). With mode off
	// such an Authenticator still lets every request through, as the one principal
	// "anonymous" of the endpoint, so that the endpoint's sessions and policy are its
	// own.
	Endpoint string
}

// Authenticator checks the credentials of requests against one Config. It is safe for
// concurrent use; Check does no I/O unless a JWT names a signing key it has not seen
// (a key rotation), which makes that one request wait for the JWKS (bounded).
type Authenticator struct {
	mode      string
	required  []string
	static    *staticTokens
	jwt       *jwtVerifier
	keys      *keyring
	ch        *challenges
	metadata  []byte
	resource  string
	metaURL   string
	anon      *Principal      // mode off on a virtual server: every request's principal
	counts    []atomic.Uint64 // by reasonIndex
	closeOnce atomic.Bool
}

// New builds the Authenticator of cfg, which Defaults and Validate have been applied to.
// For jwt it runs the issuer's OpenID discovery and fetches its keys now, so a wrong or
// unreachable issuer is a start-up error, not a stream of 401s; the keys are then
// refreshed in the background until Close.
func New(ctx context.Context, cfg Config, o Options) (*Authenticator, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: keyFetchTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	a := &Authenticator{mode: cfg.Mode, required: cfg.RequiredScopes, resource: cfg.Resource,
		counts: make([]atomic.Uint64, len(Reasons))}
	if cfg.Mode == "" || cfg.Mode == ModeOff {
		a.mode = ModeOff
		if o.Endpoint != "" {
			a.anon = &Principal{Subject: "anonymous", Endpoint: o.Endpoint}
		}
		return a, nil
	}
	a.metaURL = cfg.ResourceMetadataURL
	if a.metaURL == "" {
		u, err := metadataURL(cfg.Resource)
		if err != nil {
			return nil, fmt.Errorf("auth.resource: %w", err)
		}
		a.metaURL = u
	}
	a.ch = newChallenges(a.metaURL, cfg.RequiredScopes)
	meta, err := buildMetadata(cfg)
	if err != nil {
		return nil, err
	}
	a.metadata = meta
	switch cfg.Mode {
	case ModeBearer:
		a.static = newStaticTokens(cfg.BearerTokens, o.Endpoint)
	case ModeJWT:
		if err := a.startJWT(ctx, cfg, o); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("auth.mode: unknown mode %q", cfg.Mode)
	}
	return a, nil
}

func (a *Authenticator) startJWT(ctx context.Context, cfg Config, o Options) error {
	jwksURL := cfg.JWKSURL
	ctx = oidc.ClientContext(ctx, o.HTTPClient)
	if jwksURL == "" {
		// go-oidc checks that the document's issuer is the one asked for.
		prov, err := oidc.NewProvider(ctx, cfg.Issuer)
		if err != nil {
			return fmt.Errorf("auth.issuer: OpenID discovery of %s: %w", cfg.Issuer, err)
		}
		var doc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := prov.Claims(&doc); err != nil || doc.JWKSURI == "" {
			return fmt.Errorf("auth.issuer: the discovery document of %s names no jwks_uri", cfg.Issuer)
		}
		jwksURL = doc.JWKSURI
	}
	v := &jwtVerifier{
		issuer:    cfg.Issuer,
		audiences: make(map[string]bool),
		skew:      cfg.ClockSkew,
		now:       o.Now,
		endpoint:  o.Endpoint,
	}
	for _, aud := range append([]string{cfg.Resource}, cfg.Audiences...) {
		v.audiences[canonicalURI(aud)] = true
	}
	for _, alg := range cfg.Algorithms {
		v.algs = append(v.algs, jose.SignatureAlgorithm(alg))
	}
	if o.CacheSize >= 0 {
		size := o.CacheSize
		if size == 0 {
			size = DefaultCacheSize
		}
		v.cache = newTokenCache(size)
	}
	keys, err := newKeyring(ctx, jwksURL, o.HTTPClient, o.Logger, v.cache.purge)
	if err != nil {
		if cfg.JWKSURL != "" {
			return fmt.Errorf("auth.jwks_url: %w", err)
		}
		return fmt.Errorf("auth.issuer: keys of %s: %w", cfg.Issuer, err)
	}
	v.keys = keys
	a.jwt, a.keys = v, keys
	o.Logger.Info("auth: jwt access tokens", "issuer", cfg.Issuer, "jwks", jwksURL, "resource", cfg.Resource)
	return nil
}

// Enabled reports whether requests are checked at all: false for mode off, except on a
// virtual server (Options.Endpoint), whose requests all get its anonymous principal.
func (a *Authenticator) Enabled() bool {
	return a != nil && (a.mode != ModeOff || a.anon != nil)
}

// Authenticates reports whether requests must present credentials (mode bearer or jwt):
// only then is there a metadata document to serve.
func (a *Authenticator) Authenticates() bool {
	return a != nil && a.mode != ModeOff
}

// Check authenticates one request from its Authorization header value as received
// (nil when absent). tokenInQuery reports an access_token parameter in the URL query:
// such a request is refused with 400 invalid_request whatever its header says (the MCP
// authorization spec forbids tokens in the query; RFC 6750 2.3 makes it the least
// trusted method, and a token in a URL ends up in logs). Then required_scopes apply.
func (a *Authenticator) Check(authorization []byte, tokenInQuery bool) Verdict {
	if !a.Authenticates() {
		return Verdict{Principal: a.anonymous(), Reason: ReasonOK}
	}
	var v Verdict
	switch {
	case tokenInQuery:
		v = a.ch.fixed[ReasonTokenInQuery]
	case len(authorization) == 0:
		v = a.ch.fixed[ReasonMissing]
	default:
		v = a.checkHeader(authorization)
	}
	if v.Status == 0 && !hasAll(v.Principal, a.required) {
		v = a.ch.insufficientScope(v.Principal, nil)
	}
	a.count(v.Reason)
	return v
}

func (a *Authenticator) checkHeader(h []byte) Verdict {
	token, bearer := bearerToken(h)
	if !bearer {
		return a.ch.fixed[ReasonMalformed]
	}
	// A token verified before is answered first: it was well-formed then.
	if a.jwt != nil {
		if p := a.jwt.cached(token); p != nil {
			return Verdict{Principal: p, Reason: ReasonOK}
		}
	}
	if !isB64Token(token) {
		return a.ch.malformedHeader()
	}
	if a.static != nil {
		if p := a.static.check(token); p != nil {
			return Verdict{Principal: p, Reason: ReasonOK}
		}
		return a.ch.fixed[ReasonUnknownToken]
	}
	p, r := a.jwt.verify(token)
	if r == ReasonOK {
		return Verdict{Principal: p, Reason: ReasonOK}
	}
	if r == ReasonMalformed {
		return a.ch.invalidToken(ReasonMalformed, malformedToken)
	}
	return a.ch.fixed[r]
}

// anonymous is the principal of a request when nothing is checked: the endpoint's
// anonymous one on a virtual server, else nil.
func (a *Authenticator) anonymous() *Principal {
	if a == nil {
		return nil
	}
	return a.anon
}

// bearerToken splits "Bearer <token>" (RFC 6750 2.1: the scheme is case-insensitive).
// bearer is false for another scheme (or none); the token is what follows the spaces,
// trailing white space trimmed, not yet checked against the b64token grammar.
func bearerToken(h []byte) (token []byte, bearer bool) {
	const scheme = "bearer"
	if len(h) < len(scheme) || !asciifold.Equal(h[:len(scheme)], scheme) {
		return nil, false
	}
	rest := h[len(scheme):]
	if len(rest) > 0 && rest[0] != ' ' {
		return nil, false // "Bearerx": another scheme
	}
	i := 0
	for i < len(rest) && rest[i] == ' ' {
		i++
	}
	j := len(rest)
	for j > i && (rest[j-1] == ' ' || rest[j-1] == '\t') {
		j--
	}
	return rest[i:j], true
}

// b64token marks the bytes of RFC 6750's b64token before its "=" padding:
// ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/".
var b64token = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/'
	}
	return t
}()

// isB64Token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(t []byte) bool {
	i := 0
	for i < len(t) && b64token[t[i]] {
		i++
	}
	if i == 0 {
		return false
	}
	for ; i < len(t); i++ {
		if t[i] != '=' {
			return false
		}
	}
	return true
}

// RequireScopes refuses p with 403 insufficient_scope unless it holds every scope in
// need; the challenge names required_scopes and all of need (RFC 6750 3.1: the scopes
// the operation needs, so one new authorization covers it), not only the missing ones.
func (a *Authenticator) RequireScopes(p *Principal, need []string) Verdict {
	if !a.Enabled() || hasAll(p, need) {
		return Verdict{Principal: p, Reason: ReasonOK}
	}
	a.count(ReasonInsufficientScope)
	return a.ch.insufficientScope(p, need)
}

func hasAll(p *Principal, need []string) bool {
	for _, s := range need {
		if !p.HasScope(s) {
			return false
		}
	}
	return true
}

// Close stops the background key refresh. It is idempotent.
func (a *Authenticator) Close() {
	if a == nil || a.keys == nil || !a.closeOnce.CompareAndSwap(false, true) {
		return
	}
	a.keys.close()
}
