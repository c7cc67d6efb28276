package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/bytesio"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// SSEConn is a connection to a backend that speaks the legacy HTTP+SSE transport of MCP
// 2024-11-05: a GET opens an event stream whose first event, `endpoint`, names the URI
// to POST messages to; every message from the server, replies included, then arrives as
// an `event: message` on that stream, and POSTs are answered 202.
//
// The session lives as long as the stream. When the stream drops, the Conn reports
// EventDown, reconnects with backoff, replays the recorded initialize handshake on the
// new session (EventRenewed; EventUp if there was nothing to replay) and carries on; after
// ReconnectAttempts failures in a row it gives up with EventExpired.
type SSEConn struct {
	httpBase
	base     *url.URL
	baseURI  *fasthttp.URI
	streamHC *fasthttp.HostClient // the event stream, apart so that it never waits for a POST slot
	sconns   connSet

	mu      sync.Mutex
	cur     *liveStream   // the stream whose endpoint Send uses; nil while down
	changed chan struct{} // closed and replaced whenever cur changes
	downErr error         // why cur is nil

	wg sync.WaitGroup
}

// liveStream is one established event stream and the endpoint it announced.
type liveStream struct {
	req      *fasthttp.Request
	resp     *fasthttp.Response
	rc       fasthttp.ReadCloserWithError
	r        *sseReader
	endpoint *fasthttp.URI
	done     chan struct{} // closed by the stream's reader when it ends
	err      error         // why it ended; read after done
}

// interrupt ends the stream from another goroutine; its reader then sees an error.
func (s *liveStream) interrupt(err error) {
	if s.rc != nil {
		_ = s.rc.CloseWithError(err)
	}
}

// release frees the stream; only its reader goroutine calls it.
func (s *liveStream) release() {
	if s.r != nil {
		s.r.release()
	}
	_ = s.resp.CloseBodyStream()
	fasthttp.ReleaseResponse(s.resp)
	fasthttp.ReleaseRequest(s.req)
}

// DialSSE connects to a legacy HTTP+SSE backend: it opens the event stream at rawURL and
// waits, within ctx, for the endpoint event.
func DialSSE(ctx context.Context, rawURL string, opts HTTPOptions, sink Sink) (*SSEConn, error) {
	c := &SSEConn{baseURI: &fasthttp.URI{}, changed: make(chan struct{})}
	u, addr, err := c.setup("DialSSE", rawURL, opts, sink)
	if err != nil {
		return nil, err
	}
	c.base = u
	if err := parseURI(c.baseURI, u); err != nil {
		return nil, err
	}
	opts = c.opts
	c.hc = newHostClient(addr, u.Scheme == "https", &opts, &c.conns)
	sopts := opts
	sopts.MaxConns = 2 // the live stream, and its successor while the old one winds down
	c.streamHC = newHostClient(addr, u.Scheme == "https", &sopts, &c.sconns)
	st, err := c.connect(ctx)
	if retryAuth(err) {
		st, err = c.connect(ctx) // refused, and a new token to try
	}
	if err != nil {
		c.kill(err)
		c.conns.closeAll()
		c.sconns.closeAll()
		return nil, err
	}
	c.setCurrent(st, nil)
	c.wg.Add(1)
	go c.run(st)
	return c, nil
}

