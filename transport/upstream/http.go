package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/bytesio"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// HTTPConn is a Streamable HTTP (MCP 2025-03-26 and later) connection to one backend:
// one upstream session over a pool of keep-alive connections.
//
// Every message is POSTed to the backend's endpoint. A JSON reply is delivered to the
// Sink; an SSE reply is read until the response to the request arrives (everything
// before it, progress and server-to-client requests, is delivered in order), and if the
// stream ends early with an event id it is resumed with GET and Last-Event-ID, as the
// 2025-11-25 revision lets servers do. StartStream opens the GET stream on which the
// backend sends messages outside any request.
//
// The Mcp-Session-Id the backend assigns in its reply to initialize is sent on every
// later request. When the backend answers 404 to it (it restarted and forgot the
// session), the Conn replays the recorded initialize under a private id, then the
// initialized notification, retries the message that got the 404 (the backend did not
// process it), and reports EventRenewed.
type HTTPConn struct {
	httpBase
	pipe *pipeline // nil unless opts.Pipeline > 0
	uri  *fasthttp.URI

	session atomic.Pointer[session] // nil: no session (before initialize, or stateless)
	version atomic.Pointer[string]
	// renewing is a one-slot semaphore: one renewal at a time, the others wait (within
	// their ctx) and retry on its session.
	renewing chan struct{}

	streamOn bool           // under closeMu
	wg       sync.WaitGroup // the GET stream goroutine

	posts sync.Pool // *postRequest: a POST's request, its headers kept (acquirePost)
}

// session is one upstream session; its pointer identity tells renewals apart.
type session struct{ id string }

// DialHTTP makes a Streamable HTTP connection to the MCP endpoint at rawURL. It performs
// no I/O (the first Send, normally initialize, connects), so ctx is only checked; it
// fails on a malformed URL or options.
func DialHTTP(ctx context.Context, rawURL string, opts HTTPOptions, sink Sink) (*HTTPConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &HTTPConn{renewing: make(chan struct{}, 1)}
	u, addr, err := c.setup("DialHTTP", rawURL, opts, sink)
	if err != nil {
		return nil, err
	}
	c.uri = fasthttp.AcquireURI()
	if err := parseURI(c.uri, u); err != nil {
		return nil, err
	}
	c.hc = newHostClient(addr, u.Scheme == "https", &c.opts, &c.conns)
	if c.opts.Pipeline > 0 {
		c.pipe = newPipeline(addr, u.Scheme == "https", &c.opts, &c.conns)
	}
	return c, nil
}

// newHostClient builds the connection pool for one backend address.
func newHostClient(addr string, tls bool, o *HTTPOptions, conns *connSet) *fasthttp.HostClient {
	return &fasthttp.HostClient{
		Addr:                addr,
		Name:                userAgent,
		IsTLS:               tls,
		TLSConfig:           o.TLSConfig,
		DialTimeout:         conns.dialer(o.DialTimeout),
		MaxConns:            o.MaxConns,
		MaxConnWaitTimeout:  o.ConnWait,
		MaxIdleConnDuration: o.IdleTimeout,
		// POSTs are retried only when nothing was sent (the idle probe found the
		// connection closed): whether a message may be sent twice is otherwise an MCP
		// question, answered by Send with RetrySafe. GETs and DELETEs are retried as
		// fasthttp retries idempotent requests. exchangeOn, the pool's exchange for
		// everything but the legacy event stream, applies the same rule.
		RetryIfErr: func(req *fasthttp.Request, _ int, err error) (bool, bool) {
			return false, mayResend(req, err)
		},
		DisablePathNormalizing: true,
	}
}

// userAgent names the router in its requests to backends.
const userAgent = "mcprouter"

// errSessionGone is post's report of a 404 on our session; Send turns it into a renewal.
var errSessionGone = fmt.Errorf("%w: HTTP 404 on the session", ErrSessionExpired)

