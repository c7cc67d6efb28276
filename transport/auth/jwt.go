package auth

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	// The JOSE parts of a token are read with go-jose's JSON, not encoding/json: member
	// names match exactly and a member twice is an error. encoding/json matches names
	// without regard to case and keeps the last of two copies, so a claim a user may
	// name or fill ("Sub", "AUD", a second "sub") would stand in for the registered one.
	json "github.com/go-jose/go-jose/v4/json"
	"github.com/go-jose/go-jose/v4/jwt"
)

// maxTokenBytes bounds the tokens parsed: a JWT access token is a few kilobytes at most.
const maxTokenBytes = 16 << 10

// jwtVerifier checks JWT access tokens: signature by a key of the issuer's JWKS with an
// allowed algorithm, then iss, aud, exp, nbf, iat, sub, and the scopes.
type jwtVerifier struct {
	issuer    string
	audiences map[string]bool // canonical forms (canonicalURI)
	skew      time.Duration
	algs      []jose.SignatureAlgorithm
	keys      *keyring
	cache     *tokenCache
	now       func() time.Time
	endpoint  string // Principal.Endpoint
}

// cached returns the Principal of a token verified recently, or nil.
func (v *jwtVerifier) cached(token []byte) *Principal {
	return v.cache.get(token, v.now())
}

// verify verifies a token (not found in the cache) and returns its Principal, or the
// reason it is refused.
func (v *jwtVerifier) verify(token []byte) (*Principal, Reason) {
	now := v.now()
	gen := v.cache.generation() // before the key lookup: see tokenCache
	if len(token) > maxTokenBytes || bytes.Count(token, []byte{'.'}) != 2 {
		return nil, ReasonMalformed
	}
	hdr, ok := peekHeader(token)
	if !ok {
		return nil, ReasonMalformed
	}
	if strings.EqualFold(hdr.Alg, "none") {
		return nil, ReasonUnsigned
	}
	if !v.allowed(hdr.Alg) {
		return nil, ReasonBadAlgorithm
	}
	jws, err := jose.ParseSignedCompact(string(token), v.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, ReasonMalformed
	}
	// The key is looked up by the header the signature is verified under.
	signed := jws.Signatures[0].Protected
	keys, err := v.keys.lookup(signed.KeyID, signed.Algorithm)
	if err != nil {
		return nil, ReasonKeysUnavailable
	}
	var payload []byte
	for i := range keys {
		if payload, err = jws.Verify(&keys[i]); err == nil {
			break
		}
	}
	if payload == nil {
		return nil, ReasonBadSignature
	}
	return v.claims(token, payload, now, gen)
}

// claims checks the registered claims of a verified payload, in the order that tells a
// client the most useful reason first.
func (v *jwtVerifier) claims(token, payload []byte, now time.Time, gen uint64) (*Principal, Reason) {
	var reg struct {
		jwt.Claims
		Scope *string         `json:"scope"`
		SCP   json.RawMessage `json:"scp"`
	}
	var all map[string]any
	if json.Unmarshal(payload, &reg) != nil || json.Unmarshal(payload, &all) != nil {
		return nil, ReasonBadClaims
	}
	if reg.Issuer != v.issuer {
		return nil, ReasonWrongIssuer
	}
	if reg.Expiry == nil || reg.Subject == "" {
		return nil, ReasonBadClaims
	}
	exp := reg.Expiry.Time()
	if !now.Before(exp.Add(v.skew)) {
		return nil, ReasonExpired
	}
	if reg.NotBefore != nil && now.Add(v.skew).Before(reg.NotBefore.Time()) {
		return nil, ReasonNotYetValid
	}
	if reg.IssuedAt != nil && now.Add(v.skew).Before(reg.IssuedAt.Time()) {
		return nil, ReasonNotYetValid
	}
	if !v.forUs(reg.Audience) {
		return nil, ReasonWrongAudience
	}
	scopes, ok := parseScopes(reg.Scope, reg.SCP)
	if !ok {
		return nil, ReasonBadClaims
	}
	p := &Principal{
		Subject:  reg.Subject,
		Issuer:   reg.Issuer,
		Scopes:   scopes,
		Claims:   all,
		Expiry:   exp,
		Token:    string(token),
		Endpoint: v.endpoint,
	}
	until := exp.Add(v.skew)
	if limit := now.Add(maxCacheAge); limit.Before(until) {
		until = limit
	}
	v.cache.put(p, until, gen)
	return p, ReasonOK
}

func (v *jwtVerifier) allowed(alg string) bool {
	for _, a := range v.algs {
		if string(a) == alg {
			return true
		}
	}
	return false
}

// forUs reports whether aud names this resource (RFC 8707), comparing canonical forms:
// scheme and host case-insensitive, a trailing slash ignored.
func (v *jwtVerifier) forUs(aud jwt.Audience) bool {
	for _, a := range aud {
		if v.audiences[canonicalURI(a)] {
			return true
		}
	}
	return false
}

// canonicalURI is u with its scheme and host lowercased and trailing slashes dropped:
// the form resources are compared in (the MCP authorization spec asks servers to accept
// uppercase scheme and host, and RFC 8707 resources are written without a slash).
func canonicalURI(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme == "" || pu.Host == "" {
		return strings.TrimRight(u, "/")
	}
	pu.Scheme = strings.ToLower(pu.Scheme)
	pu.Host = strings.ToLower(pu.Host)
	pu.Path = strings.TrimRight(pu.Path, "/")
	pu.RawPath = strings.TrimRight(pu.RawPath, "/")
	return pu.String()
}

// parseScopes reads scope (a space-separated string, RFC 8693 and RFC 9068) or scp (an
// array of strings, or a space-separated string as some providers write it).
func parseScopes(scope *string, scp json.RawMessage) ([]string, bool) {
	if scope != nil {
		return strings.Fields(*scope), true
	}
	if len(scp) == 0 || string(scp) == "null" {
		return nil, true
	}
	var list []string
	if err := json.Unmarshal(scp, &list); err == nil {
		return list, true
	}
	var s string
	if err := json.Unmarshal(scp, &s); err == nil {
		return strings.Fields(s), true
	}
	return nil, false
}

// jwsHeader is the part of a JWS header read before verification, to classify the
// refusal (alg none, a disallowed algorithm) and find the key.
type jwsHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

func peekHeader(token []byte) (jwsHeader, bool) {
	var h jwsHeader
	i := bytes.IndexByte(token, '.')
	if i <= 0 {
		return h, false
	}
	raw := make([]byte, base64.RawURLEncoding.DecodedLen(i))
	n, err := base64.RawURLEncoding.Decode(raw, token[:i])
	if err != nil {
		return h, false
	}
	if json.Unmarshal(raw[:n], &h) != nil || h.Alg == "" {
		return h, false
	}
	return h, true
}
