package server

import (
	"bufio"
	"bytes"
	"errors"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// The 2026-07-28 side of the Streamable HTTP endpoint. A POST that claims the revision is
// answered here, statelessly: no session, JSON for a plain answer, an SSE stream for one
// preceded by notifications (progress, log) or long in coming (so that a client that goes
// away is noticed: its disconnect cancels the request), and for subscriptions/listen. The
// rejections carry the revision's statuses. Everything else goes to the 2025 endpoints.

// maxQueuedEvents bounds the notifications waiting to be written on one response stream;
// a client that does not read them loses its stream (its listen subscription ends).
const maxQueuedEvents = 256

var errStreamGone = errors.New("the response stream is closed or too far behind")

// serveModernHTTP answers ctx when it is a 2026-07-28 request (or a GET/DELETE that
// names the revision, 405), and reports whether it did.
func (s *Server) serveModernHTTP(ctx *fasthttp.RequestCtx, rules *transport.HTTPRules) bool {
	hv := peekHeader(ctx, modern.HeaderProtocolVersion)
	if !ctx.IsPost() {
		if !modern.IsModernVersion(hv) && s.cfg.Eras.legacy() {
			return false
		}
		ctx.Response.Header.Set("Allow", "POST")
		httpError(ctx, fasthttp.StatusMethodNotAllowed, codec.CodeInvalidRequest, "method not allowed: MCP 2026-07-28 has no GET stream and no sessions to delete; POST requests")
		return true
	}
	body := ctx.PostBody()
	var m codec.Message
	if codec.IsBatch(body) || codec.Scan(body, &m) != nil {
		if s.cfg.Eras.legacy() {
			return false // the 2025 endpoint answers malformed bodies and batches
		}
		var ce *codec.Error
		if err := codec.Scan(body, &m); errors.As(err, &ce) {
			httpError(ctx, fasthttp.StatusBadRequest, ce.Code, ce.Error())
		} else {
			httpError(ctx, fasthttp.StatusBadRequest, codec.CodeInvalidRequest, "JSON-RPC batches are not part of MCP 2026-07-28")
		}
		return true
	}
	var meta modern.Meta
	if !s.claimsModern(&m, &meta, hv) {
		return false
	}
	if !rules.Allowed(ctx.Host(), ctx.Request.Header.Peek("Origin")) {
		httpError(ctx, fasthttp.StatusForbidden, codec.CodeInvalidRequest, "host or origin not allowed")
		return true
	}
	if ct := ctx.Request.Header.ContentType(); !bytes.HasPrefix(bytes.ToLower(bytes.TrimSpace(ct)), []byte("application/json")) {
		httpError(ctx, fasthttp.StatusUnsupportedMediaType, codec.CodeInvalidRequest, "Content-Type must be application/json")
		return true
	}
	s.Stats.Messages.Add(1)
	switch m.Kind {
	case codec.KindNotification:
		ctx.SetStatusCode(fasthttp.StatusAccepted) // cancellation is closing the stream
		return true
	case codec.KindRequest:
	default:
		httpError(ctx, fasthttp.StatusBadRequest, codec.CodeInvalidRequest, "a 2026-07-28 client sends no responses: the server sends it no requests")
		return true
	}
	h := modern.Headers{Version: hv, Method: peekHeader(ctx, modern.HeaderMethod), Name: peekHeader(ctx, modern.HeaderName)}
	if rej := s.mod.checker.Check(&m, &meta, &h); !rej.OK() {
		ctx.SetStatusCode(rej.Status)
		ctx.SetContentType("application/json")
		ctx.SetBody(rej.AppendError(ctx.Response.Body()[:0], m.ID, s.mod.checker.Supported))
		return true
	}
	sess := s.requestSession(&meta)
	hx := getExchange()
	s.serveModern(&m, &meta, sess, hx)
	s.awaitHTTP(ctx, hx, sess, m.ID)
	return true
}

// peekHeader returns a header's value, nil when it is absent or empty.
func peekHeader(ctx *fasthttp.RequestCtx, name string) []byte {
	if v := ctx.Request.Header.Peek(name); len(v) > 0 {
		return v
	}
	return nil
}

// httpError answers with a status and a JSON-RPC error without an id.
func httpError(ctx *fasthttp.RequestCtx, status, code int, msg string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(codec.AppendError(ctx.Response.Body()[:0], nil, code, msg, nil))
}

// httpExchange is the Responder of one 2026-07-28 POST: what the handlers produce is
// queued, and the request's goroutine writes it out as JSON or as a stream.
type httpExchange struct {
	mu       sync.Mutex
	events   [][]byte // notifications not yet written
	final    []byte   // the response; nil with finished set: ended without one
	finished bool
	gone     bool // the client went away: Send fails
	wake     chan struct{}
	timer    *time.Timer
	buf      []byte // holds final, kept with the exchange in the pool
}

// Exchanges answered at once (the common case: nothing streamed, nobody holds them after
// the response) go back to a pool with their channel, timer and buffer.
var exchangePool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &httpExchange{wake: make(chan struct{}, 1), timer: t}
}}

func getExchange() *httpExchange { return exchangePool.Get().(*httpExchange) }