// Send implements Conn.
func (c *HTTPConn) Send(ctx context.Context, msg []byte) error {
	if c.ctx.Err() != nil {
		return deadErr(c.Err())
	}
	var m codec.Message
	mp := c.hs.scan(msg, &m)
	isInit := mp != nil && m.Kind == codec.KindRequest && isMethod(mp, "initialize")
	for attempt := 0; ; attempt++ {
		var sess *session
		if !isInit { // an initialize starts a new session: it is sent without one
			sess = c.session.Load()
		}
		err := c.post(ctx, msg, mp, sess)
		switch {
		case err == nil, err == ErrDetached:
			return err
		case errors.Is(err, errSessionGone) && sess != nil && attempt == 0:
			if rerr := c.renew(ctx, sess); rerr != nil {
				return rerr
			}
			if mp != nil && isMethod(mp, "notifications/initialized") {
				return nil // the renewal sent it already
			}
			continue // the backend did not process msg: sending it again is safe
		case errors.Is(err, errStaleConn) && attempt < maxStaleRetries:
			continue // nothing was sent
		case attempt == 0 && retryAuth(err):
			continue // a 401, and a new token to try: the backend did not process msg
		case attempt == 0 && mp != nil && isStaleConn(err) && c.opts.retrySafe(&m):
			continue
		case c.ctx.Err() != nil:
			return deadErr(c.Err())
		}
		return err
	}
}

// maxStaleRetries bounds the attempts of a message that keeps meeting pooled
// connections closed by the backend (exchangeOn already tried a few each time).
const maxStaleRetries = 3

// isStaleConn reports an exchange that failed before any response byte, in the way a
// pooled connection that the backend closed fails.
func isStaleConn(err error) bool {
	return errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// post sends msg on sess and handles the reply. m is msg's scan, nil when it could not
// be scanned (a batch).
func (c *HTTPConn) post(ctx context.Context, msg []byte, m *codec.Message, sess *session) error {
	isInit := m != nil && m.Kind == codec.KindRequest && isMethod(m, "initialize")
	pr, err := c.acquirePost(ctx, sess, !isInit)
	if err != nil {
		return err
	}
	defer c.releasePost(pr)
	req := &pr.req
	ex, status, err := c.postMessage(ctx, req, msg, m)
	if err != nil {
		return err
	}
	defer ex.done()
	resp, body := ex.resp, ex.body
	if isInit && status/100 == 2 {
		if id := resp.Header.Peek("Mcp-Session-Id"); len(id) > 0 {
			c.session.Store(&session{id: string(id)})
		} else {
			c.session.Store(nil) // a stateless backend
		}
	}
	switch {
	case status == fasthttp.StatusAccepted || status == fasthttp.StatusNoContent:
		return nil
	case status/100 == 2:
		if bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) {
			if m != nil && m.Kind == codec.KindRequest {
				if d := detacherOf(ctx); d != nil && c.detach(ctx, ex, m.ID, sess, d) {
					ex.handed = true
					return ErrDetached
				}
			}
			return c.readReply(ctx, body, m, sess)
		}
		return c.readJSONReply(ctx, resp, body, awaitedID(m))
	case status == fasthttp.StatusNotFound && sess != nil:
		return errSessionGone
	}
	return c.statusErr(req, resp, body, "POST")
}

// exchange is a POST's response, from the pool or from a pipelined connection, valid
// until release. body is the body stream, nil when resp holds the body whole.
type exchange struct {
	resp *fasthttp.Response
	body io.Reader
	call *pipeCall // nil: resp came from the pool
	// handed: the reading of the reply went to a goroutine of its own (a Detacher's),
	// which releases the exchange when done.
	handed bool
}

// done releases e unless it was handed on.
func (e *exchange) done() {
	if !e.handed {
		e.release()
	}
}

// setPostHeaders sets what every POST of a message carries besides the session's,
// the revision's and the credentials' (prepare).
func setPostHeaders(h *fasthttp.RequestHeader) {
	h.SetContentType("application/json")
	h.Set(fasthttp.HeaderAccept, "application/json, text/event-stream")
}

func (e *exchange) release() {
	if e.call != nil {
		e.call.release()
		return
	}
	_ = e.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(e.resp)
}

// postMessage POSTs msg (scanned into m, nil for a batch) with req, which prepare and
// setPostHeaders have filled in (the POST of one message, with or without a session:
// HTTPConn.post and StatelessConn.post): it adds the body, sends it (roundTrip), and
// returns the exchange, which the caller releases with done, and the response's
// status.
func (c *HTTPConn) postMessage(ctx context.Context, req *fasthttp.Request, msg []byte, m *codec.Message) (exchange, int, error) {
	req.SetBodyRaw(msg)
	ex, err := c.roundTrip(ctx, req, c.pipe.kindOf(m))
	if err != nil {
		return ex, 0, err
	}
	return ex, ex.resp.StatusCode(), nil
}

