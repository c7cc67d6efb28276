package transport

import (
	"bufio"
	"cmp"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/budget"
	"github.com/mcprouter/mcprouter/transport/closewatch"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Header names of the Streamable HTTP transport.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderLastEventID     = "Last-Event-ID"
)

// SessionlessPolicy is implemented by handlers that accept some messages without a
// session (initialize; stateless requests of later revisions). Without it, only messages
// that carry Mcp-Session-Id are accepted on an established session.
type SessionlessPolicy interface {
	AcceptSessionless(m *codec.Message, version string) bool
}

// HTTPConfig configures the HTTP endpoints. Zero values take the defaults.
type HTTPConfig struct {
	Rules HTTPRules
	// MaxBatch caps the elements of a JSON-RPC batch (-32600 beyond). Default 256.
	MaxBatch int
	// BatchMaxVersion is the newest revision whose sessions may send batches
	// (2025-03-26: batches were removed in 2025-06-18).
	BatchMaxVersion string
	// PrimingMinVersion is the first revision whose SSE streams start with a priming
	// event and a retry hint (2025-11-25).
	PrimingMinVersion string
	// Stream bounds each SSE stream: ring and outbound queue sizes.
	Stream sse.StreamConfig
	// KeepAlive is the interval of SSE keep-alive comments. Default 15s.
	KeepAlive time.Duration
	// RetryMs is the retry hint sent on primed streams and at shutdown. Default 1000.
	RetryMs int
	// ReplyTimeout bounds how long a POST waits for its replies before it gives up with an
	// error; the router's own per-request timeouts normally answer first. Default 10m.
	ReplyTimeout time.Duration
	// MaxPostStreams bounds the finished POST reply streams a session keeps for
	// resumption. Default 8. Together with the session's other streams they also stay
	// within the session's share of the memory budget (RegistryConfig.Budget), the
	// oldest finished stream forgotten first.
	MaxPostStreams int
	// InitRate and InitBurst bound the requests without a session (initialize) and
	// legacy stream openings one client address may make: a token bucket of InitBurst
	// tokens refilled at InitRate per second. Past it: 429 with Retry-After. Defaults
	// 100/s and 200; a negative InitRate disables the limit.
	InitRate  float64
	InitBurst int
	// LegacyEndpoint is the POST path announced to legacy HTTP+SSE clients. Default /message.
	LegacyEndpoint string
	// Resolver, when set, is asked about session ids this process does not know: a
	// session that another router instance held (it died), whose state lives in a shared
	// store. Nil: unknown ids get 404.
	Resolver SessionResolver
	// Events, when set, keeps each session's GET stream events outside the process, so
	// that a session resumed on another instance replays what its client missed.
	Events EventLog
	// Auth authenticates every request to the MCP endpoints (authedge.go); nil, or an
	// Authenticator that is not Enabled, lets every request through as anonymous.
	Auth *auth.Authenticator
	// Audit receives one line per refused request (bad credentials, a session of
	// another principal); it should be rate-limited (transport/logsafe). Nil: none.
	Audit *slog.Logger
	// StatelessStreamAfter turns the reply to a stateless request into an SSE stream
	// when it has not come after this long and the client takes streams, so that the
	// client's closing the connection cancels it at once (stateless.go). Default 1s;
	// negative: never.
	StatelessStreamAfter time.Duration
	// StatusOf, when set, gives the HTTP status of a stateless request's JSON reply
	// (stateless.go): a revision without sessions says some errors with a status too
	// (400, 404). 0 keeps 200.
	StatusOf func(reply []byte) int
	// TraceHeaders: while it holds true, keep each POST's W3C trace context headers
	// for the handler (Exchange.TraceHeaders, trace.go); nil (the default) or false,
	// they are not looked at. A switch, so that a reload turning tracing on or off
	// reaches every server that shares it.
	TraceHeaders *atomic.Bool
	// KeepsHijackedConns says that the fasthttp.Server serving these endpoints has
	// KeepHijackedConns set: a GET stream then owns its connection, and holds no
	// goroutine or request context while it is idle (hijackStream). Without it each
	// GET stream keeps its handler's goroutine until it ends.
	KeepsHijackedConns bool

	// notices encodes a change notice once for all the sessions it goes to in turn:
	// their GET streams keep references to one encoding (set by defaults).
	notices *sse.SharedCache
}

// SessionResolver finds sessions this process does not hold.
type SessionResolver interface {
	// ResolveSession returns the revision and handler state of a session known to the
	// cluster for principal p (nil without authentication); ErrNoSession when there is
	// no such session, ErrForeignSession when it belongs to another principal (nothing
	// is built for a request that may not have the session).
	ResolveSession(id string, p *auth.Principal) (version string, state SessionState, err error)
	// SessionAdopted tells the handler that the session now lives here: it may send
	// what the client may have missed (fresh change notices).
	SessionAdopted(s *Session)
}

// LoggedEvent is one event of a session's GET stream kept in an EventLog.
type LoggedEvent struct {
	Seq  uint64
	Data []byte
}

// EventLog keeps the recent events of sessions' GET streams outside the process.
type EventLog interface {
	// Append records one event (asynchronously; it must not block).
	Append(sessionID string, seq uint64, data []byte)
	// Since returns the kept events of a session, oldest first.
	Since(sessionID string) ([]LoggedEvent, error)
	// Forget drops the kept events of a session that ended (synchronously: call it
	// off the hot path).
	Forget(sessionID string)
}

// Defaults of HTTPConfig.
const (
	DefaultMaxPostStreams = 8
	DefaultInitRate       = 100
	DefaultInitBurst      = 200
)