// putExchange recycles an exchange that ended as a lone JSON answer, its body already
// copied out.
func putExchange(x *httpExchange) {
	if cap(x.buf) > maxPooledBuf {
		x.buf = nil
	}
	x.events, x.final, x.finished, x.gone = nil, nil, false, false
	select {
	case <-x.wake:
	default:
	}
	exchangePool.Put(x)
}

func (x *httpExchange) signal() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

func (x *httpExchange) end(msg []byte) {
	x.mu.Lock()
	if x.finished { // a second end breaks the Responder contract: ignored
		x.mu.Unlock()
		return
	}
	x.finished = true
	if msg != nil {
		x.buf = append(x.buf[:0], msg...)
		x.final = x.buf
	}
	x.mu.Unlock()
	x.signal()
}

func (x *httpExchange) Reply(msg []byte) { x.end(msg) }
func (x *httpExchange) Done()            { x.end(nil) }

func (x *httpExchange) Send(msg []byte) error {
	x.mu.Lock()
	if x.finished || x.gone || len(x.events) >= maxQueuedEvents {
		x.mu.Unlock()
		return errStreamGone
	}
	x.events = append(x.events, append([]byte(nil), msg...))
	x.mu.Unlock()
	x.signal()
	return nil
}

// take returns what is queued and whether the exchange has ended.
func (x *httpExchange) take() (events [][]byte, final []byte, finished bool) {
	x.mu.Lock()
	events, x.events = x.events, nil
	final, finished = x.final, x.finished
	x.mu.Unlock()
	return events, final, finished
}

// awaitHTTP waits for the answer: a lone response within KeepAlive goes out as JSON;
// otherwise the answer becomes an SSE stream.
func (s *Server) awaitHTTP(ctx *fasthttp.RequestCtx, x *httpExchange, sess *Session, id []byte) {
	x.timer.Reset(s.cfg.KeepAlive)
	select {
	case <-x.wake:
	case <-x.timer.C:
	}
	if !x.timer.Stop() {
		select { // a timer that fired must not wake the exchange's next use
		case <-x.timer.C:
		default:
		}
	}
	x.mu.Lock()
	lone := x.finished && len(x.events) == 0
	final := x.final
	x.mu.Unlock()
	if lone {
		if final == nil {
			ctx.SetStatusCode(fasthttp.StatusAccepted)
		} else {
			ctx.SetStatusCode(statusOf(final))
			ctx.SetContentType("application/json")
			ctx.SetBody(final)
		}
		putExchange(x)
		return
	}
	id = append([]byte(nil), id...) // the request's body goes away before the stream ends
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.Response.Header.Set("X-Accel-Buffering", "no")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) { s.stream(w, x, sess, id) })
}

// stream writes the exchange as SSE events until its response; a failed write (the
// client went away) or the server's shutdown cancels the request.
func (s *Server) stream(w *bufio.Writer, x *httpExchange, sess *Session, id []byte) {
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		events, final, finished := x.take()
		for _, e := range events {
			writeEvent(w, e)
		}
		if finished {
			if final != nil {
				writeEvent(w, final)
			}
			w.Flush()
			return
		}
		if w.Flush() != nil {
			s.abandonHTTP(x, sess, id)
			return
		}
		select {
		case <-x.wake:
		case <-tick.C:
			w.WriteString(":\n\n") // a comment: the keep-alive that also finds a gone client
		case <-s.stop:
			s.abandonHTTP(x, sess, id)
			return
		}
	}
}

// abandonHTTP cancels the request of a stream that ended without its response.
func (s *Server) abandonHTTP(x *httpExchange, sess *Session, id []byte) {
	x.mu.Lock()
	x.gone = true
	x.mu.Unlock()
	s.cancelRequest(sess, id)
}

func writeEvent(w *bufio.Writer, msg []byte) {
	w.WriteString("event: message\ndata: ")
	w.Write(msg)
	w.WriteString("\n\n")
}

// statusOf is the HTTP status of a 2026-07-28 answer (modern.HTTPStatus).
func statusOf(resp []byte) int {
	var m codec.Message
	if codec.Scan(resp, &m) != nil || m.Kind != codec.KindError {
		return fasthttp.StatusOK
	}
	return modern.HTTPStatus(modern.ErrorCode(m.Error))
}

// refuseLegacy answers what a 2026-07-28-only server gets from a 2025 client: the
// revision asks such a server to name its versions.
func (s *Server) refuseLegacy(ctx *fasthttp.RequestCtx) {
	msg := "this server speaks MCP 2026-07-28 only: POST " + PathMCP + " with MCP-Protocol-Version: 2026-07-28 and _meta " + modern.KeyProtocolVersion
	switch string(ctx.Path()) {
	case PathMCP:
		if !ctx.IsPost() {
			ctx.Response.Header.Set("Allow", "POST")
			httpError(ctx, fasthttp.StatusMethodNotAllowed, codec.CodeInvalidRequest, msg)
			return
		}
		httpError(ctx, fasthttp.StatusBadRequest, codec.CodeInvalidParams, msg)
	default:
		httpError(ctx, fasthttp.StatusNotFound, codec.CodeInvalidRequest, msg)
	}
}