// postRequest is the request of an HTTPConn's POST, pooled by the conn with its
// headers. Why: every POST of a session's messages carries the same URI, method and
// headers (the configured ones, Content-Type, Accept, the session's id and the
// revision), and writing them anew (prepare, setPostHeaders: a URI copy and half a
// dozen Header.Set, each a key normalisation and a search) was a measurable part of a
// forwarded call's CPU. A request keeps them from one POST to the next when nothing in
// them came from its context (trace headers) or from credentials (whose values may
// change at any time), and is prepared again when the session or the revision changed.
type postRequest struct {
	req     fasthttp.Request
	sess    *session // what the kept headers were prepared for
	version *string
	kept    bool // req's headers are prepare's and setPostHeaders' for sess and version
}

// acquirePost returns a POST's request with the headers prepare and setPostHeaders
// give it for sess (withVersion: with the revision), and no body; releasePost gives it
// back.
func (c *HTTPConn) acquirePost(ctx context.Context, sess *session, withVersion bool) (*postRequest, error) {
	pr, _ := c.posts.Get().(*postRequest)
	if pr == nil {
		pr = new(postRequest)
	}
	var v *string
	if withVersion {
		v = c.version.Load() // before prepare's: a newer one there only prepares again later
	}
	plain := len(c.opts.Credentials) == 0 && !hasTraceHeaders(ctx)
	if plain && pr.kept && pr.sess == sess && pr.version == v {
		return pr, nil
	}
	pr.req.Reset()
	pr.kept = false
	if err := c.prepare(ctx, &pr.req, fasthttp.MethodPost, sess, withVersion); err != nil {
		c.posts.Put(pr)
		return nil, err
	}
	setPostHeaders(&pr.req.Header)
	pr.kept, pr.sess, pr.version = plain, sess, v
	return pr, nil
}

// releasePost gives pr back to the conn's pool, without its body (the caller's bytes).
func (c *HTTPConn) releasePost(pr *postRequest) {
	pr.req.ResetBody()
	c.posts.Put(pr)
}

// roundTrip sends a POST, a call of the given kind, pipelined when that is on and
// possible (see pipeline.enter and pipeline.do), and counts a call that takes the pool
// under the reason it does (PipeStats; do counts those it pipelines).
func (c *HTTPConn) roundTrip(ctx context.Context, req *fasthttp.Request, kind callKind) (exchange, error) {
	why, try := c.pipe.enter()
	defer c.pipe.leave()
	if try {
		pc, err := c.pipe.do(ctx, req, kind)
		if err == nil {
			return exchange{resp: &pc.resp, body: pc.bodyStream(), call: pc}, nil
		}
		var pooled bool
		if why, pooled = poolReasonOf(err); !pooled {
			return exchange{}, c.exchangeErr(ctx, err)
		}
	}
	c.opts.PipeStats.pool(why)
	resp := fasthttp.AcquireResponse()
	start := c.pipe.poolStart()
	err := c.doWhole(ctx, req, resp, c.opts.MaxMessage)
	c.pipe.poolDone(kind, start, resp, err)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		return exchange{}, err
	}
	return exchange{resp: resp, body: resp.BodyStream()}, nil
}

// awaitedID is the id of the response that sending m waits for: m's own for a request,
// nil for anything else (a notification, a response, a batch, which m is nil for).
func awaitedID(m *codec.Message) []byte {
	if m != nil && m.Kind == codec.KindRequest {
		return m.ID
	}
	return nil
}

// prepare sets what every request carries. It fails only when the router's
// credentials for the backend cannot be had (a token endpoint that refuses or is down).
func (c *HTTPConn) prepare(ctx context.Context, req *fasthttp.Request, method string, sess *session, withVersion bool) error {
	req.SetURI(c.uri)
	req.Header.SetMethod(method)
	req.Header.SetUserAgent(userAgent) // the pool adds it too, the pipeline does not
	for _, h := range c.headers {
		req.Header.Set(h.name, h.value)
	}
	if err := c.setCredentials(ctx, &req.Header); err != nil {
		return err
	}
	setTraceHeaders(ctx, &req.Header)
	if sess != nil {
		req.Header.Set("Mcp-Session-Id", sess.id)
	}
	if withVersion {
		if v := c.version.Load(); v != nil {
			req.Header.Set("Mcp-Protocol-Version", *v)
		}
	}
	return nil
}

// do runs one exchange with ctx's deadline, its response body streamed (see
// exchangeOn). The request takes no context: cancellation without a deadline is
// observed once the response headers are in (the body readers watch ctx), and Close
// interrupts everything by closing the connections.
func (c *httpBase) do(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response) error {
	return c.doWhole(ctx, req, resp, 0)
}

