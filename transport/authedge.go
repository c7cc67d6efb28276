package transport

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// The authentication edge: every request to an MCP endpoint (Streamable HTTP POST, GET
// and DELETE, legacy GET and POST) is authenticated after the Host and Origin checks
// and before anything else of it is read or anything is created for it. The principal
// it yields travels with each message (Exchange.Principal) and owns the sessions it
// opens; a session presented by anyone else does not exist for them (404).
//
// With authentication off (HTTPConfig.Auth nil or disabled) the edge is one nil check.

// authorize authenticates ctx's request: its principal (nil with authentication off),
// or ok false when it was refused and answered here with the verdict's status and
// challenge.
func (s *HTTPServer) authorize(ctx *fasthttp.RequestCtx) (p *auth.Principal, ok bool) {
	if s.auth == nil {
		return nil, true
	}
	v := s.auth.Check(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization), ctx.QueryArgs().Has("access_token"))
	if v.Status == 0 {
		return v.Principal, true
	}
	s.refuseAuth(ctx, v)
	return nil, false
}

// refuseAuth answers a request whose credentials were refused: the verdict's status
// (401, 403, 400, or 503 when the keys are unavailable), its WWW-Authenticate challenge,
// and a JSON-RPC error (id null) that says why, for clients that show the body. It
// writes the audit line.
func (s *HTTPServer) refuseAuth(ctx *fasthttp.RequestCtx, v auth.Verdict) {
	if v.Challenge != "" {
		ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, v.Challenge)
	}
	if v.Status == fasthttp.StatusServiceUnavailable {
		// The issuer's keys could not be fetched: the token may be fine, later.
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "5")
	}
	msg := strings.ToLower(fasthttp.StatusMessage(v.Status)) // "unauthorized", "forbidden"...
	if v.Description != "" {
		msg += ": " + v.Description
	}
	data := append(codec.AppendString([]byte(`{"reason":`), string(v.Reason)), '}')
	s.rpcError(ctx, v.Status, codec.CodeInvalidRequest, msg, data)
	s.audit(ctx, v.Principal, string(v.Reason))
}

// refuseForeignSession answers a request that names a session of another principal
// exactly as for a session that does not exist (404 and notFound, the endpoint's
// message for one): it must not learn that the id is in use. It writes the audit line.
func (s *HTTPServer) refuseForeignSession(ctx *fasthttp.RequestCtx, p *auth.Principal, notFound string) {
	s.Stats.ForeignSessions.Add(1)
	s.rpcError(ctx, fasthttp.StatusNotFound, codec.CodeInvalidRequest, notFound, nil)
	s.audit(ctx, p, ReasonForeignSession)
}

// ReasonForeignSession is the audit reason of a request refused because its session
// belongs to another principal.
const ReasonForeignSession = "foreign_session"

// Messages of a 404 for an unknown session, on each endpoint; a session of another
// principal gets the same.
const (
	msgSessionNotFound       = "session not found: it ended or never existed; initialize a new one"
	msgLegacySessionNotFound = "session not found"
)

// audit writes the one structured line of a refused request: who ("anonymous" without
// valid credentials), why, from where, and what it asked for (method and path: never
// the query, which may carry a token, nor any header). The logger is rate-limited
// (HTTPConfig.Audit), so that a flood of refused requests cannot flood the log.
func (s *HTTPServer) audit(ctx *fasthttp.RequestCtx, p *auth.Principal, reason string) {
	if s.cfg.Audit == nil {
		return
	}
	s.cfg.Audit.Warn("request refused",
		"principal", p.String(),
		"reason", reason,
		"status", ctx.Response.StatusCode(),
		"remote", ctx.RemoteAddr().String(),
		"method", string(ctx.Method()),
		"path", string(ctx.Path()))
}

// ServeMetadata serves the protected resource metadata document (RFC 9728) of the
// HTTPServer's authentication at whatever path the caller routes to it (see
// MetadataPaths): unauthenticated, readable from any web origin (a browser client
// discovers its authorization server with it before it has a token), for GET, HEAD and
// the CORS preflight.
func (s *HTTPServer) ServeMetadata(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.Set(fasthttp.HeaderAccessControlAllowOrigin, "*")
	switch string(ctx.Method()) {
	case fasthttp.MethodGet, fasthttp.MethodHead:
		ctx.SetContentType("application/json")
		h.Set(fasthttp.HeaderCacheControl, "max-age=300")
		ctx.SetBody(s.auth.Metadata())
	case fasthttp.MethodOptions:
		h.Set(fasthttp.HeaderAccessControlAllowMethods, "GET, HEAD, OPTIONS")
		h.Set(fasthttp.HeaderAccessControlAllowHeaders, "*")
		h.Set(fasthttp.HeaderAccessControlMaxAge, "86400")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		h.Set(fasthttp.HeaderAllow, "GET, HEAD, OPTIONS")
		s.httpError(ctx, fasthttp.StatusMethodNotAllowed, "method not allowed: the metadata document is read with GET")
	}
}

// MetadataPaths are the paths ServeMetadata must be routed from for the MCP endpoints at
// mcpPaths: none with authentication off.
func (s *HTTPServer) MetadataPaths(mcpPaths ...string) []string {
	if s.auth == nil {
		return nil
	}
	return s.auth.MetadataPaths(mcpPaths...)
}

// tokenBound caps the life of a stream at the expiry of the token that opened it: a
// stream must not keep delivering a session's messages after its authorization ended.
// The client reconnects (and resumes, where the revision allows) with a fresh token; a
// legacy session, whose stream is its life, ends with it.
func tokenBound(opts *sse.PumpOptions, p *auth.Principal) {
	if p == nil || p.Expiry.IsZero() {
		return
	}
	d := time.Until(p.Expiry)
	if d <= 0 {
		d = time.Millisecond
	}
	if opts.MaxDuration == 0 || d < opts.MaxDuration {
		opts.MaxDuration = d
	}
}

// refusedWhole sets the status of a POST whose one message the handler refused whole
// (Exchange.SetStatus): with 429, Retry-After in whole seconds, rounded up, from the
// JSON-RPC error's data.retryAfterMs (RFC 9110 10.2.3), so that HTTP-level clients and
// proxies back off as the JSON-RPC error says.
func refusedWhole(ctx *fasthttp.RequestCtx, status int) {
	ctx.SetStatusCode(status)
	if status != fasthttp.StatusTooManyRequests {
		return
	}
	var m codec.Message
	if codec.Scan(ctx.Response.Body(), &m) != nil || m.Kind != codec.KindError {
		return
	}
	ms, err := strconv.ParseInt(string(codec.Member(codec.Member(m.Error, "data"), "retryAfterMs")), 10, 64)
	if err != nil || ms < 0 {
		return
	}
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.FormatInt((ms+999)/1000, 10))
}
