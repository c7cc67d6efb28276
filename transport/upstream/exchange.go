package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// TokenExchange gets each client's own token for a backend with RFC 8693 token
// exchange: the router presents the client's access token (as subject_token) to the
// authorization server, authenticated as its own OAuth client, and asks for an access
// token for the backend (audience, resource, scopes). The backend sees the user's
// identity in a token meant for it; the client's token itself never leaves for a
// backend.
//
// Each exchanged token is kept by the token it was exchanged for (the principal's ID
// and the SHA-256 of the subject token), never by the principal alone: two tokens of
// one user (another client application, narrower scopes) are two exchanges, so that
// the authorization server sees and decides on every token it vouches for. An
// exchanged token is kept until shortly before it, or the subject token, expires (the
// backend's token must not outlive the one it stands for), in a cache of at most
// TokenExchangeOptions.CacheSize subject tokens (least recently used dropped);
// concurrent requests with one subject token share one exchange. A backend's 401 drops
// the exchanged token.
//
// A per-client upstream session carries one principal's token: the fleet dials it with
// WithClient, and the dialer gives the session For(principal) as its credential.
type TokenExchange struct {
	client      OAuthClient
	subjectType string
	cache       *tokenCache
}

// TokenExchangeOptions tune a TokenExchange; the zero value takes the defaults.
type TokenExchangeOptions struct {
	// SubjectTokenType is the type of the client's token: TokenTypeAccessToken (the
	// default) or TokenTypeJWT.
	SubjectTokenType string
	// CacheSize bounds the subject tokens whose exchanged token is kept. Default
	// DefaultTokenCacheSize.
	CacheSize int
}

// NewTokenExchange checks c and o and returns the exchange.
func NewTokenExchange(c OAuthClient, o TokenExchangeOptions) (*TokenExchange, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	switch o.SubjectTokenType {
	case "":
		o.SubjectTokenType = TokenTypeAccessToken
	case TokenTypeAccessToken, TokenTypeJWT:
	default:
		return nil, fmt.Errorf("upstream: subject token type %q is neither %s nor %s", o.SubjectTokenType, TokenTypeAccessToken, TokenTypeJWT)
	}
	return &TokenExchange{client: c, subjectType: o.SubjectTokenType, cache: newTokenCache(o.CacheSize)}, nil
}

// For returns the credential of p's upstream sessions: p's own token for the backend.
// p must carry its token (Principal.Token); a principal without one gets an error on
// every request (ErrUnauthorized), never a session without credentials.
func (x *TokenExchange) For(p *auth.Principal) Credential {
	c := &exchangeCred{x: x, who: p.String()}
	if p != nil {
		c.id = p.ID()
		c.subject.Store(x.subject(c.id, c.who, p))
	} else {
		c.subject.Store(&subjectToken{x: x, who: c.who})
	}
	return c
}

// subject makes the cache entry's key and fetcher of p's current token.
func (x *TokenExchange) subject(id, who string, p *auth.Principal) *subjectToken {
	return &subjectToken{x: x, who: who, token: p.Token, expiry: p.Expiry, key: exchangeKey(id, p.Token)}
}

// exchangeKey is the cache key of an exchange of token for the principal id: the
// token's SHA-256 (fixed length, so the key is unambiguous) and the ID. The token
// itself is not kept in the key.
func exchangeKey(id, token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:]) + " " + id
}

// exchange asks the authorization server for the backend's token for subject.
func (x *TokenExchange) exchange(ctx context.Context, who, subject string) (fetched, error) {
	if subject == "" {
		return fetched{}, fmt.Errorf("%w: token exchange for %s: the client presented no token to exchange", ErrUnauthorized, who)
	}
	params := url.Values{
		"grant_type":           {GrantTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {x.subjectType},
		"requested_token_type": {TokenTypeAccessToken},
	}
	return x.client.fetch(ctx, "token exchange for "+who, params)
}

// cached is how many exchanged tokens are kept now.
func (x *TokenExchange) cached() int { return x.cache.len() }

// subjectToken is one token a client presented, with its cache key; it is the fetcher
// of its own exchange, so that a request that finds the exchanged token cached
// allocates nothing.
type subjectToken struct {
	x      *TokenExchange
	who    string    // the principal's name for errors
	token  string    // the client's token ("" for an anonymous client)
	expiry time.Time // the token's expiry (zero: not known)
	key    string    // exchangeKey of the principal and token
}

// fetch exchanges the token; the exchanged token is kept no longer than the subject
// token is valid.
func (s *subjectToken) fetch(ctx context.Context) (fetched, error) {
	f, err := s.x.exchange(ctx, s.who, s.token)
	if err == nil && !s.expiry.IsZero() && (f.expiry.IsZero() || s.expiry.Before(f.expiry)) {
		f.expiry = s.expiry
	}
	return f, err
}

// exchangeCred is one principal's credential for the backend.
type exchangeCred struct {
	x       *TokenExchange
	id, who string                       // the principal's ID and its name for errors
	subject atomic.Pointer[subjectToken] // the principal's latest token
}

func (c *exchangeCred) Header() string { return AuthorizationHeader }
func (c *exchangeCred) String() string { return "token exchange for " + c.who }

// Value implements Credential. A request whose context carries the same principal
// (WithClient) with another token (a newer one, or one of another client application
// of the same user) presents that token: its own exchange, cached under its own key.
func (c *exchangeCred) Value(ctx context.Context) (string, error) {
	if c.id == "" {
		_, err := c.x.exchange(ctx, c.who, "")
		return "", err
	}
	s := c.subject.Load()
	if p, ok := ClientFrom(ctx); ok && p != nil && p.Token != "" && p.Token != s.token && p.ID() == c.id {
		s = c.x.subject(c.id, c.who, p)
		c.subject.Store(s)
	}
	return c.x.cache.get(ctx, s.key, s)
}

// Refused implements Credential: the exchanged token of the principal's latest subject
// token is dropped (if value is still it) and the next request exchanges again.
func (c *exchangeCred) Refused(value string) bool {
	if c.id == "" {
		return false
	}
	c.x.cache.drop(c.subject.Load().key, value)
	return true
}

// clientKey marks a context as a client's: the dial of a per-client upstream session,
// or a request forwarded for that client.
type clientKey struct{}

type clientMark struct{ p *auth.Principal }

// WithClient marks ctx as acting for the client p (nil: an anonymous client). The fleet
// dials a per-client upstream session with it so that the dialer gives the session
// that client's credentials (For) rather than the router's own, and a backend that
// needs a user's identity is never reached with the router's.
func WithClient(ctx context.Context, p *auth.Principal) context.Context {
	return context.WithValue(ctx, clientKey{}, clientMark{p})
}

// ClientFrom returns the client ctx acts for; ok is false for the router's own work
// (the fleet's shared sessions, catalog fetches, health checks).
func ClientFrom(ctx context.Context) (p *auth.Principal, ok bool) {
	m, ok := ctx.Value(clientKey{}).(clientMark)
	return m.p, ok
}