// doWhole is do, except that a body of at most whole bytes that is already in the read
// buffer when the head has been read is read into resp, not streamed (exchangeOn).
func (c *httpBase) doWhole(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, whole int) error {
	var timeout time.Duration
	dl, ok := ctx.Deadline()
	if ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return ctx.Err()
		}
	}
	if err := liveErr(ctx); err != nil {
		return err
	}
	if err := exchangeOn(c.hc, req, resp, dl, timeout, whole); err != nil {
		return c.exchangeErr(ctx, err)
	}
	return nil
}

// exchangeErr is the error of a failed exchange: the Conn's own end, the caller's, a
// timeout, a connection that closed before any byte of the answer (ErrNoResponse: the
// message was written, so the backend may have processed it; errStaleConn is a write
// that never happened), or err itself, named after the backend.
func (c *httpBase) exchangeErr(ctx context.Context, err error) error {
	switch {
	case c.ctx.Err() != nil:
		return deadErr(c.Err())
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, fasthttp.ErrTimeout):
		return fmt.Errorf("upstream: %s: %w", c.opts.Name, context.DeadlineExceeded)
	case isStaleConn(err) && !errors.Is(err, errStaleConn):
		return fmt.Errorf("%w: %s: %w", ErrNoResponse, c.opts.Name, err)
	}
	return fmt.Errorf("upstream: %s: %w", c.opts.Name, err)
}

// readJSONReply delivers a JSON reply body: one message, or each element of a batch
// reply. body is the body stream, nil when resp holds the body whole; ctx ends a body
// that is still coming (a backend that writes it byte by byte) when the request's time
// is up. want is the id of the request the body answers (nil for none): a body that
// does not carry its response (cut off, not JSON, an answer to another id) is an error,
// so that the request fails now, saying so, instead of at its timeout. Whatever the
// body does carry is delivered: a stray response is the router's to drop.
func (c *HTTPConn) readJSONReply(ctx context.Context, resp *fasthttp.Response, body io.Reader, want []byte) error {
	var b []byte
	if body == nil {
		b = resp.Body()
	} else {
		defer watchBody(ctx, body)()
		bp := getBuf()
		defer putBuf(bp)
		var err error
		b, err = bytesio.AppendAtMost(*bp, body, c.opts.MaxMessage, ErrTooLarge)
		*bp = b
		switch {
		case errors.Is(err, ErrTooLarge):
			return fmt.Errorf("upstream: %s %s: %w", c.opts.Name, tooLargeWhat(c.opts.MaxMessage), ErrTooLarge)
		case err != nil && (ctx.Err() != nil || isTimeout(err)):
			return c.lateErr(ctx)
		case err != nil:
			return fmt.Errorf("upstream: %s: reading the reply: %w", c.opts.Name, err)
		}
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		if want != nil {
			return fmt.Errorf("%w: %s answered a request with an empty body", ErrProtocol, c.opts.Name)
		}
		return nil
	}
	if !complete(b) {
		return fmt.Errorf("%w: %s %s", ErrProtocol, c.opts.Name, invalidWhat)
	}
	answered := false
	if codec.IsBatch(b) {
		var arr [16][]byte
		elems, err := codec.SplitBatch(b, arr[:0])
		if err == nil {
			for _, e := range elems {
				answered = answered || want != nil && bytes.Equal(peekResponseID(e), want)
				deliver(c.sink, &c.wait, e)
			}
			return c.checkAnswered(answered, want, b)
		}
	}
	answered = want != nil && bytes.Equal(peekResponseID(b), want)
	deliver(c.sink, &c.wait, b)
	return c.checkAnswered(answered, want, b)
}

// checkAnswered is the error of a JSON body that did not answer the request want.
func (c *HTTPConn) checkAnswered(answered bool, want, body []byte) error {
	if answered || want == nil {
		return nil
	}
	if codec.IsBatch(body) || body[0] == '{' {
		return fmt.Errorf("%w: %s answered a request with no response to it: %s", ErrProtocol, c.opts.Name, excerpt(body))
	}
	return fmt.Errorf("%w: %s %s", ErrProtocol, c.opts.Name, invalidWhat)
}

// isTimeout reports a read that failed on the connection's deadline, which the client
// sets to the request's: the reply was still coming when the request's time was up.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// lateErr is the error of a reply still being read when the request's time was up (a
// backend writing slowly): the caller's own cancellation when that is what ended it,
// a deadline error otherwise.
func (c *httpBase) lateErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("upstream: %s: the reply was still coming at the deadline: %w", c.opts.Name, context.DeadlineExceeded)
}