// connect opens the event stream and reads it up to the endpoint event. ctx bounds only
// this; the stream itself lives until it drops or the Conn closes.
func (c *SSEConn) connect(ctx context.Context) (_ *liveStream, err error) {
	st := &liveStream{req: fasthttp.AcquireRequest(), resp: fasthttp.AcquireResponse(), done: make(chan struct{})}
	defer func() {
		if err != nil {
			st.release()
		}
	}()
	// fasthttp takes no context, and a request timeout would also cut the stream later:
	// ctx interrupts the connect by closing the stream's connection.
	stop := context.AfterFunc(ctx, func() { c.sconns.closeConns(false) })
	defer stop()
	req := st.req
	req.SetURI(c.baseURI)
	req.Header.SetMethod(fasthttp.MethodGet)
	for _, h := range c.headers {
		req.Header.Set(h.name, h.value)
	}
	if err := c.setCredentials(ctx, &req.Header); err != nil {
		return nil, err
	}
	req.Header.Set(fasthttp.HeaderAccept, "text/event-stream")
	st.resp.StreamBody = true
	if err := c.streamHC.Do(req, st.resp); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("upstream: %s: opening the event stream: %w", c.opts.Name, err)
	}
	if s := st.resp.StatusCode(); s != fasthttp.StatusOK {
		return nil, c.statusErr(req, st.resp, st.resp.BodyStream(), "GET")
	}
	if !bytes.HasPrefix(st.resp.Header.ContentType(), []byte("text/event-stream")) {
		return nil, fmt.Errorf("%w: event stream answered with %q", ErrProtocol, st.resp.Header.ContentType())
	}
	body := st.resp.BodyStream()
	st.rc, _ = body.(fasthttp.ReadCloserWithError)
	st.r = newSSEReader(body, c.opts.MaxMessage)
	for {
		ev, err := st.r.next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("upstream: %s: event stream ended before its endpoint event: %w", c.opts.Name, err)
		}
		switch {
		case string(ev.Event) == "endpoint":
			ep, err := c.resolve(ev.Data)
			if err != nil {
				return nil, err
			}
			st.endpoint = ep
			return st, nil
		case ev.isMessage():
			// Nothing should come before the endpoint, but nothing is lost if it does.
			deliver(c.sink, &c.wait, ev.Data)
		}
	}
}

// resolve turns the endpoint event's data into the absolute URI to POST to. It must stay
// on the stream's origin: a backend must not be able to send the router's traffic, and
// its headers, elsewhere.
func (c *SSEConn) resolve(data []byte) (*fasthttp.URI, error) {
	ref, err := url.Parse(string(bytes.TrimSpace(data)))
	if err != nil {
		return nil, fmt.Errorf("%w: endpoint event %q: %w", ErrProtocol, excerpt(data), err)
	}
	abs := c.base.ResolveReference(ref)
	if abs.Scheme != c.base.Scheme || abs.Host != c.base.Host {
		return nil, fmt.Errorf("%w: endpoint %q is not on the stream's origin %s://%s",
			ErrProtocol, abs.String(), c.base.Scheme, c.base.Host)
	}
	u := &fasthttp.URI{DisablePathNormalizing: true}
	if err := u.Parse(nil, []byte(abs.String())); err != nil {
		return nil, fmt.Errorf("%w: endpoint %q: %w", ErrProtocol, abs.String(), err)
	}
	return u, nil
}

// setCurrent publishes st (nil: down, with why) and wakes the Sends waiting for it.
func (c *SSEConn) setCurrent(st *liveStream, why error) {
	c.mu.Lock()
	c.cur, c.downErr = st, why
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *SSEConn) current() (*liveStream, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur, c.changed, c.downErr
}

// run serves stream after stream: it reads the current one, and when it drops,
// reconnects with backoff and renews the session on the new one.
func (c *SSEConn) run(st *liveStream) {
	defer c.wg.Done()
	bo := backoff{min: c.opts.ReconnectMin, max: c.opts.ReconnectMax}
	renewing := false // false only for the stream DialSSE made, which the router initializes
	failures := 0
	for {
		c.wg.Add(1)
		go c.read(st)
		var err error
		fatal := false
		if renewing {
			ctx, cancel := context.WithTimeout(c.ctx, c.opts.InitTimeout)
			fatal, err = c.renew(ctx, st)
			cancel()
		}
		if err == nil {
			bo.reset()
			failures = 0
			<-st.done
			err = st.err
			st.release()
			if c.ctx.Err() != nil {
				c.setCurrent(nil, deadErr(c.Err()))
				return
			}
			lost := fmt.Errorf("%w: %s: event stream lost: %w", ErrBackendDown, c.opts.Name, err)
			c.setCurrent(nil, lost)
			c.log.Warn("legacy SSE stream lost; reconnecting", "err", err)
			c.sink.Event(EventDown, lost)
		} else {
			st.interrupt(err)
			<-st.done
			st.release()
			if fatal {
				c.expire(err)
				return
			}
			failures++
			c.log.Debug("legacy SSE session renewal failed", "err", err)
		}
		renewing = true
		for st = nil; st == nil; {
			if c.ctx.Err() != nil {
				c.setCurrent(nil, deadErr(c.Err()))
				return
			}
			if failures >= c.opts.ReconnectAttempts {
				c.expire(fmt.Errorf("%w: %s: could not re-establish the event stream: %w",
					ErrSessionExpired, c.opts.Name, err))
				return
			}
			if !ctxtime.Sleep(c.ctx, bo.next()) {
				continue // the loop's first check returns
			}
			ctx, cancel := context.WithTimeout(c.ctx, c.opts.InitTimeout)
			st, err = c.connect(ctx)
			cancel()
			if err != nil {
				failures++
				c.log.Debug("legacy SSE reconnect failed", "err", err, "attempt", failures)
			}
		}
	}
}

