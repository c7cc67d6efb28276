package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/oauth2"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// BackendAuthConfig is a backend's own credentials: what the router presents to the
// backend. The client's token is never passed through.
//
// Headers go with every request. Besides them, at most one of bearer_env, bearer_file
// and client_credentials is the router's own token for the backend. token_exchange
// gives each client's upstream session that user's own token for the backend (the
// backend must use sessions: per-client); the router's own sessions with it (catalog,
// health checks) then carry the router's own token if one is configured, else none
// (enough only for a backend that lists its tools to anyone).
// Only HTTP backends (url, urls) take credentials: a command backend gets its secrets
// in env, and a NATS backend is reached over the router's own NATS connection.
type BackendAuthConfig struct {
	// Headers are sent with every request: a literal value, {env: NAME} (read from the
	// router's environment at start) or {file: PATH} (re-read when it changes).
	Headers map[string]SecretValue `yaml:"headers"`
	// BearerEnv names the router's environment variable that holds the backend's
	// bearer token (read at start).
	BearerEnv string `yaml:"bearer_env"`
	// BearerFile is a file that holds the bearer token (a mounted secret): re-read
	// when it changes, and at once when the backend refuses the token.
	BearerFile string `yaml:"bearer_file"`
	// ClientCredentials is the router's own token from an OAuth client credentials
	// grant, kept until shortly before it expires.
	ClientCredentials *OAuthClientConfig `yaml:"client_credentials"`
	// TokenExchange gets each client's own token for the backend by RFC 8693 token
	// exchange of the client's token, kept per client until shortly before it expires.
	TokenExchange *TokenExchangeConfig `yaml:"token_exchange"`
}

// OAuthClientConfig is the router as an OAuth client of the authorization server that
// issues the backend's tokens.
type OAuthClientConfig struct {
	// TokenURL is the token endpoint: https, or http on a loopback host.
	TokenURL string `yaml:"token_url"`
	// ClientID is the router's client at the authorization server.
	ClientID string `yaml:"client_id"`
	// ClientSecretEnv or ClientSecretFile (exactly one) hold the client secret; the
	// file is read for every token request, so a rotated secret is used at once.
	ClientSecretEnv  string `yaml:"client_secret_env"`
	ClientSecretFile string `yaml:"client_secret_file"`
	// AuthMethod is how the router authenticates at the token endpoint:
	// client_secret_basic (default) or client_secret_post.
	AuthMethod string `yaml:"auth_method"`
	// Scopes asked for the backend's token.
	Scopes []string `yaml:"scopes"`
	// Audience is the backend's identifier at the authorization server (the audience
	// parameter), if it wants one.
	Audience string `yaml:"audience"`
	// Resource is the backend's RFC 8707 resource indicator (its URI), if the
	// authorization server takes one.
	Resource string `yaml:"resource"`
}

// TokenExchangeConfig is an RFC 8693 token exchange: the client's token (the
// subject_token) for an access token of the same user meant for the backend. It needs
// auth.mode: jwt: the clients' tokens are what is sent to token_url, and in mode bearer
// they are the router's own long-lived static secrets (in mode off there are none).
type TokenExchangeConfig struct {
	OAuthClientConfig `yaml:",inline"`
	// SubjectTokenType is the type of the clients' tokens: access_token (default) or
	// jwt (or either URN).
	SubjectTokenType string `yaml:"subject_token_type"`
	// CacheSize bounds the client tokens whose exchanged token is kept. Default 10000.
	CacheSize int `yaml:"cache_size"`
	// AllowForeignTokenURL says that a token_url on another host than auth.issuer's is
	// meant: the clients' tokens (issued for the router) are then sent to a party
	// other than their issuer. Without it the router warns at start.
	AllowForeignTokenURL bool `yaml:"allow_foreign_token_url"`
}

// SecretValue is a header's value: literal in the configuration, or read from the
// router's environment or from a file. In YAML a plain string is a literal; a mapping
// has exactly one of value, env, file.
type SecretValue struct {
	Value, Env, File string
}