// watchBody closes a streamed body when ctx ends, so that a read blocked on a backend
// that stopped writing (or writes a byte at a time) returns; it returns the function
// that stops watching. A pooled exchange's body under a Deadline needs no watch: do
// made its deadline the connection's read deadline, and nothing else ends it early
// but the Conn's Close, which closes the connection.
func watchBody(ctx context.Context, body io.Reader) func() bool {
	rc, _ := body.(fasthttp.ReadCloserWithError)
	if _, piped := body.(*pipeBody); rc == nil || timerless(ctx) && !piped || ctx.Done() == nil {
		return noWatch
	}
	return context.AfterFunc(ctx, func() { _ = rc.CloseWithError(context.Cause(ctx)) })
}

func noWatch() bool { return false }

// statusError builds the error for an unexpected status, with a body excerpt. body is
// the body stream, nil when resp holds the body whole.
func statusError(resp *fasthttp.Response, body io.Reader, method string) *StatusError {
	e := &StatusError{Status: resp.StatusCode(), Method: method}
	if body == nil {
		body = bytes.NewReader(resp.Body())
	}
	var buf [maxExcerpt]byte
	n, _ := io.ReadFull(body, buf[:])
	e.Body = bytes.TrimSpace(append([]byte(nil), buf[:n]...))
	return e
}

// streamState follows one SSE stream across resumptions.
type streamState struct {
	want     []byte // the id of the response the stream exists for; nil: none
	answered bool   // that response arrived
	lastID   []byte // the last event id, for Last-Event-ID
	retry    time.Duration
	events   int // messages delivered, to tell progress from failure
}

// readReply reads the SSE reply to a POST. m is nil for a batch, which is read to the end
// of the stream.
func (c *HTTPConn) readReply(ctx context.Context, body io.Reader, m *codec.Message, sess *session) error {
	st := streamState{want: awaitedID(m)}
	return c.readStream(ctx, body, sess, &st)
}

// detach hands the SSE reply ex to request want to a goroutine of its own, which reads
// it as readReply would and gives the outcome to d (Detacher), and reports true; it
// reports false, and the caller reads the reply itself, once the Conn is closing. Close
// waits for the goroutine with the GET stream's (its closing of the connections ends
// the reading).
func (c *HTTPConn) detach(ctx context.Context, ex exchange, want []byte, sess *session, d Detacher) bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go c.readDetached(ctx, ex, want, sess, d)
	return true
}

func (c *HTTPConn) readDetached(ctx context.Context, ex exchange, want []byte, sess *session, d Detacher) {
	defer c.wg.Done()
	err := c.readStream(ctx, ex.body, sess, &streamState{want: want})
	ex.release()
	d.Detached(err)
}

// readStream reads an SSE reply whose st says what it is for until it is answered, or
// resumes it (resume) when it breaks before.
func (c *HTTPConn) readStream(ctx context.Context, body io.Reader, sess *session, st *streamState) error {
	err := c.readEvents(ctx, body, st)
	switch {
	case st.answered:
		return nil
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrProtocol), errors.Is(err, context.DeadlineExceeded):
		return err // resuming would replay what broke it, or take time there is none of
	case st.want == nil:
		if err == io.EOF {
			return nil
		}
		return fmt.Errorf("upstream: %s: reading the reply stream: %w", c.opts.Name, err)
	case ctx.Err() != nil:
		return ctx.Err()
	case c.ctx.Err() != nil:
		return deadErr(c.Err())
	}
	return c.resume(ctx, sess, st, err)
}

// errLinger ends a stream whose server kept it open after the response.
var errLinger = errors.New("upstream: stream kept open after its response")

// readEvents delivers the messages of one SSE stream until it ends. It returns nil once
// st.want was answered, and otherwise the error that ended the stream (io.EOF for a
// clean end).
func (c *HTTPConn) readEvents(ctx context.Context, body io.Reader, st *streamState) error {
	if body == nil {
		return io.EOF
	}
	defer watchBody(ctx, body)()
	rc, _ := body.(fasthttp.ReadCloserWithError)
	r := newSSEReader(body, c.opts.MaxMessage)
	defer r.release()
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for {
		ev, err := r.next()
		if len(r.lastID) > 0 {
			st.lastID = append(st.lastID[:0], r.lastID...)
		}
		if r.retry > 0 {
			st.retry = time.Duration(r.retry) * time.Millisecond
		}
		if err != nil {
			if st.answered {
				return nil
			}
			switch {
			case errors.Is(err, ErrTooLarge):
				return fmt.Errorf("upstream: %s %s: %w", c.opts.Name, tooLargeWhat(c.opts.MaxMessage), ErrTooLarge)
			case st.want != nil && isTimeout(err):
				return c.lateErr(ctx)
			}
			return err
		}
		if !ev.isMessage() {
			continue
		}
		st.events++
		yes, broken := false, false
		if st.want != nil && !st.answered {
			yes, broken = responseTo(ev.Data, st.want)
		}
		if broken {
			return fmt.Errorf("%w: %s %s", ErrProtocol, c.opts.Name, invalidWhat)
		}
		if yes {
			st.answered = true
			if rc != nil {
				linger = time.AfterFunc(c.opts.Linger, func() { _ = rc.CloseWithError(errLinger) })
			}
			deliver(c.sink, &c.wait, ev.Data)
			continue
		}
		if st.want != nil {
			deliverRelated(c.sink, &c.wait, st.want, ev.Data)
			continue
		}
		deliver(c.sink, &c.wait, ev.Data)
	}
}