// read delivers the messages of one stream until it ends, then records why and closes
// st.done.
func (c *SSEConn) read(st *liveStream) {
	defer c.wg.Done()
	defer close(st.done)
	var errBuf []byte
	for {
		ev, err := st.r.next()
		if err != nil {
			st.err = err
			return
		}
		switch {
		case ev.isMessage() && complete(ev.Data):
			deliver(c.sink, &c.wait, ev.Data)
		case ev.isMessage():
			// Cut off: when it shows the request it answers, that request fails now.
			var answered bool
			errBuf, answered = standIn(c.sink, &c.wait, c.opts.Name, invalidWhat, ev.Data, errBuf)
			c.badLog.Warn("backend sent an event that is not a whole JSON message; dropped",
				"failed_its_request", answered, "data", excerpt(ev.Data))
		}
		// A later endpoint event is ignored: the session's endpoint does not move.
	}
}

// renew establishes the session on a freshly connected stream, whose reader is running:
// it replays the recorded handshake (the reply arrives on the stream) and publishes the
// stream. fatal reports a refusal that retrying will not fix.
func (c *SSEConn) renew(ctx context.Context, st *liveStream) (fatal bool, err error) {
	r, ok := c.hs.renewal()
	if !ok {
		c.setCurrent(st, nil)
		c.sink.Event(EventUp, nil)
		return false, nil
	}
	if c.opts.NoRenew {
		return true, fmt.Errorf("%w: %s: session lost and renewal is disabled", ErrSessionExpired, c.opts.Name)
	}
	replyCh := c.wait.add(r.id)
	defer c.wait.remove(r.id)
	if err := c.postTo(ctx, st.endpoint, r.init); err != nil {
		return false, fmt.Errorf("upstream: %s: renewing the session: %w", c.opts.Name, err)
	}
	var reply []byte
	select {
	case reply = <-replyCh:
	case <-st.done:
		return false, fmt.Errorf("upstream: %s: renewing the session: stream ended: %w", c.opts.Name, st.err)
	case <-ctx.Done():
		return false, fmt.Errorf("upstream: %s: renewing the session: %w", c.opts.Name, ctx.Err())
	}
	if err := r.check(reply); err != nil {
		return true, fmt.Errorf("%w: %w", ErrSessionExpired, err)
	}
	if r.initialized != nil {
		if err := c.postTo(ctx, st.endpoint, r.initialized); err != nil {
			return false, fmt.Errorf("upstream: %s: renewing the session: initialized: %w", c.opts.Name, err)
		}
	}
	c.setCurrent(st, nil)
	c.log.Info("legacy SSE session renewed")
	c.sink.Event(EventRenewed, nil)
	return false, nil
}