// UnmarshalYAML reads a plain string or a {value|env|file: ...} mapping, naming the
// unknown key or the missing one.
func (s *SecretValue) UnmarshalYAML(n *yaml.Node) error {
	*s = SecretValue{}
	switch n.Kind {
	case yaml.ScalarNode:
		s.Value = n.Value
		if s.Value == "" || n.Tag == "!!null" {
			return fmt.Errorf("line %d: empty header value", n.Line)
		}
		return nil
	case yaml.MappingNode:
	default:
		return fmt.Errorf("line %d: a header value is a string or one of {value: ...}, {env: NAME}, {file: PATH}", n.Line)
	}
	set := 0
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode || v.Value == "" || v.Tag == "!!null" {
			return fmt.Errorf("line %d: %s: want a non-empty string", v.Line, k.Value)
		}
		switch k.Value {
		case "value":
			s.Value = v.Value
		case "env":
			s.Env = v.Value
		case "file":
			s.File = v.Value
		default:
			return fmt.Errorf("line %d: field %s not found in a header value (value, env or file)", k.Line, k.Value)
		}
		set++
	}
	if set != 1 {
		return fmt.Errorf("line %d: a header value has exactly one of value, env, file", n.Line)
	}
	return nil
}

// set reports whether any credential is configured.
func (a *BackendAuthConfig) set() bool {
	return len(a.Headers) > 0 || a.ownToken() != "" || a.TokenExchange != nil
}

// ownToken names the key of the router's own token for the backend ("" if none);
// ownTokens lists every one set (more than one is an error).
func (a *BackendAuthConfig) ownToken() string {
	if own := a.ownTokens(); len(own) > 0 {
		return own[0]
	}
	return ""
}

func (a *BackendAuthConfig) ownTokens() []string {
	var keys []string
	if a.BearerEnv != "" {
		keys = append(keys, "bearer_env")
	}
	if a.BearerFile != "" {
		keys = append(keys, "bearer_file")
	}
	if a.ClientCredentials != nil {
		keys = append(keys, "client_credentials")
	}
	return keys
}

// validateBackendAuth checks every backend's auth section (after Defaults).
func (c *Config) validateBackendAuth() error {
	for i := range c.Backends {
		if err := c.Backends[i].Auth.validate(fmt.Sprintf("backends[%d].auth", i), &c.Backends[i], c.Auth.Mode); err != nil {
			return err
		}
	}
	return nil
}

// validate checks one backend's auth section; mode is auth.mode (the clients').
func (a *BackendAuthConfig) validate(key string, b *BackendConfig, mode string) error {
	if !a.set() {
		return nil
	}
	if b.URL == "" && len(b.URLs) == 0 {
		return fmt.Errorf("%s: only HTTP backends (url, urls) take credentials: a command backend gets its secrets in env, a NATS backend is reached with the router's NATS connection", key)
	}
	for _, name := range slices.Sorted(maps.Keys(a.Headers)) {
		hk := key + ".headers." + name
		if _, err := upstream.StaticHeader(name, "x"); err != nil {
			return fmt.Errorf("%s: %v", hk, strings.TrimPrefix(err.Error(), "upstream: "))
		}
		if a.Headers[name] == (SecretValue{}) {
			return fmt.Errorf("%s: empty header value", hk)
		}
		if strings.EqualFold(name, upstream.AuthorizationHeader) && (a.ownToken() != "" || a.TokenExchange != nil) {
			return fmt.Errorf("%s: Authorization is set by %s already", hk, cmp.Or(a.ownToken(), "token_exchange"))
		}
	}
	if own := a.ownTokens(); len(own) > 1 {
		return fmt.Errorf("%s: %s and %s are both the router's token for the backend: keep one", key, own[0], own[1])
	}
	if a.ClientCredentials != nil {
		if err := a.ClientCredentials.validate(key + ".client_credentials"); err != nil {
			return err
		}
	}
	if x := a.TokenExchange; x != nil {
		xk := key + ".token_exchange"
		if mode != auth.ModeJWT {
			return fmt.Errorf("%s: needs auth.mode: jwt, not %q: the clients' tokens are sent to token_url, and only JWT access tokens from the issuer are meant to be (in mode bearer they are the router's own static secrets, in mode off there are none)", xk, cmp.Or(mode, auth.ModeOff))
		}
		if err := x.validate(xk); err != nil {
			return err
		}
		if _, err := subjectTokenType(x.SubjectTokenType); err != nil {
			return fmt.Errorf("%s.subject_token_type: %v", xk, err)
		}
		if x.CacheSize < 0 {
			return fmt.Errorf("%s.cache_size: must not be negative (got %d)", xk, x.CacheSize)
		}
		if b.Sessions != "per-client" {
			return fmt.Errorf("%s: needs sessions: per-client on the backend (each client's upstream session carries that client's own token)", xk)
		}
	}
	return nil
}

