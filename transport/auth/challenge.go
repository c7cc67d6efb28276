package auth

import (
	"net/http"
	"slices"
	"strings"
)

// descriptions are the error_description of each refusal: RFC 6749 restricts them to
// printable ASCII without quote or backslash, and they name no secret.
var descriptions = map[Reason]string{
	ReasonMissing:         "an access token is required (Authorization: Bearer)",
	ReasonMalformed:       "the Authorization header is not Bearer followed by one token",
	ReasonUnknownToken:    "the access token is not known",
	ReasonBadSignature:    "the access token signature does not verify with the issuer's keys",
	ReasonUnsigned:        "unsigned access tokens (alg none) are not accepted",
	ReasonBadAlgorithm:    "the access token signing algorithm is not accepted",
	ReasonExpired:         "the access token expired",
	ReasonNotYetValid:     "the access token is not valid yet",
	ReasonWrongIssuer:     "the access token was issued by another issuer",
	ReasonWrongAudience:   "the access token was issued for another resource",
	ReasonBadClaims:       "the access token lacks a valid sub or exp claim",
	ReasonTokenInQuery:    "access tokens are not accepted in the URL query; send them in the Authorization header",
	ReasonKeysUnavailable: "the issuer's signing keys are unavailable; retry later",
}

// malformedToken is the description of a Bearer token that is not a JWT (mode jwt).
const malformedToken = "the access token is not a JWT"

// challenges builds the refusals of one Authenticator: every one but insufficient_scope
// is fixed by the configuration, so they are built once.
type challenges struct {
	metadataURL string
	required    []string
	fixed       map[Reason]Verdict
}

func newChallenges(metadataURL string, required []string) *challenges {
	c := &challenges{metadataURL: metadataURL, required: required, fixed: make(map[Reason]Verdict)}
	// No token, or another scheme: RFC 6750 3.1, no error code, just how to get one.
	for _, r := range []Reason{ReasonMissing, ReasonMalformed} {
		c.fixed[r] = Verdict{Status: http.StatusUnauthorized, Reason: r, Description: descriptions[ReasonMissing],
			Challenge: c.build(required, "", "")}
	}
	for _, r := range []Reason{ReasonUnknownToken, ReasonBadSignature, ReasonUnsigned, ReasonBadAlgorithm,
		ReasonExpired, ReasonNotYetValid, ReasonWrongIssuer, ReasonWrongAudience, ReasonBadClaims} {
		c.fixed[r] = c.invalidToken(r, descriptions[r])
	}
	c.fixed[ReasonTokenInQuery] = Verdict{Status: http.StatusBadRequest, Reason: ReasonTokenInQuery,
		Description: descriptions[ReasonTokenInQuery],
		Challenge:   c.build(nil, "invalid_request", descriptions[ReasonTokenInQuery])}
	// A keys outage is the server's trouble, not the token's: 503 makes the client retry
	// rather than run an authorization flow that cannot help.
	c.fixed[ReasonKeysUnavailable] = Verdict{Status: http.StatusServiceUnavailable, Reason: ReasonKeysUnavailable,
		Description: descriptions[ReasonKeysUnavailable]}
	return c
}

func (c *challenges) invalidToken(r Reason, desc string) Verdict {
	return Verdict{Status: http.StatusUnauthorized, Reason: r, Description: desc,
		Challenge: c.build(c.required, "invalid_token", desc)}
}

// malformedHeader is a Bearer header without one token (RFC 6750 3.1 invalid_request).
func (c *challenges) malformedHeader() Verdict {
	d := descriptions[ReasonMalformed]
	return Verdict{Status: http.StatusBadRequest, Reason: ReasonMalformed, Description: d,
		Challenge: c.build(nil, "invalid_request", d)}
}

// insufficientScope names every scope the operation needs (the required ones first),
// so that one new authorization is enough; the description names those missing.
func (c *challenges) insufficientScope(p *Principal, need []string) Verdict {
	all := union(c.required, need)
	var missing []string
	for _, s := range all {
		if !p.HasScope(s) {
			missing = append(missing, s)
		}
	}
	d := "the access token lacks the scope " + strings.Join(missing, " ")
	return Verdict{Principal: p, Status: http.StatusForbidden, Reason: ReasonInsufficientScope, Description: d,
		Challenge: c.build(all, "insufficient_scope", d)}
}

// build writes a Bearer challenge (RFC 6750 3, RFC 9728 5.1). Its values are checked by
// Validate or written here, so none holds a quote or backslash.
func (c *challenges) build(scopes []string, code, desc string) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata="`)
	b.WriteString(c.metadataURL)
	b.WriteByte('"')
	if len(scopes) > 0 {
		b.WriteString(`, scope="`)
		b.WriteString(strings.Join(scopes, " "))
		b.WriteByte('"')
	}
	if code != "" {
		b.WriteString(`, error="`)
		b.WriteString(code)
		b.WriteByte('"')
	}
	if desc != "" {
		b.WriteString(`, error_description="`)
		b.WriteString(desc)
		b.WriteByte('"')
	}
	return b.String()
}

// union is a then the elements of b not in a.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
