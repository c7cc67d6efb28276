package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Listener is a session that can hold a subscriptions/listen stream: the stateless
// revision's replacement for a session's GET stream and resources/subscribe.
type Listener interface {
	// Listen opens a stream for updates of uris and returns once the server has
	// acknowledged it (so that a change made afterwards cannot be missed). The
	// notifications on it go to Options.OnNotification; Close ends it.
	Listen(uris []string, deadline time.Time) error
}

const methodAcknowledged = "notifications/subscriptions/acknowledged"

// listenStream is one subscriptions/listen request of an httpSession, held open for
// as long as the session lives: when the server ends it (its completion result, a
// restart, a lost connection) it is opened again, with a backoff between attempts
// that fail, and on the next instance (Options.URLs) when its own stops answering, as
// a session's calls and GET stream move. Updates sent while it was down are not
// replayed: the revision's listen streams have no resumption.
type listenStream struct {
	s      *httpSession
	params []byte // the request's params, with _meta
	uris   []string
	mux    *mux
	ctx    context.Context // ended by close
	cancel context.CancelFunc
	done   chan struct{}
}

// Listen backoff: the first reopen waits listenRetryMin, each failure doubles it up to
// listenRetryMax, and maxStreamFailures failures in a row end the stream for good.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 5 * time.Second
)

func (l *listenStream) close() {
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
	}
}

// Listen implements Listener. The long-lived POST goes through net/http, as GET
// streams do: its cost is per event, and its body is read for as long as it lives.
// A first attempt that fails is reported; later ones are the stream's own (run).
func (s *httpSession) Listen(uris []string, deadline time.Time) error {
	if s.d.meta == nil {
		return protocolErr("subscriptions/listen needs the stateless revision (2026-07-28)")
	}
	if s.closed.Load() {
		return transportErr("listen on closed session", ErrClosed)
	}
	params := []byte(`{"notifications":{"resourceSubscriptions":[`)
	for i, u := range uris {
		if i > 0 {
			params = append(params, ',')
		}
		params = codec.AppendString(params, u)
	}
	params = append(params, "]}}"...)
	ctx, cancel := context.WithCancel(context.Background())
	l := &listenStream{s: s, params: appendWithMeta(nil, params, s.d.meta), uris: uris, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	l.mux = newMux(s.index, s.d.o.OnNotification)
	l.mux.send = newAnswerer(func(msg []byte) { s.post(msg, time.Now().Add(10*time.Second)) })
	c, rd, err := l.open(deadline)
	if err != nil {
		cancel()
		return err
	}
	go l.run(c, rd)
	s.listenMu.Lock()
	s.listens = append(s.listens, l)
	s.listenMu.Unlock()
	if s.closed.Load() { // Close ran meanwhile and did not see this stream
		l.close()
	}
	return nil
}

// open sends the request on the session's instance and returns once the server has
// acknowledged it (so that a change made afterwards cannot be missed); deadline bounds
// that wait only, the stream lives on. An instance that does not answer moves the
// session to the next one.
func (l *listenStream) open(deadline time.Time) (conn, *sse.Reader, error) {
	s := l.s
	ctx, cancel := context.WithCancel(l.ctx)
	timer := time.AfterFunc(time.Until(deadline), cancel)
	fail := func(err error) (conn, *sse.Reader, error) {
		timer.Stop()
		cancel()
		return conn{}, nil, err
	}
	body := wire.AppendRequest(nil, s.ids.Add(1), "subscriptions/listen", l.params)
	ep, at := s.instance()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return fail(transportErr("subscriptions/listen", err))
	}
	req.Header.Set("Content-Type", contentJSON)
	req.Header.Set("Accept", acceptPOST)
	for k, v := range s.d.o.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(hdrProtocol, s.version)
	req.Header.Set(hdrMethod, "subscriptions/listen")
	resp, err := s.d.doStream(req)
	if err != nil {
		if ctx.Err() != nil && l.ctx.Err() == nil {
			return fail(&Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "subscriptions/listen"})
		}
		if unanswered(err) {
			s.failover(at)
		}
		return fail(transportErr("subscriptions/listen", err))
	}
	closeBody := func(err error) (conn, *sse.Reader, error) {
		resp.Body.Close()
		return fail(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return closeBody(httpStatusErr(resp.StatusCode, b))
	}
	if !bytes.HasPrefix([]byte(resp.Header.Get("Content-Type")), eventStream) {
		// A JSON answer ends the request at once: an error, or a stream refused.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return closeBody(listenRefused(b))
	}
	rd := sse.NewReaderSize(resp.Body, streamReadBuf, s.d.o.MaxMessage)
	if err := awaitAck(rd, l.uris); err != nil {
		if ctx.Err() != nil && l.ctx.Err() == nil {
			err = &Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "subscriptions/listen acknowledgement"}
		}
		return closeBody(err)
	}
	if !timer.Stop() {
		return closeBody(&Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "subscriptions/listen acknowledgement"})
	}
	return conn{body: resp.Body, cancel: cancel}, rd, nil
}

