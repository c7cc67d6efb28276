package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuthClient is the router as an OAuth client of an authorization server: where it
// asks for tokens, how it authenticates there, and what it asks a token for. The token
// requests themselves are golang.org/x/oauth2's (form encoding, client authentication,
// the error and expiry formats servers use).
type OAuthClient struct {
	// TokenURL is the authorization server's token endpoint.
	TokenURL string
	// ClientID identifies the router at the authorization server.
	ClientID string
	// ClientSecret returns the client secret. It is called for every token request,
	// so that a secret read from a file is read again after a rotation.
	ClientSecret func() (string, error)
	// AuthStyle is how the client authenticates: oauth2.AuthStyleInHeader (HTTP Basic,
	// client_secret_basic: the default) or oauth2.AuthStyleInParams
	// (client_secret_post).
	AuthStyle oauth2.AuthStyle
	// Scopes requested for the backend's token.
	Scopes []string
	// Audience is the audience parameter (RFC 8693, and many servers' client
	// credentials grant): the backend's identifier at the authorization server.
	Audience string
	// Resource is the RFC 8707 resource indicator: the backend's URI.
	Resource string
	// HTTPClient sends the token requests. Default http.DefaultClient (every request
	// is bounded by fetchTimeout anyway).
	HTTPClient *http.Client
}

// RFC 8693 names.
const (
	GrantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
)

// validate checks what every grant needs.
func (c *OAuthClient) validate() error {
	u, err := url.Parse(c.TokenURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("upstream: token URL %q is not an http or https URL", c.TokenURL)
	}
	if c.ClientID == "" {
		return errors.New("upstream: OAuth client needs a client ID")
	}
	if c.ClientSecret == nil {
		return errors.New("upstream: OAuth client needs a client secret")
	}
	return nil
}

// config is the x/oauth2 configuration of one token request, with params added to the
// form (the grant's own; they may replace grant_type).
func (c *OAuthClient) config(params url.Values) (*clientcredentials.Config, error) {
	secret, err := c.ClientSecret()
	if err != nil {
		return nil, fmt.Errorf("upstream: client secret: %w", err)
	}
	style := c.AuthStyle
	if style == oauth2.AuthStyleAutoDetect {
		style = oauth2.AuthStyleInHeader
	}
	if c.Audience != "" {
		params.Set("audience", c.Audience)
	}
	if c.Resource != "" {
		params.Set("resource", c.Resource)
	}
	return &clientcredentials.Config{ClientID: c.ClientID, ClientSecret: secret, TokenURL: c.TokenURL,
		Scopes: c.Scopes, AuthStyle: style, EndpointParams: params}, nil
}

// fetch makes one token request and returns the bearer header value it gives. An
// error answer from the server (invalid_client, invalid_grant, ...) matches
// ErrUnauthorized; what fetch says never includes a token or the secret.
func (c *OAuthClient) fetch(ctx context.Context, grant string, params url.Values) (fetched, error) {
	cfg, err := c.config(params)
	if err != nil {
		return fetched{}, err
	}
	if c.HTTPClient != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, c.HTTPClient)
	}
	t, err := cfg.Token(ctx)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && (re.ErrorCode != "" || re.Response != nil && re.Response.StatusCode/100 == 4) {
			return fetched{}, fmt.Errorf("%w: %s at %s: %w", ErrUnauthorized, grant, c.TokenURL, err)
		}
		return fetched{}, fmt.Errorf("upstream: %s at %s: %w", grant, c.TokenURL, err)
	}
	if t.AccessToken == "" {
		return fetched{}, fmt.Errorf("upstream: %s at %s: no access_token in the answer", grant, c.TokenURL)
	}
	if tt := t.TokenType; tt != "" && !strings.EqualFold(tt, "bearer") {
		return fetched{}, fmt.Errorf("upstream: %s at %s: token_type %q is not a bearer token", grant, c.TokenURL, tt)
	}
	v := "Bearer " + t.AccessToken
	if err := checkHeaderValue(v); err != nil {
		return fetched{}, fmt.Errorf("upstream: %s at %s: the access token: %w", grant, c.TokenURL, err)
	}
	return fetched{value: v, expiry: t.Expiry}, nil
}

// ClientCredentials is the router's own token for a backend, from the OAuth client
// credentials grant: fetched on first use, kept until shortly before it expires, then
// fetched again; a backend's 401 drops it at once.
func ClientCredentials(c OAuthClient) (Credential, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &clientCreds{c: c, cache: newTokenCache(1)}, nil
}

type clientCreds struct {
	c     OAuthClient
	cache *tokenCache
}

func (cc *clientCreds) Header() string { return AuthorizationHeader }
func (cc *clientCreds) String() string { return "client credentials at " + cc.c.TokenURL }

// Value implements Credential.
func (cc *clientCreds) Value(ctx context.Context) (string, error) {
	return cc.cache.get(ctx, "", cc)
}

func (cc *clientCreds) fetch(ctx context.Context) (fetched, error) {
	return cc.c.fetch(ctx, "client credentials grant", url.Values{})
}

// Refused implements Credential: the token is dropped and the next request fetches a
// new one.
func (cc *clientCreds) Refused(value string) bool {
	cc.cache.drop("", value)
	return true
}
