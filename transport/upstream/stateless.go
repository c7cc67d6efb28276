package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/bytesio"
	"github.com/mcprouter/mcprouter/router/modern"
)

// StatelessConn speaks MCP 2026-07-28 to a Streamable HTTP backend: no upstream
// session, no GET stream, no handshake to replay. Every message is its own POST
// carrying the revision's headers, MCP-Protocol-Version, Mcp-Method and (for
// tools/call, resources/read and prompts/get) Mcp-Name, derived from the body, so that
// a name the router rewrote is mirrored as sent. The body itself must already carry its
// per-request _meta: that is the router's business, not the transport's.
//
// It shares its HTTPConn's pool, credentials, options and Sink (Stateless builds it),
// so that probing a backend's era costs no second connection: the router sends
// server/discover through the StatelessConn and, when the backend turns out to speak
// only the 2025 revisions, initializes the HTTPConn it came from instead.
//
// Replies arrive as with HTTPConn (a JSON body, or an SSE stream scoped to the request,
// delivered to the Sink before Send returns), with two differences the revision makes:
// a stream that ends before its response is lost, not resumed (2026-07-28 has no
// Last-Event-ID), and a 4xx whose body is the JSON-RPC error answering the request
// (-32022 unsupported version, -32020 header mismatch, -32601 on a 404...) is that
// request's answer, delivered like any other. Cancelling Send's ctx closes the
// request's stream, which the revision defines as cancelling the request.
type StatelessConn struct {
	h       *HTTPConn
	version atomic.Pointer[string]
}

// Stateless returns the Conn through which conn's backend is used statelessly
// (2026-07-28): a StatelessConn over an HTTPConn's pool; conn itself for transports
// whose messages need nothing beyond their body (stdio, NATS); ok is false for the
// legacy HTTP+SSE transport, which exists only in the 2024-11-05 revision.
func Stateless(conn Conn) (c Conn, ok bool) {
	switch t := conn.(type) {
	case *HTTPConn:
		s := &StatelessConn{h: t}
		v := modern.Version
		s.version.Store(&v)
		return s, true
	case *StatelessConn:
		return t, true
	case *SSEConn:
		return nil, false
	}
	return conn, true
}

// CancelsByClosing reports that a request on this Conn is cancelled by cancelling the
// ctx of its Send (closing its stream), never by a notifications/cancelled, which
// 2026-07-28 does not define over Streamable HTTP.
func (c *StatelessConn) CancelsByClosing() bool { return true }

// SetProtocolVersion implements Conn: v is sent as MCP-Protocol-Version (default
// 2026-07-28). It must match the version in each body's _meta.
func (c *StatelessConn) SetProtocolVersion(v string) { c.version.Store(&v) }

// Close implements Conn: it closes the HTTPConn it shares (with no session, nothing is
// DELETEd).
func (c *StatelessConn) Close() error { return c.h.Close() }

// Done implements Conn.
func (c *StatelessConn) Done() <-chan struct{} { return c.h.Done() }

// Err implements Conn.
func (c *StatelessConn) Err() error { return c.h.Err() }

// Send implements Conn. msg must be one request or notification (the revision has no
// batches); a request's reply has been delivered to the Sink when Send returns nil.
func (c *StatelessConn) Send(ctx context.Context, msg []byte) error {
	h := c.h
	if h.ctx.Err() != nil {
		return deadErr(h.Err())
	}
	var m codec.Message
	if err := codec.Scan(msg, &m); err != nil {
		return fmt.Errorf("%w: %s: 2026-07-28 carries one message per POST: %w", ErrProtocol, h.opts.Name, err)
	}
	for attempt := 0; ; attempt++ {
		err := c.post(ctx, msg, &m)
		switch {
		case err == nil, err == ErrDetached:
			return err
		case errors.Is(err, errStaleConn) && attempt < maxStaleRetries:
			continue // nothing was sent
		case attempt == 0 && retryAuth(err):
			continue // a 401, and a new token to try: the backend did not process msg
		case attempt == 0 && isStaleConn(err) && h.opts.retrySafe(&m):
			continue
		case h.ctx.Err() != nil:
			return deadErr(h.Err())
		}
		return err
	}
}