func (o *OAuthClientConfig) validate(key string) error {
	if o.TokenURL == "" {
		return fmt.Errorf("%s.token_url: required", key)
	}
	u, err := url.Parse(o.TokenURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s.token_url: %q is not an http or https URL", key, o.TokenURL)
	}
	if u.Scheme == "http" && !auth.IsLoopbackHost(u.Hostname()) {
		return fmt.Errorf("%s.token_url: %q must be https (http only on a loopback host: the client secret travels to it)", key, o.TokenURL)
	}
	if o.ClientID == "" {
		return fmt.Errorf("%s.client_id: required", key)
	}
	if (o.ClientSecretEnv == "") == (o.ClientSecretFile == "") {
		return fmt.Errorf("%s: exactly one of client_secret_env, client_secret_file must be set", key)
	}
	if _, err := authStyle(o.AuthMethod); err != nil {
		return fmt.Errorf("%s.auth_method: %v", key, err)
	}
	return nil
}

func authStyle(m string) (oauth2.AuthStyle, error) {
	switch m {
	case "", "client_secret_basic":
		return oauth2.AuthStyleInHeader, nil
	case "client_secret_post":
		return oauth2.AuthStyleInParams, nil
	}
	return 0, fmt.Errorf("%q is neither client_secret_basic nor client_secret_post", m)
}

func subjectTokenType(t string) (string, error) {
	switch t {
	case "", "access_token", upstream.TokenTypeAccessToken:
		return upstream.TokenTypeAccessToken, nil
	case "jwt", upstream.TokenTypeJWT:
		return upstream.TokenTypeJWT, nil
	}
	return "", fmt.Errorf("%q is neither access_token nor jwt", t)
}

// backendCreds are a backend's credentials, built at start: what every upstream
// session carries (headers), the router's own token, and the token exchange for the
// clients' own sessions.
type backendCreds struct {
	headers []upstream.Credential
	own     upstream.Credential // nil: none
	x       *upstream.TokenExchange
}

// forDial returns the credentials of the upstream session being dialed with ctx: a
// client's own (token exchange) when the fleet dials one for a client
// (upstream.WithClient), the router's own otherwise.
func (bc *backendCreds) forDial(ctx context.Context) []upstream.Credential {
	if bc == nil {
		return nil
	}
	creds := bc.headers[:len(bc.headers):len(bc.headers)]
	if p, ok := upstream.ClientFrom(ctx); ok && bc.x != nil {
		return append(creds, bc.x.For(p))
	}
	if bc.own != nil {
		return append(creds, bc.own)
	}
	return creds
}