// responseTo reports whether msg is the response (result or error) with id want, and
// whether it is that response broken (cut off, not valid JSON): the request will not
// get another.
func responseTo(msg, want []byte) (yes, broken bool) {
	var m codec.Message
	if codec.Scan(msg, &m) != nil {
		return false, bytes.Equal(peekResponseID(msg), want)
	}
	return (m.Kind == codec.KindResult || m.Kind == codec.KindError) && bytes.Equal(m.ID, want), false
}

// resume reconnects to an SSE reply that ended before its response, with GET and
// Last-Event-ID, until the response arrives, ctx ends, or ReconnectAttempts attempts in
// a row bring nothing.
func (c *HTTPConn) resume(ctx context.Context, sess *session, st *streamState, cause error) error {
	if len(st.lastID) == 0 {
		return fmt.Errorf("%w: %s: %w", ErrStreamLost, c.opts.Name, cause)
	}
	bo := backoff{min: c.opts.ReconnectMin, max: c.opts.ReconnectMax}
	for failures := 0; failures < c.opts.ReconnectAttempts; {
		delay := st.retry
		if delay <= 0 || failures > 0 {
			delay = max(delay, bo.next())
		}
		if !ctxtime.Sleep(ctx, delay) {
			return ctx.Err()
		}
		before := st.events
		status, err := c.get(ctx, sess, st)
		switch {
		case st.answered:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case c.ctx.Err() != nil:
			return deadErr(c.Err())
		case status == fasthttp.StatusNotFound, status == fasthttp.StatusMethodNotAllowed,
			status == fasthttp.StatusBadRequest, errors.Is(err, ErrUnauthorized) && !retryAuth(err):
			return fmt.Errorf("%w: %s: resuming: %w", ErrStreamLost, c.opts.Name, err)
		}
		cause = err
		if st.events > before {
			failures = 0
			bo.reset()
		} else {
			failures++
		}
	}
	return fmt.Errorf("%w: %s: %w", ErrStreamLost, c.opts.Name, cause)
}

// get opens a GET stream on sess (resuming after st.lastID if set) and reads it until it
// ends. It returns the HTTP status (0 if there was none) and the error that ended it.
func (c *HTTPConn) get(ctx context.Context, sess *session, st *streamState) (int, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if err := c.prepare(ctx, req, fasthttp.MethodGet, sess, true); err != nil {
		return 0, err
	}
	req.Header.Set(fasthttp.HeaderAccept, "text/event-stream")
	if len(st.lastID) > 0 {
		req.Header.SetBytesV("Last-Event-ID", st.lastID)
	}
	if err := c.do(ctx, req, resp); err != nil {
		return 0, err
	}
	defer resp.CloseBodyStream() //nolint:errcheck // nothing to do about it
	status := resp.StatusCode()
	if status != fasthttp.StatusOK {
		return status, c.statusErr(req, resp, resp.BodyStream(), "GET")
	}
	if !bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) {
		return status, fmt.Errorf("%w: GET stream answered with %q", ErrProtocol, resp.Header.ContentType())
	}
	return status, c.readEvents(ctx, resp.BodyStream(), st)
}

