package transport

import (
	"bufio"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/readahead"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// The legacy HTTP+SSE transport (revision 2024-11-05): GET opens the event stream, whose
// first event, "endpoint", names the URI to POST messages to; every server message,
// replies included, travels on the stream as an event named "message"; POSTs get 202.
//
// The session exists from the GET on (before initialize), so the POST URI can carry it.

// LegacyVersion is the revision a legacy HTTP+SSE session speaks until initialize says.
const LegacyVersion = "2024-11-05"

// ServeLegacyStream is the fasthttp handler of the legacy stream endpoint (GET /sse).
func (s *HTTPServer) ServeLegacyStream(ctx *fasthttp.RequestCtx) {
	principal, ok := s.admitLegacy(ctx, fasthttp.MethodGet, "method not allowed: GET opens the event stream")
	if !ok {
		return
	}
	if parseAccept(ctx.Request.Header.Peek("Accept"))&acceptSSE == 0 {
		s.httpError(ctx, fasthttp.StatusNotAcceptable, "Accept must allow text/event-stream")
		return
	}
	if s.shuttingDown(ctx) {
		return
	}
	// The session exists before initialize: it counts against its address's quota and
	// rate, and ends if the handshake does not finish in time (RegistryConfig.InitTimeout).
	client, ok := s.allowNewSession(ctx)
	if !ok {
		return
	}
	acct := s.reg.newAccount()
	cfg := s.cfg.Stream
	cfg.Account = acct
	out := &legacyOut{stream: sse.NewStream(0, cfg)}
	acct.SetReclaim(out.stream)
	sess, err := s.reg.open(sessionSpec{carrier: CarrierLegacySSE, version: LegacyVersion, out: out, acct: acct,
		client: client, principal: principal})
	if err != nil {
		acct.Close()
		s.rpcError(ctx, fasthttp.StatusServiceUnavailable, codec.CodeInvalidRequest, sessionRefusal(err), nil)
		return
	}
	// The endpoint event goes first; it is published like any other event so that it is
	// written before anything the client triggers.
	endpoint := append([]byte(s.cfg.LegacyEndpoint), "?sessionId="...)
	endpoint = append(endpoint, sess.id...)
	out.stream.Publish("endpoint", endpoint)
	cons, err := out.stream.Attach(0)
	if err != nil {
		sess.Close()
		s.httpError(ctx, fasthttp.StatusInternalServerError, "cannot open stream")
		return
	}
	startEventStream(ctx)
	conn := ctx.Conn()
	// No Done channel: at shutdown the session's stream is closed with the retry hint.
	opts := sse.PumpOptions{KeepAlive: s.cfg.KeepAlive,
		Interrupt: func() { conn.SetWriteDeadline(time.Now()) }}
	tokenBound(&opts, principal)
	s.Stats.OpenStreams.Add(1)
	// The stream is the session's life, so the client's close of its connection ends
	// the session at once (the close watcher, as for a stateless call's stream), not at
	// the next keep-alive: its calls in flight are cancelled upstream then.
	var rc syscall.RawConn
	if s.watcher != nil {
		rc, _ = readahead.RawConnOf(conn)
	}
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		s.pumpWatched(w, conn, rc, cons, opts)
		// A legacy session cannot be resumed: its stream is its life.
		sess.Close()
	})
}

// admitLegacy runs the checks both legacy endpoints start with, in the order of the
// Streamable endpoint: count the request, Host and Origin, the one HTTP method the
// endpoint serves (405 naming it in Allow, with wrongMethod as the message), and the
// principal. Not ok: the answer is written.
func (s *HTTPServer) admitLegacy(ctx *fasthttp.RequestCtx, method, wrongMethod string) (*auth.Principal, bool) {
	s.Stats.Requests.Add(1)
	if !s.checkOrigin(ctx) {
		return nil, false
	}
	if string(ctx.Method()) != method {
		ctx.Response.Header.Set("Allow", method)
		s.httpError(ctx, fasthttp.StatusMethodNotAllowed, wrongMethod)
		return nil, false
	}
	return s.authorize(ctx)
}

// sessionRefusal is the message of a new session refused by the registry.
func sessionRefusal(err error) string {
	if err == ErrClientQuota {
		return "too many sessions from this address: end some, or retry later"
	}
	return "too many sessions: retry later"
}

// ServeLegacyMessage is the fasthttp handler of the legacy POST endpoint (/message).
func (s *HTTPServer) ServeLegacyMessage(ctx *fasthttp.RequestCtx) {
	principal, ok := s.admitLegacy(ctx, fasthttp.MethodPost, "method not allowed: POST messages here")
	if !ok {
		return
	}
	if !isJSONContentType(ctx.Request.Header.ContentType()) {
		s.httpError(ctx, fasthttp.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	id := ctx.QueryArgs().Peek("sessionId")
	if len(id) == 0 {
		s.httpError(ctx, fasthttp.StatusBadRequest, "missing sessionId query parameter")
		return
	}
	sess, ok := s.reg.Get(id)
	if !ok || sess.Closed() || sess.carrier != CarrierLegacySSE {
		s.rpcError(ctx, fasthttp.StatusNotFound, codec.CodeInvalidRequest, msgLegacySessionNotFound, nil)
		return
	}
	if !sess.ownedBy(principal) {
		s.refuseForeignSession(ctx, principal, msgLegacySessionNotFound)
		return
	}
	sess.renew(principal)
	sess.touch()
	u := getUnit()
	batch, _, _, ok := s.splitPost(ctx, &u.in, ctx.PostBody())
	if !ok {
		putUnit(u)
		return
	}
	u.sess = sess
	u.trace.take(s.traceHeaders(), &ctx.Request.Header) // as a Streamable HTTP POST's
	u.dispatch(u, s.handler, arrival{sess: sess, version: sess.Version(), carrier: CarrierLegacySSE, batch: batch, principal: principal})
	ctx.SetStatusCode(fasthttp.StatusAccepted)
}

// legacyOut is a legacy session's single event stream.
type legacyOut struct{ stream *sse.Stream }

func (o *legacyOut) send(msg []byte) error {
	_, err := o.stream.Publish("message", msg)
	return err
}
func (o *legacyOut) close(retryMs int) { o.stream.Close(retryMs) }
func (o *legacyOut) attached() bool    { return o.stream.Attached() }
