package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/mcprouter/mcprouter/codec"
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

// listenStream is one open subscriptions/listen request of an httpSession.
type listenStream struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *listenStream) close() {
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
	}
}

// Listen implements Listener. The long-lived POST goes through net/http, as GET
// streams do: its cost is per event, and its body is read for as long as it lives.
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
	body := wire.AppendRequest(nil, s.ids.Add(1), "subscriptions/listen", appendWithMeta(nil, params, s.d.meta))

	// The deadline bounds the wait for the acknowledgement only; the stream lives on.
	ctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(time.Until(deadline), cancel)
	fail := func(err error) error {
		timer.Stop()
		cancel()
		return err
	}
	ep, _ := s.instance()
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
	resp, err := s.d.streams.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fail(&Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "subscriptions/listen"})
		}
		return fail(transportErr("subscriptions/listen", err))
	}
	closeBody := func(err error) error {
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
	rd := sse.NewReader(resp.Body, s.d.o.MaxMessage)
	if err := awaitAck(rd, uris); err != nil {
		if ctx.Err() != nil {
			err = &Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "subscriptions/listen acknowledgement"}
		}
		return closeBody(err)
	}
	if !timer.Stop() {
		return closeBody(&Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "subscriptions/listen acknowledgement"})
	}
	l := &listenStream{cancel: cancel, done: make(chan struct{})}
	m := newMux(s.index, s.d.o.OnNotification)
	m.send = newAnswerer(func(msg []byte) { s.post(msg, time.Now().Add(10*time.Second)) })
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		for {
			ev, err := rd.Next()
			if err != nil {
				return // the client closed it, or the server ended it (its completion result)
			}
			if len(ev.Data) > 0 && isMessage(ev) {
				m.deliver(ev.Data, time.Now())
			}
		}
	}()
	s.listenMu.Lock()
	s.listens = append(s.listens, l)
	s.listenMu.Unlock()
	if s.closed.Load() { // Close ran meanwhile and did not see this stream
		l.close()
	}
	return nil
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