// renew establishes a new session after the backend answered 404 on stale. Concurrent
// callers wait (within waitCtx) for one renewal and then use its session. The renewal
// itself is bounded by InitTimeout, not by the caller's context: it serves every caller.
func (c *HTTPConn) renew(waitCtx context.Context, stale *session) error {
	select {
	case c.renewing <- struct{}{}:
	case <-waitCtx.Done():
		return waitCtx.Err()
	case <-c.done:
		return deadErr(c.Err())
	}
	defer func() { <-c.renewing }()
	if c.session.Load() != stale {
		return nil // renewed meanwhile, or the router initialized again
	}
	if c.ctx.Err() != nil {
		return deadErr(c.Err())
	}
	if c.opts.NoRenew {
		return c.expire(errSessionGone)
	}
	r, ok := c.hs.renewal()
	if !ok {
		return c.expire(fmt.Errorf("%w: no initialize recorded to renew it with", ErrSessionExpired))
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.InitTimeout)
	defer cancel()
	replyCh := c.wait.add(r.id)
	defer c.wait.remove(r.id)
	var m codec.Message
	if err := codec.Scan(r.init, &m); err != nil {
		return c.expire(fmt.Errorf("%w: recorded initialize: %w", ErrSessionExpired, err))
	}
	// A failure to reach the backend is not the end: the stale session stays, and the
	// next message's 404 tries again.
	if err := c.post(ctx, r.init, &m, nil); err != nil {
		c.session.Store(stale)
		return fmt.Errorf("upstream: %s: renewing the session: %w", c.opts.Name, err)
	}
	var reply []byte
	select {
	case reply = <-replyCh:
	case <-ctx.Done():
		c.session.Store(stale)
		return fmt.Errorf("upstream: %s: renewing the session: no reply to initialize: %w", c.opts.Name, ctx.Err())
	}
	if err := r.check(reply); err != nil {
		return c.expire(fmt.Errorf("%w: %w", ErrSessionExpired, err))
	}
	if r.initialized != nil {
		var mi codec.Message
		if err := codec.Scan(r.initialized, &mi); err == nil {
			if err := c.post(ctx, r.initialized, &mi, c.session.Load()); err != nil {
				c.session.Store(stale)
				return fmt.Errorf("upstream: %s: renewing the session: initialized: %w", c.opts.Name, err)
			}
		}
	}
	c.log.Info("upstream session renewed after the backend lost it")
	c.sink.Event(EventRenewed, nil)
	return nil
}

// expire kills the Conn because its session is lost for good, and returns err.
func (c *HTTPConn) expire(err error) error {
	if c.kill(err) {
		c.log.Warn("upstream session lost", "err", err)
		c.sink.Event(EventExpired, err)
	}
	return err
}

// SetProtocolVersion implements Conn.
func (c *HTTPConn) SetProtocolVersion(v string) {
	c.version.Store(&v)
	c.hs.setVersion(v)
}

// SessionID returns the current upstream session id ("" when there is none).
func (c *HTTPConn) SessionID() string {
	if s := c.session.Load(); s != nil {
		return s.id
	}
	return ""
}

// StartStream opens the GET stream on which the backend sends requests and
// notifications outside any request, and keeps it open: it reconnects with backoff and
// Last-Event-ID, and follows session renewals. A backend that answers 405 offers no
// such stream, which is fine. Call it after the initialize handshake; calls after the
// first are no-ops.
func (c *HTTPConn) StartStream() {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed || c.streamOn || c.ctx.Err() != nil {
		return
	}
	c.streamOn = true
	c.wg.Add(1)
	go c.streamLoop()
}

func (c *HTTPConn) streamLoop() {
	defer c.wg.Done()
	bo := backoff{min: c.opts.ReconnectMin, max: c.opts.ReconnectMax}
	var st streamState
	var last *session
	for c.ctx.Err() == nil {
		sess := c.session.Load()
		if sess != last { // a new session: the old stream's event ids mean nothing
			st, last = streamState{}, sess
		}
		before := st.events
		status, err := c.get(c.ctx, sess, &st)
		if c.ctx.Err() != nil {
			return
		}
		switch {
		case status == fasthttp.StatusMethodNotAllowed:
			c.log.Debug("backend offers no GET stream")
			return
		case status == fasthttp.StatusNotFound && sess != nil:
			if rerr := c.renew(c.ctx, sess); rerr == nil {
				continue
			} else if c.ctx.Err() != nil {
				return
			}
		case status == fasthttp.StatusUnauthorized || status == fasthttp.StatusForbidden:
			// The router's credentials were refused: keep trying with backoff, since a
			// rotated secret or a new token can fix it (statusErr logged it).
		case status/100 == 4 && status != fasthttp.StatusRequestTimeout && status != fasthttp.StatusTooManyRequests:
			c.log.Warn("backend refused the GET stream", "err", err)
			return
		}
		if st.events > before {
			bo.reset()
		}
		delay := bo.next()
		if status == fasthttp.StatusOK && err == io.EOF && st.retry > 0 {
			delay = st.retry
		}
		c.log.Debug("GET stream ended; reconnecting", "err", err, "in", delay)
		if !ctxtime.Sleep(c.ctx, delay) {
			return
		}
	}
}