// run delivers the stream's notifications until the session closes it, opening it
// again whenever the server ends it. A refusal that another attempt would meet again
// (a JSON-RPC error, a protocol breach) or maxStreamFailures failures in a row end it.
func (l *listenStream) run(c conn, rd *sse.Reader) {
	defer close(l.done)
	for {
		l.read(rd)
		c.close()
		if l.ctx.Err() != nil {
			return
		}
		var err error
		if c, rd, err = l.reopen(); err != nil {
			l.mux.fail(transportErr("subscriptions/listen lost", err))
			return
		}
	}
}

// reopen opens the stream again after the server ended it: at once on the next
// instance when the session moved (each instance tried once in a row), else after the
// backoff.
func (l *listenStream) reopen() (conn, *sse.Reader, error) {
	delay, failures := listenRetryMin, 0
	_, at := l.s.instance()
	for {
		if _, now := l.s.instance(); now != at && failures < len(l.s.insts) {
			at = now // moved on: the next instance is tried without waiting
		} else if !ctxtime.Sleep(l.ctx, delay) {
			return conn{}, nil, ErrClosed
		} else {
			delay = min(2*delay, listenRetryMax)
		}
		c, rd, err := l.open(time.Now().Add(30 * time.Second))
		if err == nil {
			return c, rd, nil
		}
		if l.ctx.Err() != nil {
			return conn{}, nil, ErrClosed
		}
		var e *Error
		if failures++; failures >= maxStreamFailures || errors.As(err, &e) && (e.Class == ClassJSONRPC || e.Class == ClassProtocol) {
			return conn{}, nil, err
		}
	}
}

// read delivers one connection's notifications until it ends.
func (l *listenStream) read(rd *sse.Reader) {
	for {
		ev, err := rd.Next()
		if err != nil {
			return // the client closed it, or the server ended it (its completion result)
		}
		if len(ev.Data) > 0 && isMessage(ev) {
			l.mux.deliver(ev.Data, time.Now())
		}
	}
}

// awaitAck reads the stream up to its acknowledgement, which must honour every uri.
func awaitAck(rd *sse.Reader, uris []string) error {
	for {
		ev, err := rd.Next()
		if err != nil {
			return transportErr("subscriptions/listen ended before its acknowledgement", err)
		}
		if len(ev.Data) == 0 || !isMessage(ev) {
			continue
		}
		var m codec.Message
		if codec.Scan(ev.Data, &m) != nil {
			return protocolErr("subscriptions/listen: an event that is not JSON-RPC")
		}
		switch {
		case m.Kind == codec.KindNotification && string(m.Method) == methodAcknowledged:
			for _, u := range uris {
				if !bytes.Contains(ev.Data, codec.AppendString(nil, u)) {
					return protocolErr("subscriptions/listen: the server does not honour " + u)
				}
			}
			return nil
		case m.Kind == codec.KindError:
			return rpcError(m.Error)
		case m.Kind == codec.KindResult:
			return protocolErr("subscriptions/listen ended before its acknowledgement")
		}
	}
}

// listenRefused classifies a JSON answer to subscriptions/listen.
func listenRefused(body []byte) error {
	var m codec.Message
	if codec.Scan(body, &m) == nil && m.Kind == codec.KindError {
		return rpcError(m.Error)
	}
	return protocolErr("subscriptions/listen answered without a stream")
}