func (c *HTTPConfig) defaults() {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.BatchMaxVersion == "" {
		c.BatchMaxVersion = "2025-03-26"
	}
	if c.PrimingMinVersion == "" {
		c.PrimingMinVersion = "2025-11-25"
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.RetryMs <= 0 {
		c.RetryMs = 1000
	}
	if c.ReplyTimeout <= 0 {
		c.ReplyTimeout = 10 * time.Minute
	}
	if c.MaxPostStreams <= 0 {
		c.MaxPostStreams = DefaultMaxPostStreams
	}
	if c.InitRate == 0 {
		c.InitRate = DefaultInitRate
	}
	if c.InitBurst <= 0 {
		c.InitBurst = DefaultInitBurst
	}
	if c.LegacyEndpoint == "" {
		c.LegacyEndpoint = "/message"
	}
	if c.StatelessStreamAfter == 0 {
		c.StatelessStreamAfter = time.Second
	}
	if c.notices == nil {
		c.notices = new(sse.SharedCache)
	}
}

// HTTPStats are the HTTP endpoints' counters.
type HTTPStats struct {
	Requests      atomic.Uint64
	Rejected      atomic.Uint64 // answered with a 4xx before reaching the handler
	OpenStreams   atomic.Int64
	SlowConsumers atomic.Uint64
	Resumes       atomic.Uint64
	// Adopted counts sessions taken over from another router instance.
	Adopted atomic.Uint64
	// AdoptionWaits counts requests that waited for another request's adoption of the
	// same session instead of adopting it a second time.
	AdoptionWaits atomic.Uint64
	// ResumeGone counts GET resumptions that could not replay from the client's id.
	ResumeGone atomic.Uint64
	// RateLimited counts requests refused by the per-address initialize rate limit.
	RateLimited atomic.Uint64
	// ParseErrors and InvalidRequests count messages (batch elements included) that the
	// codec rejected, by JSON-RPC class: -32700 and -32600 (see codecError).
	ParseErrors     atomic.Uint64
	InvalidRequests atomic.Uint64
	// ForeignSessions counts requests refused (as for an unknown session) because
	// their session belongs to another principal.
	ForeignSessions atomic.Uint64
}

// HTTPServer serves the Streamable HTTP endpoint and the legacy HTTP+SSE endpoints of one
// Registry on fasthttp.
type HTTPServer struct {
	cfg     HTTPConfig
	reg     *Registry
	auth    *auth.Authenticator // nil: authentication off
	handler Handler
	policy  SessionlessPolicy
	// stateless and screen are the handler's, when it serves stateless requests.
	stateless StatelessPolicy
	screen    StatelessScreen
	closing   chan struct{}
	stopOnce  sync.Once
	inits     *rateLimiter
	adopting  adoptions
	ended     endedHere // sessions ended here by DELETE: never adopted back
	// watcher notices the client's close of held streams' connections (the process's
	// closewatch.Default); nil where there is none (not Linux).
	watcher *closewatch.Watcher
	callers callerWatches // stateless requests worked on their goroutines (stateless_inline.go)
	Stats   HTTPStats
}

// NewHTTPServer returns the HTTP endpoints serving sessions of reg, handing messages to h.
func NewHTTPServer(cfg HTTPConfig, reg *Registry, h Handler) *HTTPServer {
	cfg.defaults()
	s := &HTTPServer{cfg: cfg, reg: reg, handler: h, closing: make(chan struct{}),
		inits: newRateLimiter(cfg.InitRate, cfg.InitBurst)}
	s.policy, _ = h.(SessionlessPolicy)
	s.stateless, _ = h.(StatelessPolicy)
	s.screen, _ = h.(StatelessScreen)
	s.watcher, _ = closewatch.Default()
	if cfg.Auth.Enabled() {
		s.auth = cfg.Auth
	}
	return s
}

// Shutdown ends every session's streams with a retry hint, so clients reconnect to
// another instance (or this one after a restart); streams opened afterwards are refused
// with 503.
func (s *HTTPServer) Shutdown() {
	s.stopOnce.Do(func() { close(s.closing) })
	s.reg.CloseAll(s.cfg.RetryMs)
}

// shuttingDown answers 503 once Shutdown has begun, and reports whether it did.
func (s *HTTPServer) shuttingDown(ctx *fasthttp.RequestCtx) bool {
	select {
	case <-s.closing:
		ctx.Response.Header.Set("Retry-After", "1")
		s.rpcError(ctx, fasthttp.StatusServiceUnavailable, codec.CodeInternalError, "server shutting down: retry later", nil)
		return true
	default:
		return false
	}
}

// ServeStreamable is the fasthttp handler of the Streamable HTTP endpoint (/mcp).
func (s *HTTPServer) ServeStreamable(ctx *fasthttp.RequestCtx) {
	s.Stats.Requests.Add(1)
	if !s.checkOrigin(ctx) {
		return
	}
	switch string(ctx.Method()) {
	case fasthttp.MethodPost:
		if p, ok := s.authorize(ctx); ok {
			s.post(ctx, p)
		}
	case fasthttp.MethodGet:
		if p, ok := s.authorize(ctx); ok && !s.statelessRefused(ctx) {
			s.get(ctx, p)
		}
	case fasthttp.MethodDelete:
		if p, ok := s.authorize(ctx); ok && !s.statelessRefused(ctx) {
			s.delete(ctx, p)
		}
	case fasthttp.MethodOptions:
		ctx.Response.Header.Set("Allow", "GET, POST, DELETE")
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	default:
		ctx.Response.Header.Set("Allow", "GET, POST, DELETE")
		s.httpError(ctx, fasthttp.StatusMethodNotAllowed, "method not allowed")
	}
}

func (s *HTTPServer) checkOrigin(ctx *fasthttp.RequestCtx) bool {
	if !s.cfg.Rules.hostAllowed(ctx.Host()) {
		s.httpError(ctx, fasthttp.StatusForbidden, "host not allowed")
		return false
	}
	if !s.cfg.Rules.originAllowed(ctx.Request.Header.Peek("Origin")) {
		s.httpError(ctx, fasthttp.StatusForbidden, "origin not allowed")
		return false
	}
	return true
}

// httpError answers with an HTTP status and a JSON-RPC error body (id null), which both
// plain HTTP clients and MCP SDKs can report.
func (s *HTTPServer) httpError(ctx *fasthttp.RequestCtx, status int, msg string) {
	s.rpcError(ctx, status, codec.CodeInvalidRequest, msg, nil)
}

func (s *HTTPServer) rpcError(ctx *fasthttp.RequestCtx, status, code int, msg string, data []byte) {
	s.Stats.Rejected.Add(1)
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(codec.AppendError(ctx.Response.Body()[:0], nil, code, msg, data))
}

// sessionFor resolves Mcp-Session-Id for principal p: (nil, true) when absent, the
// session when known and p's, and a 404 answered when unknown, ended, or another
// principal's.
func (s *HTTPServer) sessionFor(ctx *fasthttp.RequestCtx, p *auth.Principal) (*Session, bool) {
	id := ctx.Request.Header.Peek(HeaderSessionID)
	if len(id) == 0 {
		return nil, true
	}
	sess, ok := s.reg.Get(id)
	if !ok && s.cfg.Resolver != nil && !s.ended.has(id) {
		var err error
		sess, err = s.adoptOnce(string(id), standaloneSeq(ctx.Request.Header.Peek(HeaderLastEventID)), p)
		if err == ErrForeignSession {
			s.refuseForeignSession(ctx, p, msgSessionNotFound)
			return nil, false
		}
		ok = err == nil
	}
	if !ok || sess.Closed() || sess.carrier != CarrierStreamable {
		s.rpcError(ctx, fasthttp.StatusNotFound, codec.CodeInvalidRequest, msgSessionNotFound, nil)
		return nil, false
	}
	if !sess.ownedBy(p) {
		s.refuseForeignSession(ctx, p, msgSessionNotFound)
		return nil, false
	}
	sess.renew(p)
	return sess, true
}

func (s *HTTPServer) post(ctx *fasthttp.RequestCtx, principal *auth.Principal) {
	if !isJSONContentType(ctx.Request.Header.ContentType()) {
		s.httpError(ctx, fasthttp.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	accept := parseAccept(ctx.Request.Header.Peek("Accept"))
	if accept&acceptJSON == 0 && accept&acceptSSE == 0 {
		s.httpError(ctx, fasthttp.StatusNotAcceptable, "Accept must allow application/json or text/event-stream")
		return
	}
	if s.stateless != nil {
		p := getPost()
		if s.claimStateless(ctx, p) {
			p.srv, p.accept, p.principal = s, accept, principal
			p.trace.take(s.traceHeaders(), &ctx.Request.Header)
			s.postStateless(ctx, p, principal)
			return
		}
		putPost(p)
	}
	pv := ctx.Request.Header.Peek(HeaderProtocolVersion)
	version, ok := s.cfg.Rules.versionFor(pv)
	if !ok {
		s.httpError(ctx, fasthttp.StatusBadRequest, "unsupported MCP-Protocol-Version")
		return
	}
	sess, ok := s.sessionFor(ctx, principal)
	if !ok {
		return
	}
	var client netip.Addr
	if sess != nil {
		sess.touch()
		if len(pv) == 0 {
			version = sess.Version()
		}
	} else if client, ok = s.allowNewSession(ctx); !ok {
		return
	}
	body := ctx.PostBody()

	p := getPost()
	p.srv, p.sess, p.accept, p.version, p.client, p.principal = s, sess, accept, version, client, principal
	p.trace.take(s.traceHeaders(), &ctx.Request.Header)
	if sess != nil {
		sess.beginCall() // ended when the post is released
	}
	if codec.IsBatch(body) && sess != nil && sess.Version() > s.cfg.BatchMaxVersion {
		putPost(p)
		s.rpcError(ctx, fasthttp.StatusBadRequest, codec.CodeInvalidRequest, "JSON-RPC batches are not supported in protocol revision "+sess.Version(), nil)
		return
	}
	batch, requests, invalid, ok := s.splitPost(ctx, &p.in, body)
	if !ok {
		putPost(p)
		return
	}
	s.serveUnit(ctx, p, batch, requests+invalid > 0)
}

// allowNewSession takes a token from the client address's initialize bucket, and
// answers 429 with Retry-After when it is empty. It returns the client's address key.
func (s *HTTPServer) allowNewSession(ctx *fasthttp.RequestCtx) (netip.Addr, bool) {
	ip, _ := netip.AddrFromSlice(ctx.RemoteIP())
	client := clientKey(ip)
	if wait, ok := s.inits.allow(client, time.Now()); !ok {
		s.Stats.RateLimited.Add(1)
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		s.rpcError(ctx, fasthttp.StatusTooManyRequests, codec.CodeOverloaded,
			"too many new sessions from this address: retry later (see Retry-After)", codec.AppendRetryData(nil, wait))
		return client, false
	}
	return client, true
}

// startEventStream makes the response an SSE stream: 200, text/event-stream, and no
// caching or proxy buffering of its events.
func startEventStream(ctx *fasthttp.RequestCtx) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
}

// splitPost splits and scans a POST body (the inbound path, see inbound) and counts
// the invalid elements. It answers 400 itself, and ok is false, when the body is refused
// as a whole: a broken batch, a batch too long, a single message that is invalid.
func (s *HTTPServer) splitPost(ctx *fasthttp.RequestCtx, in *inbound, body []byte) (batch bool, requests, invalid int, ok bool) {
	batch, err := in.split(body, s.cfg.MaxBatch)
	if err == nil {
		requests, invalid = in.scan()
		if invalid > 0 && !batch {
			err = in.firstError()
		}
		for _, e := range in.errs {
			if e != nil {
				s.Stats.codecError(e)
			}
		}
	} else if _, isCodec := err.(*codec.Error); isCodec {
		s.Stats.codecError(err)
	}
	if err != nil {
		code, msg, data := errorParts(err, nil)
		s.rpcError(ctx, fasthttp.StatusBadRequest, code, msg, data)
		return batch, 0, 0, false
	}
	return batch, requests, invalid, true
}

// serveUnit hands the scanned messages of a POST to the handler and waits for the
// replies; a unit that needs none (notifications and responses only) gets 202 at once.
func (s *HTTPServer) serveUnit(ctx *fasthttp.RequestCtx, p *httpPost, batch, needsReply bool) {
	if p.sess == nil {
		// Without a session only what the handler accepts may pass (initialize).
		for i := range p.in.msgs {
			m := &p.in.msgs[i]
			if m.Kind == codec.KindInvalid {
				continue
			}
			if s.policy == nil || !s.policy.AcceptSessionless(m, p.version) {
				putPost(p)
				s.httpError(ctx, fasthttp.StatusBadRequest, "missing Mcp-Session-Id header: initialize first")
				return
			}
		}
	}
	c := p.call
	c.init(p, batch)
	p.in.handOff(c, s.handler, arrival{sess: p.sess, version: p.version, carrier: CarrierStreamable, batch: batch, principal: p.principal}, &p.tmp)
	if !needsReply {
		c.unref()
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		return
	}
	s.await(ctx, p)
}

// await blocks the request's goroutine until the call finishes or turns into a stream.
// A call answered before the wait begins (its forward ran on this goroutine) waits for
// nothing: no timer is armed for it (awaitReply's Reset and Stop were 1.5% of the
// router's CPU per forwarded call). Its wake-up stays in p.wake until putPost drains it.
func (s *HTTPServer) await(ctx *fasthttp.RequestCtx, p *httpPost) {
	c := p.call
	c.mu.Lock()
	if !c.finished || p.stream != nil {
		c.mu.Unlock()
		s.awaitReply(p)
		c.mu.Lock()
	}
	if p.bound != nil {
		ctx.Response.Header.Set(HeaderSessionID, p.bound.id)
	}
	if p.stream != nil {
		stream, sess := p.stream, p.bound
		if sess == nil {
			sess = p.sess
		}
		var watch syscall.RawConn
		if p.stateless {
			watch = s.callStreamConn(ctx, c) // stateless.go
			p.holdStream()
			c.mu.Unlock()
			putPost(p)
		} else {
			c.mu.Unlock()
		}
		s.serveStream(ctx, stream, false, 0, sess, watch, func(err error) {
			if err != nil {
				c.abandoned() // the client left before the reply
			}
			c.unref()
		})
		return
	}
	if !c.finished {
		// The handler did not answer in time: give up on this POST. Late replies are
		// dropped by the call.
		abandon := c.takeAbandonLocked()
		c.finished = true
		c.mu.Unlock()
		if abandon != nil {
			abandon()
		}
		c.unref()
		s.rpcError(ctx, fasthttp.StatusGatewayTimeout, codec.CodeInternalError, "timed out waiting for the reply", nil)
		return
	}
	if len(c.ends) == 0 {
		c.mu.Unlock()
		c.unref()
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		return
	}
	if p.accept&acceptJSON == 0 {
		// The client takes event streams only: the replies go out as one.
		s.replyAsStream(ctx, p)
		return
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(c.body(&p.tmp))
	st := c.status
	if p.stateless && st == 0 && s.cfg.StatusOf != nil {
		st = s.cfg.StatusOf(ctx.Response.Body())
	}
	if st != 0 && !c.batch {
		refusedWhole(ctx, st)
	}
	c.mu.Unlock()
	c.unref()
}

// replyAsStream answers a POST whose client accepts only text/event-stream with its
// collected replies as SSE events: on a reply stream of the session (resumable like any
// other), or, without a session (a failed initialize), as a plain one-event stream.
// Called with p.call.mu held; releases it.
func (s *HTTPServer) replyAsStream(ctx *fasthttp.RequestCtx, p *httpPost) {
	c := p.call
	sess := p.bound
	if sess == nil {
		sess = p.sess
	}
	if sess == nil {
		body := c.appendBody(p.tmp[:0])
		p.tmp = body
		startEventStream(ctx)
		ctx.SetBody(sse.AppendEvent(ctx.Response.Body()[:0], nil, "", body))
		c.mu.Unlock()
		c.unref()
		return
	}
	stream := sess.out.(*streamableOut).newPostStream()
	c.replies(func(msg []byte) { publishReply(stream, msg) })
	stream.Close(0)
	c.mu.Unlock()
	s.serveStream(ctx, stream, false, 0, sess, nil, func(error) { c.unref() })
}

// serveStream turns the response into an SSE stream pumping from stream, resuming after
// seq; done runs when the pump ends, with the error that ended it (nil: the stream
// ended cleanly). watch, for a stateless call's stream (callStreamConn), is its
// connection for the close watcher while the stream is pumped on the response.
func (s *HTTPServer) serveStream(ctx *fasthttp.RequestCtx, stream *sse.Stream, resume bool, after uint64, sess *Session, watch syscall.RawConn, done func(error)) {
	var cons *sse.Consumer
	var err error
	if resume {
		// Exactly the events after Last-Event-ID (which may be a priming id, seq 0).
		cons, err = stream.Resume(after)
		if errors.Is(err, sse.ErrGone) && stream.ID() == 0 && after <= stream.Last().Seq {
			// The GET stream cannot replay that far back (evicted, or a session that
			// moved here was adopted by a POST): carry on from what it has, as a fresh
			// GET would. An id beyond the stream stays an error.
			s.Stats.ResumeGone.Add(1)
			cons, err = stream.Attach(0)
		}
	} else {
		cons, err = stream.Attach(0)
	}
	if err != nil {
		if done != nil {
			done(err)
		}
		s.httpError(ctx, fasthttp.StatusBadRequest, "cannot resume stream: "+err.Error())
		return
	}
	startEventStream(ctx)
	conn := ctx.Conn()
	// No Done channel: at shutdown every stream is closed with the retry hint (Registry.
	// CloseAll), and a closed stream's pump writes what is left, then the hint. A Done
	// channel would race with that and could end a pump before its last events, and
	// without the hint for sessions older than 2025-11-25.
	opts := sse.PumpOptions{KeepAlive: s.cfg.KeepAlive, RetryMs: s.retryFor(sess),
		Interrupt: func() { conn.SetWriteDeadline(time.Now()) }}
	if sess != nil && sess.Version() >= s.cfg.PrimingMinVersion && !resume {
		opts.Prime = true
	}
	if sess != nil {
		tokenBound(&opts, sess.Principal())
	}
	s.Stats.OpenStreams.Add(1)
	if done == nil || sess == nil && watch == nil {
		// A GET stream lives as long as the session, and a held stateless stream
		// (subscriptions/listen) may live as long: it takes the connection
		// over, so that each batch of events is one write to the socket (no pipe, no
		// second goroutine and copy per event, which fan-out to many sessions pays for)
		// and an idle one holds no buffer and no goroutine of fasthttp's. A stateless
		// request's client cancels it by closing the connection, which the close
		// watcher notices at once (getStream.watch).
		s.hijackStream(ctx, cons, opts, done, sess == nil)
		return
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		if !opts.Prime && opts.RetryMs <= 0 {
			// fasthttp sends the status line and headers with the first chunk of body:
			// a stream with nothing to say yet (a GET on a pre-2025-11-25 session) would
			// leave the client waiting for its headers until the first keep-alive. An
			// SSE comment, which clients ignore, opens the response now.
			w.Write(streamOpenComment)
			if w.Flush() != nil {
				cons.Close() // the client is gone: Pump returns at once
			}
		}
		err := s.pumpWatched(w, conn, watch, cons, opts)
		if done != nil {
			done(err)
		}
	})
}

// pumpWatched pumps cons onto w, the body of a stream's response on conn, with the
// connection rc (nil: none) under the close watcher meanwhile, so that the client's
// close ends the stream at once; it counts the stream's end and returns what ended it.
func (s *HTTPServer) pumpWatched(w *bufio.Writer, conn net.Conn, rc syscall.RawConn, cons *sse.Consumer, opts sse.PumpOptions) error {
	reg := s.watchCallStream(rc, cons)
	err := cons.Pump(w, opts)
	s.unwatchCallStream(rc, reg) // before endCutStream can close the connection
	s.Stats.OpenStreams.Add(-1)
	endCutStream(conn, err)
	if err == sse.ErrSlowConsumer {
		s.Stats.SlowConsumers.Add(1)
	}
	return err
}

// watchClose detaches cons as soon as the client closes conn, whose response is cons's
// stream, with a goroutine blocked in a read: getStream.watch's way where the process's
// close watcher cannot take the connection (no descriptor, as with TLS, or not Linux).
// The response closes the connection (nothing else is read from it), so the read
// returns when either side ends it.
func watchClose(conn net.Conn, cons *sse.Consumer) {
	var b [1]byte
	conn.Read(b[:])
	cons.Close()
}

// endCutStream closes the connection of a stream whose consumer was cut off as too
// slow or replaced by a newer one (a resumption). Its write may have been interrupted
// by a past write deadline, so the connection cannot carry another response; and an
// abrupt end, unlike a clean end of the response, tells the client that the stream did
// not finish, so it resumes with Last-Event-ID.
func endCutStream(conn net.Conn, err error) {
	if err == sse.ErrSlowConsumer || err == sse.ErrDetached {
		conn.Close()
	}
}

// streamOpenComment is written first on a stream that has no priming event.
var streamOpenComment = sse.AppendComment(nil, "stream open")

// retryFor is the retry hint for a session's streams: revisions from 2025-11-25 on expect
// one (and polling); older clients get it only at shutdown, through Done.
func (s *HTTPServer) retryFor(sess *Session) int {
	if sess != nil && sess.Version() >= s.cfg.PrimingMinVersion {
		return s.cfg.RetryMs
	}
	return 0
}

// hijackedConn is fasthttp's hijacked connection (its type is unexported): UnsafeConn
// gives the connection under it, without fasthttp's read buffer in the way.
type hijackedConn interface{ UnsafeConn() net.Conn }

// hijackStream writes the response head itself and drives the stream straight to the
// connection in HTTP/1.1 chunked encoding (getStream), without a buffer or a goroutine
// of its own while it is idle: a GET stream lives as long as its session, mostly idle,
// and fan-out writes each event to it from the publishing goroutine (sse.Consumer.Drive).
// When the server keeps hijacked connections (HTTPConfig.KeepsHijackedConns) the
// handler returns at once, giving fasthttp's request context and goroutine back;
// otherwise it waits for the stream to end, since fasthttp closes the connection when
// it returns. The connection ends with the stream; then done, if set, runs with the
// error that ended it (nil: a clean end). The client's close of the connection ends the
// stream at once (getStream.watch); must: even if that takes a goroutine (a stateless
// request's client cancels it so).
func (s *HTTPServer) hijackStream(ctx *fasthttp.RequestCtx, cons *sse.Consumer, opts sse.PumpOptions, done func(error), must bool) {
	ctx.Response.Header.SetContentLength(-1) // chunked
	ctx.Response.Header.Set(fasthttp.HeaderConnection, "close")
	head := framePool.Get().(*[]byte)
	*head = append((*head)[:0], ctx.Response.Header.Header()...)
	ctx.HijackSetNoResponse(true)
	keeps := s.cfg.KeepsHijackedConns
	ctx.Hijack(func(c net.Conn) {
		if u, ok := c.(hijackedConn); ok {
			c = u.UnsafeConn() // nothing is read: fasthttp's reader stays behind
		}
		g := &getStream{srv: s, done: done}
		g.init(c)
		g.kept = head // written with the stream's first bytes (streamSink.Write)
		g.watch(cons, must)
		if !opts.Prime && opts.RetryMs <= 0 {
			// Nothing to say yet: an SSE comment shows the client the stream is open.
			if g.Write(streamOpenComment) != nil {
				cons.Close() // the client is gone: the stream ends at once
			}
		}
		if !keeps {
			g.ended = make(chan struct{})
		}
		cons.Drive(g, opts)
		if !keeps {
			<-g.ended
		}
	})
}

// getStream is a hijacked stream's connection (a GET stream, or a stateless request's
// stream), as the sse.Sink its consumer drives.
type getStream struct {
	streamSink
	srv   *HTTPServer
	ended chan struct{} // closed by End when the handler waits for it; nil otherwise
	done  func(error)   // serveStream's done, run last by End; nil for a GET stream
	// watched is the connection's registration with the process's close watcher (zero:
	// none), removed by End before the connection can close.
	watched closewatch.Reg
}

// watch makes the client's close of the connection end cons at once, where it would
// otherwise be noticed at the next write (a keep-alive, up to its interval later): a
// stateless request is cancelled by closing its stream, and a GET stream's session then
// stops spending on a stream nobody reads. The process's close watcher does it for every
// held stream with one goroutine, for 24 bytes of its table and two system calls per
// stream; where it cannot take the connection (no descriptor: TLS; not Linux), a
// stream that must notice gets a reader of its own (watchClose), the rest notice at
// their next write.
func (g *getStream) watch(cons *sse.Consumer, must bool) {
	if g.rc != nil && g.srv.watcher != nil {
		if r, err := g.srv.watcher.Add(g.rc, cons); err == nil {
			g.watched = r
			return
		}
	}
	if must {
		go watchClose(g.c, cons)
	}
}

// End implements sse.Sink: the connection out of the close watcher (before it can
// close: its descriptor's number may be another's then), the stream's counters, a clean
// end of the response when the stream ended cleanly, and the connection closed (by
// fasthttp when the handler waits).
func (g *getStream) End(err error) {
	if g.watched.Registered() {
		g.srv.watcher.Remove(g.rc, g.watched)
	}
	g.srv.Stats.OpenStreams.Add(-1)
	if err == sse.ErrSlowConsumer {
		g.srv.Stats.SlowConsumers.Add(1)
	}
	if err == nil {
		g.c.Write(chunkEnd)
	}
	if g.ended != nil {
		close(g.ended)
	} else {
		g.c.Close()
	}
	if g.done != nil {
		g.done(err)
	}
}

var crlf = []byte("\r\n")

var chunkEnd = []byte("0\r\n\r\n")

// requireSession checks what GET and DELETE need: a supported MCP-Protocol-Version and
// a live session of principal p; it answers the error itself when not.
func (s *HTTPServer) requireSession(ctx *fasthttp.RequestCtx, p *auth.Principal) (*Session, bool) {
	if _, ok := s.cfg.Rules.versionFor(ctx.Request.Header.Peek(HeaderProtocolVersion)); !ok {
		s.httpError(ctx, fasthttp.StatusBadRequest, "unsupported MCP-Protocol-Version")
		return nil, false
	}
	sess, ok := s.sessionFor(ctx, p)
	if !ok {
		return nil, false
	}
	if sess == nil {
		s.httpError(ctx, fasthttp.StatusBadRequest, "missing Mcp-Session-Id header")
		return nil, false
	}
	return sess, true
}

func (s *HTTPServer) get(ctx *fasthttp.RequestCtx, p *auth.Principal) {
	if parseAccept(ctx.Request.Header.Peek("Accept"))&acceptSSE == 0 {
		s.httpError(ctx, fasthttp.StatusNotAcceptable, "Accept must allow text/event-stream")
		return
	}
	sess, ok := s.requireSession(ctx, p)
	if !ok {
		return
	}
	if s.shuttingDown(ctx) {
		return
	}
	sess.touch()
	out := sess.out.(*streamableOut)
	stream, after, resume := out.standalone, uint64(0), false
	if last := ctx.Request.Header.Peek(HeaderLastEventID); len(last) > 0 {
		id, ok := sse.ParseEventID(last)
		if !ok {
			s.httpError(ctx, fasthttp.StatusBadRequest, "malformed Last-Event-ID")
			return
		}
		if stream = out.stream(id.Stream); stream == nil {
			s.rpcError(ctx, fasthttp.StatusNotFound, codec.CodeInvalidRequest, "stream to resume not found", nil)
			return
		}
		after, resume = id.Seq, true
		s.Stats.Resumes.Add(1)
	}
	s.serveStream(ctx, stream, resume, after, sess, nil, nil)
}

func (s *HTTPServer) delete(ctx *fasthttp.RequestCtx, p *auth.Principal) {
	sess, ok := s.requireSession(ctx, p)
	if !ok {
		return
	}
	s.ended.add(sess.ID())
	sess.Close()
	ctx.SetStatusCode(fasthttp.StatusOK)
}

// streamableOut is a Streamable HTTP session's streams: the standalone GET stream (id 0)
// and recent POST reply streams, kept for resumption.
type streamableOut struct {
	cfg        *HTTPConfig
	acct       *budget.Account
	standalone *sse.Stream
	sid        string // the session's id, for the event log

	mu   sync.Mutex
	next uint32
	// posts are the reply streams kept, oldest first (their ids ascending), made with
	// the first: a slice where a map by id and the order beside it took 32 bytes of
	// every session and a map's buckets of each that ever streamed a reply, and by
	// pointer, so that a session that never streams a reply (most) keeps 8 bytes for
	// them (streamableOut in the 64-byte class). A session keeps a few (MaxPostStreams,
	// and those still open), and a lookup by id is a binary search.
	posts *[]*sse.Stream
}

// postStreams is o.posts' slice (nil when none). Called with o.mu held.
func (o *streamableOut) postStreams() []*sse.Stream {
	if o.posts == nil {
		return nil
	}
	return *o.posts
}

func newStreamableOut(cfg *HTTPConfig, acct *budget.Account) *streamableOut {
	o := &streamableOut{cfg: cfg, acct: acct, next: 1}
	o.standalone = sse.NewStream(0, o.streamConfig())
	acct.SetReclaim(o)
	return o
}

// streamConfig is the configuration of the session's streams: the server's, with the
// session's budget account.
func (o *streamableOut) streamConfig() sse.StreamConfig {
	c := o.cfg.Stream
	c.Account = o.acct
	return c
}

// Reclaim makes room in the session's budget share (budget.Reclaimer): its oldest
// finished reply streams are forgotten first, then the GET stream's events the client
// has already read.
func (o *streamableOut) Reclaim(need int64) bool {
	freed := 0
	o.mu.Lock()
	if posts := o.postStreams(); len(posts) > 0 {
		for i := 0; i < len(posts) && int64(freed) < need; {
			st := posts[i]
			if n := st.Drop(); n > 0 || st.Closed() && !st.Attached() {
				freed += n
				posts = slices.Delete(posts, i, i+1)
				continue
			}
			i++
		}
		*o.posts = posts
	}
	o.mu.Unlock()
	if int64(freed) < need {
		freed += o.standalone.Trim(int(need) - freed)
	}
	return freed > 0
}

func (o *streamableOut) send(msg []byte) error {
	id, err := o.standalone.Publish("", msg)
	if err == nil && o.cfg.Events != nil && o.sid != "" {
		o.cfg.Events.Append(o.sid, id.Seq, msg)
	}
	return err
}

// adoptions single-flights adoptions by session id.
type adoptions struct {
	mu      sync.Mutex
	pending map[string]*adoption
}

// adoption is one adoption in progress; its result is set before done is closed.
type adoption struct {
	done chan struct{}
	sess *Session
	err  error
}

// adoptOnce adopts session id once however many requests name it at the same time
// (a client's POST and GET after its instance went away): the first runs adopt, the
// others wait for its result. Each ResolveSession builds the handler's state of the
// session, upstream sessions and subscriptions included, so a second one would build
// a copy that nothing ever closes. The wait is bounded by the first request's adopt
// (the resolver's and the event log's store calls have their own timeouts).
//
// Requests of different principals do not share an adoption: one whose principal does
// not own the session fails to adopt it, and must not make its owner's request fail
// with it (the caller checks the owner of the session it gets).
func (s *HTTPServer) adoptOnce(id string, lastSeq uint64, p *auth.Principal) (*Session, error) {
	key := id
	if p != nil {
		key = id + "\x00" + p.ID()
	}
	a, first := s.adopting.join(key)
	if !first {
		s.Stats.AdoptionWaits.Add(1)
		<-a.done
		return a.sess, a.err
	}
	defer s.adopting.finish(key, a)
	// An adoption that finished between this request's registry lookup and join left
	// the session registered.
	var ok bool
	if a.sess, ok = s.reg.Get([]byte(id)); !ok {
		a.sess, a.err = s.adopt(id, lastSeq, p)
	}
	return a.sess, a.err
}

// join returns the adoption in progress for id, or a new one with first set: the
// caller runs it and must finish it.
func (as *adoptions) join(id string) (a *adoption, first bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if a := as.pending[id]; a != nil {
		return a, false
	}
	if as.pending == nil {
		as.pending = make(map[string]*adoption)
	}
	a = &adoption{done: make(chan struct{})}
	as.pending[id] = a
	return a, true
}

// finish ends the adoption a of id, waking the requests waiting for its result.
func (as *adoptions) finish(id string, a *adoption) {
	as.mu.Lock()
	delete(as.pending, id)
	as.mu.Unlock()
	close(a.done)
}

// adopt takes over a session another instance held for principal p, its owner: its
// state from the resolver, its GET stream carried on from the client's Last-Event-ID
// (lastSeq; 0 without one) with the logged events the client has not seen, then
// whatever the handler sends on adoption (fresh change notices).
func (s *HTTPServer) adopt(id string, lastSeq uint64, p *auth.Principal) (*Session, error) {
	version, state, err := s.cfg.Resolver.ResolveSession(id, p)
	if err != nil {
		return nil, err
	}
	var missed [][]byte
	if s.cfg.Events != nil {
		if events, err := s.cfg.Events.Since(id); err == nil {
			for _, e := range events {
				if e.Seq > lastSeq {
					missed = append(missed, e.Data)
				}
			}
			if lastSeq == 0 && len(events) > 0 {
				// Adopted by a POST: the client may resume its GET stream later from
				// any id it saw; start after the newest so that ids never repeat.
				lastSeq, missed = events[len(events)-1].Seq, nil
			}
		}
	}
	acct := s.reg.newAccount()
	out := newStreamableOut(&s.cfg, acct)
	out.standalone = sse.NewStreamAfter(0, out.streamConfig(), lastSeq)
	for _, e := range missed {
		out.standalone.Publish("", e)
	}
	out.sid = id
	sess, err := s.reg.open(sessionSpec{id: id, carrier: CarrierStreamable, version: version, state: state,
		out: out, acct: acct, ready: true, principal: p})
	if err != nil || sess.out != out {
		// Refused (no room), or the id taken meanwhile (which adoptOnce prevents): the
		// state ResolveSession built is not the session's.
		acct.Close()
		s.release(id, version, state)
		return sess, err
	}
	s.Stats.Adopted.Add(1)
	s.cfg.Resolver.SessionAdopted(sess)
	return sess, nil
}

// release gives back the handler's state of a session that was resolved but not
// registered. The handler closes it as a session handed over, which keeps its record
// for the client's next try, here or on another instance.
func (s *HTTPServer) release(id, version string, state SessionState) {
	s.handler.SessionClosed(s.reg.discarded(id, CarrierStreamable, version, state))
}

// standaloneSeq is the sequence number a Last-Event-ID names on the GET stream (0 when
// absent or naming another stream).
func standaloneSeq(h []byte) uint64 {
	if len(h) == 0 {
		return 0
	}
	if id, ok := sse.ParseEventID(h); ok && id.Stream == 0 {
		return id.Seq
	}
	return 0
}

// notice publishes a change notice without logging it (see Session.SendNotice). A
// notice goes to many sessions in turn (a resource update to its subscribers, a list
// change to everyone): their streams share its encoding.
func (o *streamableOut) notice(msg []byte) error {
	_, err := o.standalone.PublishShared(o.cfg.notices.Get("", msg))
	return err
}

func (o *streamableOut) close(retryMs int) {
	// A session that ended for its client has no use for its logged events; one handed
	// over at shutdown carries on elsewhere with them.
	if retryMs == 0 && o.cfg.Events != nil && o.sid != "" {
		o.cfg.Events.Forget(o.sid)
	}
	o.standalone.Close(retryMs)
	o.mu.Lock()
	streams := o.postStreams()
	o.posts = nil
	o.mu.Unlock()
	for _, st := range streams {
		st.Close(retryMs)
	}
}

func (o *streamableOut) attached() bool { return o.standalone.Attached() }

// newPostStream opens a reply stream for one POST, remembered for resumption. Past
// MaxPostStreams the oldest finished stream no client is reading is forgotten (and its
// budget given back); streams still open are kept whatever their number (they are
// bounded by the requests in flight), so that closing the session, at shutdown in
// particular, reaches every one of them.
func (o *streamableOut) newPostStream() *sse.Stream {
	o.mu.Lock()
	defer o.mu.Unlock()
	id := o.next
	o.next++
	st := sse.NewStream(id, o.streamConfig())
	if o.posts == nil {
		o.posts = new([]*sse.Stream)
	}
	if posts := *o.posts; len(posts) >= o.cfg.MaxPostStreams {
		for i, old := range posts {
			if old.Closed() && !old.Attached() {
				old.Drop()
				*o.posts = slices.Delete(posts, i, i+1)
				break
			}
		}
	}
	*o.posts = append(*o.posts, st)
	return st
}

func (o *streamableOut) stream(id uint32) *sse.Stream {
	if id == 0 {
		return o.standalone
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	posts := o.postStreams()
	i, found := slices.BinarySearchFunc(posts, id, func(st *sse.Stream, id uint32) int { return cmp.Compare(st.ID(), id) })
	if !found {
		return nil
	}
	return posts[i]
}

// publishReply publishes a response on a reply stream. A response too large for the
// session's memory share is replaced by an error response to the same request, so that
// the client is told instead of waiting for an answer that will not come.
func publishReply(st *sse.Stream, msg []byte) {
	if _, err := st.Publish("", msg); err == budget.ErrOverBudget {
		st.Publish("", overBudgetReply(msg))
	}
}

// overBudgetReply is the error response that replaces a reply too large for the
// session's memory share: same id (null for a batch), and why.
func overBudgetReply(msg []byte) []byte {
	var m codec.Message
	var id []byte
	if !codec.IsBatch(msg) && codec.Scan(msg, &m) == nil {
		id = m.ID
	}
	return codec.AppendError(nil, id, codec.CodeInternalError,
		"reply of "+strconv.Itoa(len(msg))+" bytes exceeds this session's memory share; ask for less", nil)
}

// httpPost is one POST in flight: the call gathering its replies and the request goroutine
// waiting for them. Pooled.
type httpPost struct {
	// call is the post's own until a stateless stream takes it over (holdStream): the
	// post then goes back to the pool, and getPost gives it a new one.
	call    *call
	srv     *HTTPServer
	sess    *Session
	bound   *Session
	accept  acceptMask
	version string
	client  netip.Addr // the client's address key, for a session this post opens
	// principal authenticated the post (nil without authentication): its messages'
	// principal, and the owner of a session it opens.
	principal *auth.Principal
	stream    *sse.Stream
	// stateless: a request served without a session (stateless.go); hdrs holds its
	// Mcp-Param-* headers while they are handed over.
	stateless bool
	hdrs      []byte
	trace     TraceHeaders    // HTTPConfig.TraceHeaders's copies
	acct      *budget.Account // the stateless stream's, nil before it opens
	in        inbound
	tmp       []byte
	wake      chan struct{}
	timer     *time.Timer // the reply's deadlines (awaitReply)

	shdr StatelessHeaders // postStateless's headers, in the post rather than on the heap
	inl  callerWatch      // the connection watched while a handler works on the post's goroutine (stateless_inline.go)
}

var postPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &httpPost{wake: make(chan struct{}, 1), timer: t}
}}

func getPost() *httpPost {
	p := postPool.Get().(*httpPost)
	if p.call == nil {
		p.call = new(call)
	}
	return p
}

func putPost(p *httpPost) {
	select { // drain a stale wake-up
	case <-p.wake:
	default:
	}
	if p.sess != nil {
		p.sess.endCall()
	}
	p.srv, p.sess, p.bound, p.stream, p.client, p.principal = nil, nil, nil, nil, netip.Addr{}, nil
	p.stateless = false
	if p.acct != nil {
		p.acct.Close()
		p.acct = nil
	}
	if cap(p.hdrs) > maxPooledBuf {
		p.hdrs = nil
	}
	if p.call != nil && cap(p.call.buf) > maxPooledBuf {
		p.call.buf = nil
	}
	if cap(p.tmp) > maxPooledBuf {
		p.tmp = nil
	}
	p.in.reset()
	postPool.Put(p)
}

func (p *httpPost) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *httpPost) finish(*call) { p.signal() }

