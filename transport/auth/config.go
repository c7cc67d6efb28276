package auth

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults of the auth section.
const (
	DefaultClockSkew    = 60 * time.Second
	DefaultResourceName = "mcprouter"
	// maxClockSkew bounds clock_skew: a larger leeway keeps expired tokens alive.
	maxClockSkew = 10 * time.Minute
)

// DefaultAlgorithms are the JWS algorithms accepted when algorithms is not set: every
// asymmetric algorithm. none and HS* are not in it and cannot be added.
var DefaultAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
}

// Defaults fills the zero values of c with their defaults: clock_skew 60s, algorithms
// DefaultAlgorithms, authorization_servers [issuer], scopes_supported required_scopes,
// resource_name "mcprouter". Slices are copied, never shared with the defaults.
func (c *Config) Defaults() {
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(DefaultAlgorithms)
	}
	if len(c.AuthorizationServers) == 0 && c.Issuer != "" {
		c.AuthorizationServers = []string{c.Issuer}
	}
	if len(c.ScopesSupported) == 0 && len(c.RequiredScopes) > 0 {
		c.ScopesSupported = slices.Clone(c.RequiredScopes)
	}
	if c.ResourceName == "" {
		c.ResourceName = DefaultResourceName
	}
}

// Validate reports the first bad key of c, by its YAML name. loopbackListener says whether
// every listener of the router is on a loopback address: a listener reachable from outside
// must not run without authentication by omission, so an empty mode is then an error.
func (c *Config) Validate(loopbackListener bool) error {
	switch c.Mode {
	case ModeOff:
		return nil
	case "":
		if !loopbackListener {
			return errors.New("auth.mode: the router listens on a non-loopback address; set auth.mode to bearer or jwt, or to off to serve without authentication")
		}
		return nil
	case ModeBearer, ModeJWT:
	default:
		return fmt.Errorf("auth.mode: unknown mode %q (off, bearer or jwt)", c.Mode)
	}
	if c.Resource == "" {
		return errors.New("auth.resource: required: the router's canonical URI, the audience of its tokens (for example https://mcp.example.com/mcp)")
	}
	if err := checkURL(c.Resource, false); err != nil {
		return fmt.Errorf("auth.resource: %w", err)
	}
	if err := c.validateMode(); err != nil {
		return err
	}
	if err := checkScopes("auth.required_scopes", c.RequiredScopes); err != nil {
		return err
	}
	if err := checkScopes("auth.scopes_supported", c.ScopesSupported); err != nil {
		return err
	}
	for i, s := range c.AuthorizationServers {
		if err := checkURL(s, true); err != nil {
			return fmt.Errorf("auth.authorization_servers[%d]: %w", i, err)
		}
	}
	if c.ResourceMetadataURL != "" {
		if err := checkURL(c.ResourceMetadataURL, true); err != nil {
			return fmt.Errorf("auth.resource_metadata_url: %w", err)
		}
	}
	if strings.ContainsAny(c.ResourceName, "\"\\\x00") {
		return errors.New("auth.resource_name: must not contain quotes, backslashes or NUL")
	}
	return nil
}

