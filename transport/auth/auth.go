// Package auth authenticates MCP clients at the HTTP edge: an OAuth 2.1 resource server
// (RFC 9728 protected resource metadata, RFC 6750 bearer challenges, RFC 8707 audience)
// over static bearer tokens or JWT access tokens from an OpenID provider.
//
// It owns token validation, the metadata document and the challenge headers. It knows
// nothing of MCP methods or of fasthttp: the transport hands it the Authorization header
// and gets a Verdict back (a Principal, or the HTTP status and WWW-Authenticate value to
// answer with). Check is safe for concurrent use and runs on the connection's goroutine;
// key rotation (JWKS refresh) runs in the background.
package auth

import (
	"log/slog"
	"slices"
	"time"
)

// Modes of authentication.
const (
	ModeOff    = "off"
	ModeBearer = "bearer"
	ModeJWT    = "jwt"
)

// Config is the `auth:` section of mcprouter's configuration.
type Config struct {
	// Mode is off, bearer or jwt. Empty means off on a loopback listener; a non-loopback
	// listener refuses to start unless the mode is set (off must then be explicit).
	Mode string `yaml:"mode"`
	// Resource is the router's canonical URI (for example https://mcp.example.com/mcp):
	// the audience a JWT must carry (RFC 8707; a trailing slash is tolerated) and the
	// metadata document's resource.
	Resource string `yaml:"resource"`
	// Issuer is the OpenID issuer (jwt): its discovery document names the JWKS.
	Issuer string `yaml:"issuer"`
	// BearerTokens (bearer): the SHA-256 (hex) of each accepted token and its principal.
	BearerTokens []BearerToken `yaml:"bearer_tokens"`

	// RequiredScopes are scopes every request needs (403 insufficient_scope otherwise);
	// they are also the scope named in the challenge of a request without a token.
	RequiredScopes []string `yaml:"required_scopes"`
	// ScopesSupported is the metadata's scopes_supported; default RequiredScopes.
	ScopesSupported []string `yaml:"scopes_supported"`
	// AuthorizationServers is the metadata's authorization_servers; default [Issuer].
	AuthorizationServers []string `yaml:"authorization_servers"`
	// ClockSkew is the leeway on a JWT's exp, nbf and iat; default 60s.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// Audiences are accepted audiences besides Resource (jwt), for a router reached
	// under more than one name.
	Audiences []string `yaml:"audiences"`
	// JWKSURL overrides the jwks_uri of the issuer's discovery document (jwt).
	JWKSURL string `yaml:"jwks_url"`
	// Algorithms are the JWS algorithms accepted (jwt); default RS256, RS384, RS512,
	// ES256, ES384, ES512, PS256, PS384, PS512, EdDSA. none and HS* are never accepted:
	// a resource server holds no shared secret, and an HMAC "signed" with a public key
	// is the classic key-confusion forgery.
	Algorithms []string `yaml:"algorithms"`
	// ResourceMetadataURL overrides the URL named in challenges (resource_metadata);
	// default the path-inserted well-known URI derived from Resource (RFC 9728 3.1).
	ResourceMetadataURL string `yaml:"resource_metadata_url"`
	// ResourceName is the metadata's resource_name (human-readable); default "mcprouter".
	ResourceName string `yaml:"resource_name"`
}

// BearerToken is one static token: only its SHA-256 is stored.
type BearerToken struct {
	Principal string   `yaml:"principal"`
	SHA256    string   `yaml:"sha256"`
	Scopes    []string `yaml:"scopes"`
}

// Principal is who made a request: kept on the session (which it binds) and for policy.
// An Authenticator hands the same Principal to every request of one token: it is
// read-only.
type Principal struct {
	// Subject names the caller: the bearer token's principal, or the JWT's sub.
	Subject string
	// Issuer is the JWT's iss ("" for static tokens).
	Issuer string
	Scopes []string
	// Claims are the JWT's claims (nil for static tokens).
	Claims map[string]any
	// Expiry is when the token stops being valid (zero for static tokens).
	Expiry time.Time
	// Token is the access token as presented. It is never logged and never forwarded
	// to a backend: only an RFC 8693 token exchange sends it, to the authorization
	// server, to get the backend's own token for this principal. It is left out of the
	// Principal's JSON and of its log value, so that a Principal handed to a logger or
	// an encoder whole does not carry it there.
	Token string `json:"-"`
	// Endpoint names the virtual server whose Authenticator made the Principal ("" for
	// the router's main endpoint; Options.Endpoint). It is part of ID, so that a session
	// opened on one endpoint belongs to nobody on another, and the router picks the
	// endpoint's policy and selection by it.
	Endpoint string `json:",omitempty"`
}

// String names the principal without its token (safe for logs).
func (p *Principal) String() string {
	if p == nil {
		return "anonymous"
	}
	return p.ID()
}

// LogValue is how slog writes a Principal: its ID (or "anonymous"), never its token.
func (p *Principal) LogValue() slog.Value { return slog.StringValue(p.String()) }

// ID is the principal's stable identity, what a session is bound to: the issuer and the
// subject, joined by a space (static tokens have no issuer). The two forms never meet:
// an issuer is a URL without spaces, and a static principal's name has none
// (Config.Validate), so a static name cannot pass for a JWT user. A virtual server's
// principal has "@<endpoint> " in front, which neither form can start with.
func (p *Principal) ID() string {
	if p == nil {
		return ""
	}
	id := p.Subject
	if p.Issuer != "" {
		id = p.Issuer + " " + p.Subject
	}
	if p.Endpoint != "" {
		id = "@" + p.Endpoint + " " + id
	}
	return id
}

// SameID reports whether p and q have the same ID, without building either: what a
// session's owner check asks on every request. nil is the principal of no
// authentication, whose ID is "".
func (p *Principal) SameID(q *Principal) bool {
	var zp, zq Principal
	if p == nil {
		p = &zp
	}
	if q == nil {
		q = &zq
	}
	return p.Issuer == q.Issuer && p.Subject == q.Subject && p.Endpoint == q.Endpoint
}

// HasScope reports whether p was granted scope.
func (p *Principal) HasScope(scope string) bool {
	return p != nil && slices.Contains(p.Scopes, scope)
}
