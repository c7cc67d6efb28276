package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

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
// a subscription made afterwards cannot miss its first notification).
func openStream(s *httpSession, deadline time.Time) (*getStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &getStream{s: s, ctx: ctx, cancel: cancel, done: make(chan struct{}), retry: time.Second}
	g.mux = newMux(s.index, s.d.o.OnNotification)
	g.mux.send = newAnswerer(func(msg []byte) { s.post(msg, time.Now().Add(10*time.Second)) })
	c, err := g.connect(deadline)
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

func (g *getStream) connect(deadline time.Time) (conn, error) {
	// The deadline bounds the wait for the response headers only; the body is read for
	// as long as the session lives, so the request context cannot carry the deadline.
	ctx, cancel := context.WithCancel(g.ctx)
	timer := time.AfterFunc(time.Until(deadline), cancel)
	fail := func(err error) (conn, error) {
		timer.Stop()
		cancel()
		return conn{}, err
	}
	ep, at := g.s.instance()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.url, nil)
	if err != nil {
		return fail(transportErr("GET stream", err))
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
		if g.ctx.Err() == nil && (isDeadline(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return fail(&Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "GET stream"})
		}
		if unanswered(err) {
			g.s.failover(at) // the next attempt resumes on the next instance
		}
		return fail(transportErr("GET stream", err))
	}
	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		resp.Body.Close()
		return fail(&Error{Class: ClassHTTP, Code: resp.StatusCode, Msg: "GET stream", Err: ErrStreamUnsupported})
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		return fail(&Error{Class: ClassHTTP, Code: resp.StatusCode, Msg: "GET stream"})
	}
	return conn{body: resp.Body, cancel: cancel}, nil
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
			c, err = g.connect(time.Now().Add(30 * time.Second))
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