// validateMode checks the keys of the bearer or jwt mode.
func (c *Config) validateMode() error {
	if c.Mode == ModeBearer {
		if len(c.BearerTokens) == 0 {
			return errors.New("auth.bearer_tokens: required in mode bearer: at least one {principal, sha256}")
		}
		seen := make(map[string]int, len(c.BearerTokens))
		for i, t := range c.BearerTokens {
			if strings.TrimSpace(t.Principal) == "" {
				return fmt.Errorf("auth.bearer_tokens[%d].principal: required", i)
			}
			if err := checkPrincipal(t.Principal); err != nil {
				return fmt.Errorf("auth.bearer_tokens[%d].principal: %w", i, err)
			}
			sum := strings.ToLower(t.SHA256)
			if b, err := hex.DecodeString(sum); err != nil || len(b) != 32 {
				return fmt.Errorf("auth.bearer_tokens[%d].sha256: want the SHA-256 of the token, 64 hex digits (sha256sum), got %d characters", i, len(t.SHA256))
			}
			if j, dup := seen[sum]; dup {
				return fmt.Errorf("auth.bearer_tokens[%d].sha256: the same token as auth.bearer_tokens[%d]", i, j)
			}
			seen[sum] = i
			if err := checkScopes(fmt.Sprintf("auth.bearer_tokens[%d].scopes", i), t.Scopes); err != nil {
				return err
			}
		}
		return nil
	}
	if len(c.BearerTokens) > 0 {
		return errors.New("auth.bearer_tokens: only in mode bearer")
	}
	if c.Issuer == "" {
		return errors.New("auth.issuer: required in mode jwt: the OpenID issuer URL (its discovery document names the keys)")
	}
	if err := checkURL(c.Issuer, true); err != nil {
		return fmt.Errorf("auth.issuer: %w", err)
	}
	if c.JWKSURL != "" {
		if err := checkURL(c.JWKSURL, true); err != nil {
			return fmt.Errorf("auth.jwks_url: %w", err)
		}
	}
	for i, a := range c.Audiences {
		if err := checkURL(a, false); err != nil {
			return fmt.Errorf("auth.audiences[%d]: %w", i, err)
		}
	}
	if c.ClockSkew < 0 || c.ClockSkew > maxClockSkew {
		return fmt.Errorf("auth.clock_skew: %v is outside 0..%v", c.ClockSkew, maxClockSkew)
	}
	for i, a := range c.Algorithms {
		if !slices.Contains(DefaultAlgorithms, a) {
			return fmt.Errorf("auth.algorithms[%d]: %q is not accepted (one of %s; none and HS* never: a resource server holds no shared secret)", i, a, strings.Join(DefaultAlgorithms, ", "))
		}
	}
	return nil
}

// checkURL accepts an absolute http(s) URL without fragment, user info or characters that
// would break a quoted header parameter. fetched URLs (issuer, JWKS) must be https unless
// their host is a loopback address: keys fetched in clear could be anyone's.
func checkURL(s string, fetched bool) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an absolute http or https URL", s)
	case u.Host == "":
		return fmt.Errorf("%q: no host", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("%q: must not have a fragment", s)
	case u.User != nil:
		return fmt.Errorf("%q: must not carry user info", s)
	case strings.ContainsAny(s, "\"\\ \t\r\n"):
		return fmt.Errorf("%q: must not contain quotes, backslashes or spaces", s)
	case fetched && u.Scheme == "http" && !IsLoopbackHost(u.Hostname()):
		return fmt.Errorf("%q: must be https (http only on a loopback host)", s)
	}
	return nil
}

// IsLoopbackHost reports whether h (a URL's host, without port) names the local
// machine: the one place plain http is accepted for an issuer or a token endpoint.
func IsLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// checkPrincipal accepts a static principal's name: printable, without white space.
// A JWT principal's ID is "issuer subject", joined by a space (Principal.ID), and an
// issuer has no space (checkURL): a static name without one can never be a JWT user's
// ID, which would give it that user's sessions and state. Control and format characters
// would forge log lines or names that look alike.
func checkPrincipal(name string) error {
	if !utf8.ValidString(name) {
		return errors.New("not valid UTF-8")
	}
	for i, r := range name {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%q has a space or a control character at byte %d: a principal is one word (with a space it could be read as a JWT user's issuer and subject)", name, i)
		}
	}
	return nil
}

// checkScopes accepts scope tokens as RFC 6749 3.3 defines them (printable ASCII
// without space, quote or backslash), so they can be joined and quoted in a challenge.
func checkScopes(key string, scopes []string) error {
	for i, s := range scopes {
		if s == "" {
			return fmt.Errorf("%s[%d]: empty scope", key, i)
		}
		for j := 0; j < len(s); j++ {
			if c := s[j]; c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				return fmt.Errorf("%s[%d]: %q: a scope is printable ASCII without spaces, quotes or backslashes", key, i, s)
			}
		}
	}
	return nil
}