// closeWait bounds how long Close waits for the Conn's goroutines, and for its DELETE
// to reach the backend (a dial).
const closeWait = 5 * time.Second

// deleteAnswerWait bounds how long Close waits for the answer to its DELETE once it has
// a connection to send it on. A backend may hold that answer until the session's calls
// in flight end (the Go SDK's does); the router no longer wants them, and the backend
// ends the session whether or not the router reads the answer. On loopback or a LAN an
// answer that comes at all comes in a fraction of it.
const deleteAnswerWait = 250 * time.Millisecond

// Close implements Conn: it stops the GET stream and every call's reply stream (their
// calls fail with ErrClosed), ends the upstream session with DELETE (a backend that
// answers 405 does not allow that, which is fine) and closes every connection.
//
// The streams are stopped before the DELETE: a backend that answers the DELETE only
// once the session's streams are gone would otherwise hold Close for closeWait while
// the streams, and the calls reading them, waited for the DELETE.
func (c *HTTPConn) Close() error {
	if !c.beginClose() {
		return nil
	}
	sess := c.session.Load()
	alive := c.kill(ErrClosed)
	c.interrupt()
	var err error
	if !ctxtime.WaitGroup(&c.wg, closeWait) {
		err = errors.New("upstream: GET stream did not stop in time")
	}
	if alive && sess != nil {
		err = errors.Join(err, c.deleteSession(sess))
	}
	c.hc.CloseIdleConnections()
	// c.uri is not given back to fasthttp's pool: a Send racing with Close (a listen
	// stream opening as the fleet closes) may still be copying it, and the pool would
	// hand it to another request meanwhile. The collector takes it.
	return err
}

// interrupt closes every connection the Conn has (pipelined, pooled, idle), which ends
// every exchange and stream in progress, and refuses new ones: a Send that waited for
// a free pooled connection (MaxConns) would otherwise get the slot of one closed here,
// dial, and put its message to the backend after Close began, where it held the
// pool's only slot against the DELETE.
func (c *HTTPConn) interrupt() {
	if c.pipe != nil {
		c.pipe.close()
	}
	c.conns.closeAll()
	c.hc.CloseIdleConnections()
}

// deleteSession asks the backend to end sess, on a connection of its own (the Conn's
// are closed): it dials (closeWait), then sends the DELETE and waits for its answer
// (deleteAnswerWait), which only tells whether the backend refused (an unexpected
// status is Close's error).
func (c *HTTPConn) deleteSession(sess *session) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ctx, cancel := context.WithTimeout(context.Background(), closeWait)
	defer cancel()
	if err := c.prepare(ctx, req, fasthttp.MethodDelete, sess, true); err != nil {
		return fmt.Errorf("upstream: %s: DELETE session: %w", c.opts.Name, err)
	}
	// The last request on its connection: Connection: close, which also spares the
	// client an idle-connection cleaner that would outlive Close.
	req.SetConnectionClose()
	var conns connSet
	hc := newHostClient(c.hc.Addr, c.hc.IsTLS, &c.opts, &conns)
	defer conns.closeAll()
	// The connection is acquired first and put back, so that the exchange, which takes
	// it from the pool at once, counts deleteAnswerWait from the sending.
	cc, err := hc.AcquireConn(closeWait, true)
	if err != nil {
		return c.deleteErr(err, false)
	}
	hc.ReleaseConn(cc)
	if err := exchangeOn(hc, req, resp, time.Now().Add(deleteAnswerWait), deleteAnswerWait, 0); err != nil {
		return c.deleteErr(err, true)
	}
	defer resp.CloseBodyStream() //nolint:errcheck // nothing to do about it
	switch s := resp.StatusCode(); {
	case s/100 == 2, s == fasthttp.StatusMethodNotAllowed, s == fasthttp.StatusNotFound:
		return nil
	}
	return c.statusErr(req, resp, resp.BodyStream(), "DELETE")
}

// deleteErr is the error of a DELETE that failed: none when the backend cannot be
// reached (there is nothing left to end), nor when the DELETE was sent (sent: it had a
// connection) and its answer did not come in deleteAnswerWait (the backend ends the
// session when it gets to it).
func (c *HTTPConn) deleteErr(err error, sent bool) error {
	switch {
	case errors.Is(err, ErrBackendDown):
		return nil
	case sent && (errors.Is(err, fasthttp.ErrTimeout) || isTimeout(err)):
		c.log.Debug("DELETE sent; its answer did not come in time", "wait", deleteAnswerWait)
		return nil
	}
	return fmt.Errorf("upstream: %s: DELETE session: %w", c.opts.Name, err)
}
