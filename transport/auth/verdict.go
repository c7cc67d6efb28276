package auth

// Reason says why a request was accepted or refused: the label of the outcome metrics
// and of the audit log line. Its values are stable (dashboards and alerts use them).
type Reason string

// Reasons.
const (
	ReasonOK                Reason = "ok"
	ReasonMissing           Reason = "missing"            // no Authorization header
	ReasonMalformed         Reason = "malformed"          // not "Bearer <token>", or not a JWT
	ReasonUnknownToken      Reason = "unknown_token"      // a static token nobody holds
	ReasonBadSignature      Reason = "bad_signature"      // signature does not verify, or unknown key
	ReasonUnsigned          Reason = "unsigned"           // alg none
	ReasonBadAlgorithm      Reason = "bad_algorithm"      // an algorithm not in the allowed list (HS*...)
	ReasonExpired           Reason = "expired"            // exp in the past (beyond the skew)
	ReasonNotYetValid       Reason = "not_yet_valid"      // nbf or iat in the future (beyond the skew)
	ReasonWrongIssuer       Reason = "wrong_issuer"       // iss is not the configured issuer
	ReasonWrongAudience     Reason = "wrong_audience"     // aud does not name this resource
	ReasonBadClaims         Reason = "bad_claims"         // missing sub or exp, or claims of the wrong type
	ReasonInsufficientScope Reason = "insufficient_scope" // a required scope is missing
	ReasonTokenInQuery      Reason = "token_in_query"     // access_token in the URL query
	ReasonKeysUnavailable   Reason = "keys_unavailable"   // the JWKS could not be fetched
)

// Reasons lists every Reason, in a stable order, for metrics that pre-declare their labels.
var Reasons = []Reason{
	ReasonOK, ReasonMissing, ReasonMalformed, ReasonUnknownToken, ReasonBadSignature,
	ReasonUnsigned, ReasonBadAlgorithm, ReasonExpired, ReasonNotYetValid, ReasonWrongIssuer,
	ReasonWrongAudience, ReasonBadClaims, ReasonInsufficientScope, ReasonTokenInQuery,
	ReasonKeysUnavailable,
}

// Verdict is the outcome of Check or RequireScopes.
type Verdict struct {
	// Principal is who is calling (set when Status is 0).
	Principal *Principal
	// Status is 0 when the request may proceed, else the HTTP status to answer with
	// (400, 401 or 403; 503 when the keys are unavailable).
	Status int
	// Reason says why (ReasonOK when Status is 0).
	Reason Reason
	// Challenge is the full WWW-Authenticate value to send with Status ("" when ok).
	Challenge string
	// Description is the human-readable error_description (also in Challenge).
	Description string
}

// OK reports whether the request may proceed.
func (v Verdict) OK() bool { return v.Status == 0 }
