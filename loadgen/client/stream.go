package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// getStream is a Streamable HTTP session's standalone GET stream. It reconnects with
// Last-Event-ID when the server ends it (servers of 2025-11-25 may close streams and
// ask clients to poll with retry:), and routes what arrives through a mux.
type getStream struct {
	s      *httpSession
	mux    *mux
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	lastID []byte
	retry  time.Duration
}

// streamReadBuf is the SSE reader's buffer of a held stream: it bounds one read, not an
// event, and a load generator holding 100,000 idle streams holds 100,000 of them. Over
// plain HTTP it is a held stream's only buffer (a chunked body is decoded in it, see
// chunkedBody): one read of the connection brings in up to this much, and an idle
// stream's updates are short.
const streamReadBuf = 512

// maxStreamFailures bounds consecutive failed reconnects before a stream gives up.
const maxStreamFailures = 10

// openStream opens the GET stream and returns once the server has accepted it (so that
// a subscription made afterwards cannot miss its first notification). pre, if not nil,
// goes before the GET on its connection (see preamble).
func openStream(s *httpSession, deadline time.Time, pre *preamble) (*getStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &getStream{s: s, ctx: ctx, cancel: cancel, done: make(chan struct{}), retry: time.Second}
	g.mux = newMux(s.index, s.d.o.OnNotification)
	g.mux.send = newAnswerer(func(msg []byte) { s.post(msg, time.Now().Add(10*time.Second)) })
	c, err := g.connect(deadline, pre)
	if err != nil {
		cancel()
		return nil, err
	}
	go g.run(c)
	return g, nil
}

// conn is one connection of the stream: its body and the cancel of its context.
type conn struct {
	body   io.ReadCloser
	cancel context.CancelFunc
}

func (c conn) close() {
	c.body.Close()
	c.cancel()
}

// noCancel is the cancel of a connection that has no context of its own.
func noCancel() {}