// Send implements Conn. The reply, if any, arrives later on the event stream.
func (c *SSEConn) Send(ctx context.Context, msg []byte) error {
	if c.ctx.Err() != nil {
		return deadErr(c.Err())
	}
	var m codec.Message
	mp := c.hs.scan(msg, &m)
	for attempt := 0; ; attempt++ {
		st, changed, down := c.current()
		if st == nil {
			if down == nil {
				down = ErrBackendDown
			}
			return down
		}
		err := c.postTo(ctx, st.endpoint, msg)
		switch {
		case err == nil:
			return nil
		case c.ctx.Err() != nil:
			return deadErr(c.Err())
		case errors.Is(err, errSessionGone) && attempt == 0:
			// The backend forgot the session: drop the stream so that run renews it,
			// wait for that, and send again (the backend did not process msg).
			st.interrupt(err)
			if werr := c.awaitChange(ctx, changed, st); werr != nil {
				return werr
			}
			if mp != nil && isMethod(mp, "notifications/initialized") {
				return nil
			}
			continue
		case attempt == 0 && mp != nil && isStaleConn(err) && c.opts.retrySafe(&m):
			continue
		case attempt == 0 && retryAuth(err):
			continue // a 401, and a new token to try: the backend did not process msg
		}
		return err
	}
}

// awaitChange waits until the published stream is a live one other than old.
func (c *SSEConn) awaitChange(ctx context.Context, changed <-chan struct{}, old *liveStream) error {
	for i := 0; i < 1<<10; i++ { // bounded: each turn is a state change of the Conn
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return deadErr(c.Err())
		}
		var st *liveStream
		st, changed, _ = c.current()
		if st != nil && st != old {
			return nil
		}
	}
	return fmt.Errorf("%w: %s: session did not come back", ErrBackendDown, c.opts.Name)
}

// postTo POSTs msg to a session's endpoint. Replies travel on the stream; a backend
// that answers in the body anyway has that body delivered too.
func (c *SSEConn) postTo(ctx context.Context, ep *fasthttp.URI, msg []byte) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetURI(ep)
	req.Header.SetMethod(fasthttp.MethodPost)
	for _, h := range c.headers {
		req.Header.Set(h.name, h.value)
	}
	if err := c.setCredentials(ctx, &req.Header); err != nil {
		return err
	}
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(msg)
	if err := c.do(ctx, req, resp); err != nil {
		return err
	}
	defer resp.CloseBodyStream() //nolint:errcheck // nothing to do about it
	switch s := resp.StatusCode(); {
	case s/100 == 2:
		if s == fasthttp.StatusOK && bytes.HasPrefix(resp.Header.ContentType(), []byte("application/json")) {
			return c.readJSONBody(resp)
		}
		return nil
	case s == fasthttp.StatusNotFound:
		return errSessionGone
	}
	return c.statusErr(req, resp, resp.BodyStream(), "POST")
}

func (c *SSEConn) readJSONBody(resp *fasthttp.Response) error {
	body := resp.BodyStream()
	if body == nil {
		return nil
	}
	bp := getBuf()
	defer putBuf(bp)
	b, err := bytesio.AppendAtMost(*bp, body, c.opts.MaxMessage, ErrTooLarge)
	*bp = b
	if err != nil {
		return fmt.Errorf("upstream: %s: reading the reply: %w", c.opts.Name, err)
	}
	if b = bytes.TrimSpace(b); len(b) > 0 {
		deliver(c.sink, &c.wait, b)
	}
	return nil
}

// SetProtocolVersion implements Conn. The legacy transport has no version header; the
// version only guards renewals.
func (c *SSEConn) SetProtocolVersion(v string) { c.hs.setVersion(v) }

// expire kills the Conn because its session is lost for good.
func (c *SSEConn) expire(err error) {
	if c.kill(err) {
		c.log.Warn("legacy SSE session lost", "err", err)
		c.sink.Event(EventExpired, err)
	}
	c.setCurrent(nil, err)
}

// Close implements Conn: it drops the event stream, which ends the session on a legacy
// server, and waits for the reader.
func (c *SSEConn) Close() error {
	if !c.beginClose() {
		return nil
	}
	c.kill(ErrClosed)
	if st, _, _ := c.current(); st != nil {
		st.interrupt(ErrClosed)
	}
	c.sconns.closeAll()
	c.conns.closeAll()
	var err error
	if !ctxtime.WaitGroup(&c.wg, closeWait) {
		err = errors.New("upstream: event stream reader did not stop in time")
	}
	c.hc.CloseIdleConnections()
	c.streamHC.CloseIdleConnections()
	return err
}