func (p *httpPost) related(c *call, msg []byte) (bool, error) {
	if p.stateless {
		// No session: the POST's own stream, when the client takes one, or nothing.
		if p.stream == nil {
			if p.accept&acceptSSE == 0 {
				return false, ErrNoStream
			}
			p.stream = p.srv.statelessStream(p)
			p.signal()
		}
		_, err := p.stream.Publish("", msg)
		return true, err
	}
	sess := p.sess
	if sess == nil {
		sess = p.bound
	}
	if p.stream == nil && (p.accept&acceptSSE == 0 || sess == nil) {
		// The client takes no stream on this POST: the message goes to the session's
		// GET stream instead, where it is kept until the client reads it.
		if sess == nil {
			return false, ErrNoStream
		}
		return false, sess.Send(msg)
	}
	if p.stream == nil {
		p.stream = sess.out.(*streamableOut).newPostStream()
		p.signal()
	}
	_, err := p.stream.Publish("", msg)
	return true, err
}

func (p *httpPost) streamed(c *call, msg []byte, last bool) { streamReply(p.stream, msg, last) }

// streamReply is output.streamed on a call's own stream st: the reply msg (nil for
// none) goes on it, and last ends it.
func streamReply(st *sse.Stream, msg []byte, last bool) {
	if msg != nil {
		publishReply(st, msg)
	}
	if last {
		st.Close(0)
	}
}

func (p *httpPost) bind(c *call, version string, state SessionState) (*Session, error) {
	if p.sess != nil || p.bound != nil {
		return nil, ErrAlreadyBound
	}
	reg := p.srv.reg
	acct := reg.newAccount()
	out := newStreamableOut(&p.srv.cfg, acct)
	s, err := reg.open(sessionSpec{carrier: CarrierStreamable, version: version, state: state, out: out, acct: acct,
		client: p.client, principal: p.principal})
	if err != nil {
		return nil, err
	}
	out.sid = s.id
	p.bound = s
	return s, nil
}

func (p *httpPost) released(*call) { putPost(p) }

// traceHeaders reports whether POSTs' trace context headers are kept now
// (HTTPConfig.TraceHeaders).
func (s *HTTPServer) traceHeaders() bool {
	return s.cfg.TraceHeaders != nil && s.cfg.TraceHeaders.Load()
}
