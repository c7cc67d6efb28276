package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// sseSession is a session over the legacy HTTP+SSE transport (2024-11-05): the GET
// stream's first event, "endpoint", names the URI to POST messages to, and every reply
// travels back on the stream.
type sseSession struct {
	d        *Dialer
	index    int
	endpoint string
	hc       *fasthttp.HostClient
	ids      atomic.Uint64
	mux      *mux
	cancel   context.CancelFunc
	done     chan struct{}
	info     Info
	closed   atomic.Bool
}

func (d *Dialer) dialSSE(index int, deadline time.Time) (Session, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sseSession{d: d, index: index, cancel: cancel, done: make(chan struct{})}
	s.mux = newMux(index, d.o.OnNotification)
	s.mux.send = newAnswerer(func(msg []byte) { s.post(msg, time.Now().Add(10*time.Second)) })
	timer := time.AfterFunc(time.Until(deadline), cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.o.URL, nil)
	if err != nil {
		cancel()
		return nil, transportErr("SSE stream", err)
	}
	req.Header.Set("Accept", sse.ContentType)
	for k, v := range d.o.Headers {
		req.Header.Set(k, v)
	}
	resp, err := d.doStream(req)
	if err != nil {
		cancel()
		if !timer.Stop() {
			return nil, &Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "SSE stream"}
		}
		return nil, transportErr("SSE stream", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		timer.Stop()
		cancel()
		return nil, &Error{Class: ClassHTTP, Code: resp.StatusCode, Msg: "SSE stream"}
	}
	rd := sse.NewReader(resp.Body, d.o.MaxMessage)
	ev, err := rd.Next()
	stopped := timer.Stop()
	if err != nil || string(ev.Event) != "endpoint" {
		resp.Body.Close()
		cancel()
		if !stopped {
			return nil, &Error{Class: ClassTimeout, Err: ErrTimeout, Msg: "waiting for the endpoint event"}
		}
		if err == nil {
			return nil, protocolErr("first SSE event is " + eventType(ev) + ", want endpoint")
		}
		return nil, transportErr("SSE stream", err)
	}
	base, _ := url.Parse(d.o.URL)
	ref, err := url.Parse(string(ev.Data))
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, protocolErr("bad endpoint URI " + string(ev.Data))
	}
	ep := base.ResolveReference(ref)
	s.endpoint = ep.String()
	s.hc = d.hostClient(ep)
	s.info.SessionID = ep.Query().Get("sessionId")
	s.info.StreamOpen = true
	go s.read(resp, rd)
	if err := handshake(s, d, deadline, &s.info); err != nil {
		s.Close(deadline)
		return nil, err
	}
	return s, nil
}

// read routes the stream's messages until it ends.
func (s *sseSession) read(resp *http.Response, rd *sse.Reader) {
	defer close(s.done)
	defer resp.Body.Close()
	for {
		ev, err := rd.Next()
		if err != nil {
			if s.closed.Load() {
				s.mux.fail(transportErr("session closed", ErrClosed))
			} else if errors.Is(err, sse.ErrEventTooLarge) {
				s.mux.fail(protocolErr("stream event too large"))
			} else {
				s.mux.fail(transportErr("SSE stream ended", err))
			}
			return
		}
		if !isMessage(ev) || len(ev.Data) == 0 {
			continue
		}
		s.mux.deliver(ev.Data, time.Now())
	}
}

func (s *sseSession) Info() Info { return s.info }

// Call implements Session.
func (s *sseSession) Call(r *Request, deadline time.Time, rep *Reply) error {
	return s.mux.call(s.ids.Add(1), r, deadline, rep, s.post)
}

// Notify implements Session.
func (s *sseSession) Notify(method string, params []byte, deadline time.Time) error {
	return notify(method, params, deadline, s.post)
}

// post sends a message to the endpoint; a reply to it, if any, arrives on the stream.
func (s *sseSession) post(msg []byte, deadline time.Time) error {
	return postMessage(&s.closed, s.hc, msg, deadline, s.prepare, s.statusErr)
}

func (s *sseSession) prepare(req *fasthttp.Request, body []byte) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(s.endpoint)
	req.Header.SetContentType(contentJSON)
	for k, v := range s.d.o.Headers {
		req.Header.Set(k, v)
	}
	req.SetBodyRaw(body)
}

func (s *sseSession) statusErr(status int, body []byte) error { return httpStatusErr(status, body) }

// Close implements Session: closing the stream ends a legacy session.
func (s *sseSession) Close(deadline time.Time) error {
	if s.closed.Swap(true) {
		return nil
	}
	s.cancel()
	ctxtime.Wait(s.done, time.Until(deadline))
	return nil
}