// connect opens one connection of the stream: over plain HTTP a bare connection
// (connectRaw), over HTTPS through net/http (connectTLS). pre, if not nil, goes before
// the GET on a plain-HTTP connection, and its answers are judged (pre.check) before the
// GET's.
func (g *getStream) connect(deadline time.Time, pre *preamble) (conn, error) {
	ep, at := g.s.instance()
	var c conn
	var status int
	var err error
	if ep.hc.IsTLS {
		c, status, err = g.connectTLS(ep, deadline)
	} else {
		c, status, err = g.connectRaw(ep, deadline, pre)
	}
	if err != nil {
		var e *Error
		switch {
		case errors.As(err, &e):
			return conn{}, err // the preamble's verdict
		case g.ctx.Err() == nil && (isDeadline(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			return conn{}, &Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "GET stream"}
		case unanswered(err):
			g.s.failover(at) // the next attempt resumes on the next instance
		}
		return conn{}, transportErr("GET stream", err)
	}
	switch {
	case status == http.StatusMethodNotAllowed:
		c.close()
		return conn{}, &Error{Class: ClassHTTP, Code: status, Msg: "GET stream", Err: ErrStreamUnsupported}
	case status != http.StatusOK:
		c.close()
		return conn{}, &Error{Class: ClassHTTP, Code: status, Msg: "GET stream"}
	}
	return c, nil
}

// connectRaw sends the GET (after pre's requests, if any) over a connection of its own
// (Dialer.pipelined) and returns the stream with the status of its answer.
func (g *getStream) connectRaw(ep instance, deadline time.Time, pre *preamble) (conn, int, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(ep.url)
	req.Header.Set(fasthttp.HeaderAccept, sse.ContentType)
	g.s.setHeaders(&req.Header)
	if len(g.lastID) > 0 {
		req.Header.SetBytesV(sse.HeaderLastEventID, g.lastID)
	}
	if pre == nil {
		pre = &noPreamble
	}
	body, err := g.s.d.pipelined(g.ctx, ep.hc.Addr, deadline, pre.reqs, pre.resps, req, &resp.Header)
	if err != nil {
		return conn{}, 0, err
	}
	c := conn{body: body, cancel: noCancel}
	if len(pre.resps) > 0 {
		if err := pre.check(); err != nil {
			c.close()
			return conn{}, 0, err
		}
	}
	return c, resp.StatusCode(), nil
}

// noPreamble is the preamble of a GET alone.
var noPreamble preamble

// connectTLS sends the GET through net/http (Dialer.doStream).
func (g *getStream) connectTLS(ep instance, deadline time.Time) (conn, int, error) {
	// The deadline bounds the wait for the response headers only; the body is read for
	// as long as the session lives, so the request context cannot carry the deadline.
	ctx, cancel := context.WithCancel(g.ctx)
	timer := time.AfterFunc(time.Until(deadline), cancel)
	fail := func(err error) (conn, int, error) {
		timer.Stop()
		cancel()
		return conn{}, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.url, nil)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Accept", sse.ContentType)
	for k, v := range g.s.d.o.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(hdrSessionID, g.s.sessionID)
	if g.s.version != "" {
		req.Header.Set(hdrProtocol, g.s.version)
	}
	if len(g.lastID) > 0 {
		req.Header.Set(sse.HeaderLastEventID, string(g.lastID))
	}
	resp, err := g.s.d.doStream(req)
	if !timer.Stop() && err == nil {
		resp.Body.Close()
		err = context.DeadlineExceeded
	}
	if err != nil {
		return fail(err)
	}
	return conn{body: resp.Body, cancel: cancel}, resp.StatusCode, nil
}

// run reads events until the session closes, reconnecting as the server asks.
func (g *getStream) run(c conn) {
	defer close(g.done)
	rd := sse.NewReaderSize(c.body, streamReadBuf, g.s.d.o.MaxMessage)
	failures := 0
	for {
		err := g.read(rd)
		c.close()
		g.lastID = append(g.lastID[:0], rd.LastEventID()...)
		if g.ctx.Err() != nil {
			g.mux.fail(transportErr("stream closed", ErrClosed))
			return
		}
		var e *Error
		if errors.As(err, &e) && e.Class == ClassProtocol {
			g.mux.fail(e)
			return
		}
		delay := g.retry
		for {
			if !ctxtime.Sleep(g.ctx, delay) {
				return
			}
			c, err = g.connect(time.Now().Add(30*time.Second), nil)
			if err == nil {
				failures = 0
				break
			}
			if failures++; failures >= maxStreamFailures || errors.Is(err, ErrStreamUnsupported) {
				g.mux.fail(transportErr("GET stream lost", err))
				return
			}
			// An instance that did not answer moved the session on: the next one is
			// tried at once, each once, before waiting the server's retry again.
			delay = g.retry
			if e, ok := err.(*Error); ok && e.Class == ClassTransport && unanswered(e.Err) && failures < len(g.s.insts) {
				delay = 0
			}
		}
		rd.Reset(c.body)
	}
}

// read consumes one connection's events.
func (g *getStream) read(rd *sse.Reader) error {
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, sse.ErrEventTooLarge) {
				return protocolErr("stream event too large")
			}
			return err
		}
		at := time.Now()
		if ms := rd.Retry(); ms >= 0 {
			g.retry = time.Duration(ms) * time.Millisecond
		}
		if len(ev.Data) == 0 || !isMessage(ev) {
			continue
		}
		g.mux.deliver(ev.Data, at)
	}
}

// isMessage reports whether ev has the default event type, "message": the only type
// that carries JSON-RPC messages on an MCP stream (the parser leaves the type empty
// when the stream names none).
func isMessage(ev sse.Event) bool {
	return len(ev.Event) == 0 || string(ev.Event) == "message"
}

// eventType returns ev's event type as error messages show it: "message" when the
// stream named none.
func eventType(ev sse.Event) string {
	if len(ev.Event) == 0 {
		return "message"
	}
	return string(ev.Event)
}

func (g *getStream) close() {
	g.cancel()
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
	}
}