// post sends msg (scanned into m) and handles the reply.
func (c *StatelessConn) post(ctx context.Context, msg []byte, m *codec.Message) error {
	h := c.h
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	if err := h.prepare(ctx, req, fasthttp.MethodPost, nil, false); err != nil {
		return err
	}
	req.Header.Set(modern.HeaderProtocolVersion, *c.version.Load())
	setModernHeaders(&req.Header, m)
	setParamHeaders(ctx, &req.Header)
	setPostHeaders(&req.Header)
	ex, status, err := h.postMessage(ctx, req, msg, m)
	if err != nil {
		return err
	}
	defer ex.done()
	resp, body := ex.resp, ex.body
	switch {
	case status == fasthttp.StatusAccepted || status == fasthttp.StatusNoContent:
		return nil
	case status/100 == 2:
		if bytes.HasPrefix(resp.Header.ContentType(), []byte("text/event-stream")) {
			if d := detacherOf(ctx); d != nil && m.Kind == codec.KindRequest && c.detach(ctx, ex, m, d) {
				ex.handed = true
				return ErrDetached
			}
			return c.readStream(ctx, body, m)
		}
		return h.readJSONReply(ctx, resp, body, awaitedID(m))
	case status/100 == 4 && m.Kind == codec.KindRequest &&
		bytes.HasPrefix(resp.Header.ContentType(), []byte("application/json")):
		return c.readErrorBody(req, resp, body, m)
	}
	return h.statusErr(req, resp, body, "POST")
}

// detach hands the SSE reply ex to request m to a goroutine of its own, as
// HTTPConn.detach does (Detacher): it reads it as readStream would and gives the outcome
// to d. It reports false, and the caller reads the reply itself, once the Conn is
// closing.
func (c *StatelessConn) detach(ctx context.Context, ex exchange, m *codec.Message, d Detacher) bool {
	h := c.h
	h.closeMu.Lock()
	defer h.closeMu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	go func(m codec.Message) {
		defer h.wg.Done()
		err := c.readStream(ctx, ex.body, &m)
		ex.release()
		d.Detached(err)
	}(*m)
	return true
}

// readStream reads the SSE stream scoped to request m until its response; the revision
// offers no way to resume one that ends early.
func (c *StatelessConn) readStream(ctx context.Context, body io.Reader, m *codec.Message) error {
	h := c.h
	st := streamState{want: awaitedID(m)}
	err := h.readEvents(ctx, body, &st)
	switch {
	case st.answered:
		return nil
	case st.want == nil && (err == nil || err == io.EOF):
		return nil
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrProtocol), errors.Is(err, context.DeadlineExceeded):
		return err // the reply was broken or late: readEvents said which
	case ctx.Err() != nil:
		return ctx.Err()
	case h.ctx.Err() != nil:
		return deadErr(h.Err())
	}
	if err == nil {
		err = io.EOF
	}
	return fmt.Errorf("%w: %s: %w", ErrStreamLost, h.opts.Name, err)
}

// readErrorBody handles a 4xx with a JSON body: when it is the JSON-RPC error
// answering m, the revision's way of refusing a request on HTTP, it is delivered as the
// answer; anything else is an unexpected status.
func (c *StatelessConn) readErrorBody(req *fasthttp.Request, resp *fasthttp.Response, body io.Reader, m *codec.Message) error {
	h := c.h
	var b []byte
	if body == nil {
		b = resp.Body()
	} else {
		bp := getBuf()
		defer putBuf(bp)
		var err error
		b, err = bytesio.AppendAtMost(*bp, body, h.opts.MaxMessage, ErrTooLarge)
		*bp = b
		if err != nil {
			return fmt.Errorf("upstream: %s: reading the error reply: %w", h.opts.Name, err)
		}
	}
	b = bytes.TrimSpace(b)
	var r codec.Message
	if codec.Scan(b, &r) == nil && r.Kind == codec.KindError && bytes.Equal(r.ID, m.ID) {
		deliver(h.sink, &h.wait, b)
		return nil
	}
	return h.statusErr(req, resp, bytes.NewReader(b), "POST")
}

// setModernHeaders sets Mcp-Method and, for the methods whose body names a tool,
// prompt or resource, Mcp-Name, in the revision's value encoding. Both come from the
// body as it is sent, so they always agree with it.
func setModernHeaders(hd *fasthttp.RequestHeader, m *codec.Message) {
	if m.Kind != codec.KindRequest && m.Kind != codec.KindNotification {
		return
	}
	var mb, nb [128]byte
	method := m.Method
	if m.Flags&codec.MethodEscaped != 0 {
		method, _ = codec.Unquote(mb[:0], m.Method)
	}
	hd.SetBytesV(modern.HeaderMethod, method)
	def := modern.LookupMethod(method)
	if def == nil {
		return
	}
	var raw []byte
	var escaped bool
	switch def.NameFrom {
	case modern.NameParam:
		raw, escaped = m.Name, m.Flags&codec.NameEscaped != 0
	case modern.NameURI:
		raw, escaped = m.URI, m.Flags&codec.URIEscaped != 0
	default:
		return
	}
	if raw == nil {
		return // the backend judges a request without the member
	}
	name := raw
	if escaped {
		var err error
		if name, err = codec.Unquote(nb[:0], raw); err != nil {
			return
		}
	}
	var vb [160]byte
	hd.SetBytesV(modern.HeaderName, modern.AppendHeaderValue(vb[:0], name))
}
