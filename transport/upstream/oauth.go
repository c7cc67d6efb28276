package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

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
	// Logger receives the details of failed token requests (debug), which the errors
	// leave out. Default slog.Default().
	Logger *slog.Logger
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
// ErrUnauthorized. What fetch says may reach the client whose request needed the token
// (it becomes the request's error), so it never includes a token, the secret, the
// token URL or the server's response body; those details, the secrets cut out, go to
// the debug log.
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
		return fetched{}, c.tokenErr(grant, err, cfg.ClientSecret, params.Get("subject_token"))
	}
	bad := ""
	switch {
	case t.AccessToken == "":
		bad = "no access_token in the answer"
	case t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer"):
		bad = "the token_type is not bearer"
	case checkHeaderValue(t.AccessToken) != nil:
		bad = "the access token has a control character"
	}
	if bad != "" {
		c.log().Debug("token endpoint's answer not usable", "grant", grant, "token_url", c.TokenURL, "problem", bad, "token_type", t.TokenType)
		return fetched{}, fmt.Errorf("upstream: %s: %s", grant, bad)
	}
	return fetched{value: "Bearer " + t.AccessToken, expiry: t.Expiry}, nil
}

func (c *OAuthClient) log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// tokenError is a failed token request as the client may read it; the cause stays
// reachable with errors.Is and errors.As, never printed.
type tokenError struct {
	msg   string
	kind  error // ErrUnauthorized when the server refused, else nil
	cause error
}

func (e *tokenError) Error() string { return e.msg }
func (e *tokenError) Unwrap() []error {
	if e.kind == nil {
		return []error{e.cause}
	}
	return []error{e.kind, e.cause}
}

// tokenErr makes the error of a failed token request from what OAuth defines of an
// error answer only: the HTTP status, the error code and its description. A server
// that answers without an error code (an HTML page, a proxy's message) may put
// anything in its body, even the request it got: the body goes only to a debug line,
// bounded, with the secret and the subject token cut out.
func (c *OAuthClient) tokenErr(grant string, err error, secrets ...string) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		c.log().Debug("token request failed", "grant", grant, "token_url", c.TokenURL, "err", redact(err.Error(), secrets))
		var ue *url.Error
		what := "answered without a usable token"
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			what = "did not answer in time"
		case errors.As(err, &ue):
			what = "cannot be reached"
		}
		return &tokenError{msg: "upstream: " + grant + ": the token endpoint " + what, cause: err}
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	c.log().Debug("token endpoint refused", "grant", grant, "token_url", c.TokenURL, "status", status,
		"error", re.ErrorCode, "body", redact(string(re.Body), secrets))
	var b strings.Builder
	b.WriteString(grant)
	b.WriteString(": the token endpoint answered HTTP ")
	b.WriteString(strconv.Itoa(status))
	if re.ErrorCode != "" {
		b.WriteString(" ")
		b.WriteString(printable(re.ErrorCode, 64))
	}
	if re.ErrorDescription != "" {
		b.WriteString(" (")
		b.WriteString(printable(re.ErrorDescription, 200))
		b.WriteString(")")
	}
	e := &tokenError{cause: err}
	if re.ErrorCode != "" || status/100 == 4 {
		e.kind = ErrUnauthorized
		e.msg = ErrUnauthorized.Error() + ": " + b.String()
	} else {
		e.msg = "upstream: " + b.String()
	}
	return e
}

// maxLoggedBody bounds the part of a token endpoint's error body that is logged.
const maxLoggedBody = 512

// redact cuts the secrets out of s and bounds it, for a debug line.
func redact(s string, secrets []string) string {
	for _, x := range secrets {
		if x != "" {
			s = strings.ReplaceAll(s, x, "[redacted]")
		}
	}
	return printable(s, maxLoggedBody)
}

// printable is s bounded to max bytes, control characters replaced, so that a
// server's text cannot forge lines or grow without bound where it is shown.
func printable(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
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
