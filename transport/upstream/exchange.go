package upstream

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/transport/auth"
)

// TokenExchange gets each client's own token for a backend with RFC 8693 token
// exchange: the router presents the client's access token (as subject_token) to the
// authorization server, authenticated as its own OAuth client, and asks for an access
// token for the backend (audience, resource, scopes). The backend sees the user's
// identity in a token meant for it; the client's token itself never leaves for a
// backend.
//
// Each principal's token is kept until shortly before it expires, in a cache of at
// most TokenExchangeOptions.CacheSize principals (least recently used dropped), and
// concurrent requests of one principal share one exchange. A backend's 401 drops the
// principal's token.
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
	// CacheSize bounds the principals whose token is kept. Default
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
	c := &exchangeCred{x: x}
	if p != nil {
		c.id = p.ID()
		c.who = p.String()
		c.subject.Store(&p.Token)
	} else {
		empty := ""
		c.subject.Store(&empty)
		c.who = (*auth.Principal)(nil).String()
	}
	return c
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

// cached is how many principals' tokens are kept now.
func (x *TokenExchange) cached() int { return x.cache.len() }

// exchangeCred is one principal's credential for the backend.
type exchangeCred struct {
	x       *TokenExchange
	id, who string                 // the principal's ID (the cache key) and its name for errors
	subject atomic.Pointer[string] // the principal's latest token
}

func (c *exchangeCred) Header() string { return AuthorizationHeader }
func (c *exchangeCred) String() string { return "token exchange for " + c.who }

// Value implements Credential. A request whose context carries the same principal
// (WithClient) with a newer token updates the subject token, so that an exchange after
// the first token expired presents the client's current one.
func (c *exchangeCred) Value(ctx context.Context) (string, error) {
	if p, ok := ClientFrom(ctx); ok && p != nil && p.Token != "" && c.id != "" && p.ID() == c.id {
		if cur := c.subject.Load(); *cur != p.Token {
			t := p.Token
			c.subject.Store(&t)
		}
	}
	if c.id == "" {
		_, err := c.x.exchange(ctx, c.who, "")
		return "", err
	}
	return c.x.cache.get(ctx, c.id, c)
}

func (c *exchangeCred) fetch(ctx context.Context) (fetched, error) {
	return c.x.exchange(ctx, c.who, *c.subject.Load())
}

// Refused implements Credential: the principal's token is dropped and the next request
// exchanges again.
func (c *exchangeCred) Refused(value string) bool {
	if c.id == "" {
		return false
	}
	c.x.cache.drop(c.id, value)
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