// buildBackendAuth reads the secrets the (validated) auth section of backends[i] names
// and makes its credentials; nil when it has none. Errors name the key: a variable that
// is not set, a file that cannot be read. What the operator should know goes to log: a
// token exchange that sends the clients' tokens to another host than their issuer.
func buildBackendAuth(cfg *Config, i int, log *slog.Logger) (*backendCreds, error) {
	key := fmt.Sprintf("backends[%d].auth", i)
	a := &cfg.Backends[i].Auth
	if !a.set() {
		return nil, nil
	}
	bc := &backendCreds{}
	for _, name := range slices.Sorted(maps.Keys(a.Headers)) {
		hk := key + ".headers." + name
		v := a.Headers[name]
		var c upstream.Credential
		var err error
		switch {
		case v.File != "":
			c, err = upstream.FileHeader(name, v.File, "")
		case v.Env != "":
			var val string
			if val, err = env(v.Env); err == nil {
				c, err = upstream.StaticHeader(name, val)
			}
		default:
			c, err = upstream.StaticHeader(name, v.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", hk, err)
		}
		bc.headers = append(bc.headers, c)
	}
	var err error
	switch {
	case a.BearerEnv != "":
		var tok string
		if tok, err = env(a.BearerEnv); err == nil {
			bc.own, err = upstream.Bearer(tok)
		}
		if err != nil {
			return nil, fmt.Errorf("%s.bearer_env: %w", key, err)
		}
	case a.BearerFile != "":
		if bc.own, err = upstream.BearerFile(a.BearerFile); err != nil {
			return nil, fmt.Errorf("%s.bearer_file: %w", key, err)
		}
	case a.ClientCredentials != nil:
		ck := key + ".client_credentials"
		oc, err := a.ClientCredentials.client(ck, log)
		if err != nil {
			return nil, err
		}
		if bc.own, err = upstream.ClientCredentials(oc); err != nil {
			return nil, fmt.Errorf("%s: %w", ck, err)
		}
	}
	if x := a.TokenExchange; x != nil {
		xk := key + ".token_exchange"
		oc, err := x.client(xk, log)
		if err != nil {
			return nil, err
		}
		warnForeignTokenURL(xk, x, cfg.Auth.Issuer, log)
		stt, _ := subjectTokenType(x.SubjectTokenType)
		if bc.x, err = upstream.NewTokenExchange(oc, upstream.TokenExchangeOptions{SubjectTokenType: stt, CacheSize: x.CacheSize}); err != nil {
			return nil, fmt.Errorf("%s: %w", xk, err)
		}
	}
	return bc, nil
}

// warnForeignTokenURL warns when a token exchange sends the clients' tokens to another
// host than the one that issued them, unless allow_foreign_token_url says it is meant:
// a token issued for the router then reaches a third party, which can use it as the
// user until it expires.
func warnForeignTokenURL(key string, x *TokenExchangeConfig, issuer string, log *slog.Logger) {
	if x.AllowForeignTokenURL {
		return
	}
	tu, err1 := url.Parse(x.TokenURL)
	iu, err2 := url.Parse(issuer)
	if err1 != nil || err2 != nil || strings.EqualFold(tu.Hostname(), iu.Hostname()) {
		return
	}
	log.Warn(key+".token_url is not on auth.issuer's host: the clients' tokens are sent to another party; set "+key+".allow_foreign_token_url: true if that is meant",
		"token_url_host", tu.Hostname(), "issuer_host", iu.Hostname())
}

// client makes the upstream OAuth client, logging to log; the secret is checked now (a
// variable that is not set, a file that cannot be read fail the start, not the first
// request).
func (o *OAuthClientConfig) client(key string, log *slog.Logger) (upstream.OAuthClient, error) {
	style, _ := authStyle(o.AuthMethod)
	oc := upstream.OAuthClient{TokenURL: o.TokenURL, ClientID: o.ClientID, AuthStyle: style,
		Scopes: o.Scopes, Audience: o.Audience, Resource: o.Resource, Logger: log}
	if o.ClientSecretEnv != "" {
		secret, err := env(o.ClientSecretEnv)
		if err != nil {
			return oc, fmt.Errorf("%s.client_secret_env: %w", key, err)
		}
		oc.ClientSecret = func() (string, error) { return secret, nil }
	} else {
		path := o.ClientSecretFile
		oc.ClientSecret = func() (string, error) { return readSecretFile(path) }
		if _, err := oc.ClientSecret(); err != nil {
			return oc, fmt.Errorf("%s.client_secret_file: %w", key, err)
		}
	}
	return oc, nil
}

// env reads a secret from the router's environment.
func env(name string) (string, error) {
	v, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("%s is not set in the router's environment", name)
	}
	return strings.TrimSpace(v), nil
}

// maxSecretFile bounds a client secret file.
const maxSecretFile = 64 << 10

// readSecretFile reads a secret from a file, trimmed of surrounding white space.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", errors.New(path + " is empty")
	}
	return s, nil
}
