package client

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/bytesio"
	"github.com/mcprouter/mcprouter/loadgen/internal/wire"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Header names of Streamable HTTP.
const (
	hdrSessionID = "Mcp-Session-Id"
	hdrProtocol  = "MCP-Protocol-Version"
	hdrMethod    = "Mcp-Method"
	hdrName      = "Mcp-Name"
	acceptPOST   = "application/json, text/event-stream"
	contentJSON  = "application/json"
)

var eventStream = []byte(sse.ContentType)

// httpSession is a Streamable HTTP session. In the stateless revision it has no
// session id and every request carries its own protocol metadata.
type httpSession struct {
	d     *Dialer
	index int
	// insts are the instances of the service the session may use, the one it opened on
	// first; at is the position of the one it uses now (see failover).
	insts []instance
	at    atomic.Int32
	moves atomic.Int64
	ids   atomic.Uint64

	// Set once by the handshake, read-only afterwards.
	sessionID string
	version   string // value of MCP-Protocol-Version on requests ("" before init)
	info      Info

	stream *getStream
	// subscriptions/listen streams (stateless revision), ended by Close
	listenMu sync.Mutex
	listens  []*listenStream
	closed   atomic.Bool
}

// scratch is the per-call state of reading a reply, pooled by the Dialer so that
// reading one allocates nothing once the pool is warm: a session's first call (its
// initialize) takes one that other sessions used, and a held session keeps none.
type scratch struct {
	body []byte      // a JSON body
	rd   *sse.Reader // an SSE body
	m    codec.Message
}

// maxPooledScratch is the largest JSON body buffer a scratch goes back to the pool
// with: oversized buffers are dropped, not pooled.
const maxPooledScratch = 1 << 20

func (d *Dialer) scratch() *scratch {
	if sc, ok := d.scratches.Get().(*scratch); ok {
		return sc
	}
	return &scratch{body: make([]byte, 0, 4096)}
}

func (d *Dialer) putScratch(sc *scratch) {
	if cap(sc.body) > maxPooledScratch {
		sc.body = make([]byte, 0, 4096)
	}
	d.scratches.Put(sc)
}

func (d *Dialer) dialHTTP(index int, deadline time.Time, first *Request, rep *Reply) (Session, error) {
	s := &httpSession{d: d, index: index, insts: d.instances(index)}
	if d.o.Protocol == Version20260728 {
		s.version = Version20260728
		s.info.Protocol = Version20260728
		var disc Reply
		if err := s.Call(&Request{Method: "server/discover"}, deadline, &disc); err != nil {
			return nil, err
		}
		s.info.Server = wire.StringField(wire.Field(wire.Field(disc.Result, "_meta"), "io.modelcontextprotocol/serverInfo"), "name")
		return callFirst(s, first, deadline, rep)
	}
	// With a stream over plain HTTP and Options.Pipeline, notifications/initialized and
	// the first call go before the GET on the stream's connection (see DialCall).
	pipeline := d.o.Stream && d.o.Pipeline && !s.insts[0].hc.IsTLS
	var err error
	if pipeline {
		err = initialize(s, d, deadline, &s.info)
	} else {
		err = handshake(s, d, deadline, &s.info)
	}
	if err != nil {
		s.Close(deadline)
		return nil, err
	}
	// The header exists from 2025-06-18 on; older servers may not expect it.
	if s.info.Protocol >= Version20250618 {
		s.version = s.info.Protocol
	}
	s.info.SessionID = s.sessionID
	if d.o.Stream {
		var pre *preamble
		if pipeline {
			pre = s.newPreamble(first, rep)
			defer pre.release()
			first = nil // made by the preamble
		}
		st, err := openStream(s, deadline, pre)
		switch {
		case err == nil:
			s.stream = st
			s.info.StreamOpen = true
		case errors.Is(err, ErrStreamUnsupported):
			// The server offers no standalone stream (405), which the specification
			// allows: the session works without one, and Info says so.
		default:
			s.Close(deadline)
			return nil, err
		}
	}
	return callFirst(s, first, deadline, rep)
}

// callFirst makes the call a session was dialed with (see DialCall), if any, and
// returns the session; one whose call fails is closed.
func callFirst(s Session, first *Request, deadline time.Time, rep *Reply) (Session, error) {
	if first != nil {
		if err := s.Call(first, deadline, rep); err != nil {
			s.Close(deadline)
			return nil, err
		}
	}
	return s, nil
}

// preamble is what a session's first stream connection carries before its GET, in the
// same write (HTTP/1.1 pipelining, see DialCall): notifications/initialized and the
// session's first call, if any, whose answers check judges once they are read.
type preamble struct {
	reqs  []*fasthttp.Request
	resps []*fasthttp.Response
	body  *[]byte // the requests' bodies, one after the other
	s     *httpSession
	id    uint64 // the first call's
	rep   *Reply // takes the first call's reply; nil: no first call
}

// newPreamble prepares notifications/initialized and first (if not nil) for the
// instance the session uses now.
func (s *httpSession) newPreamble(first *Request, rep *Reply) *preamble {
	p := &preamble{body: getBody(), s: s}
	ep, _ := s.instance()
	*p.body = codec.AppendNotification(*p.body, "notifications/initialized", nil)
	split := len(*p.body)
	if first != nil {
		p.id, p.rep = s.ids.Add(1), rep
		*p.body = wire.AppendRequest(*p.body, p.id, first.Method, first.Params)
	}
	for _, b := range [][]byte{(*p.body)[:split], (*p.body)[split:]} {
		if len(b) == 0 {
			break
		}
		req := fasthttp.AcquireRequest()
		s.prepareAt(req, b, ep)
		p.reqs = append(p.reqs, req)
		p.resps = append(p.resps, fasthttp.AcquireResponse())
	}
	return p
}

// check judges the answers: notifications/initialized accepted, the first call's reply
// taken.
func (p *preamble) check() error {
	if st := p.resps[0].StatusCode(); st < 200 || st >= 300 {
		return p.s.statusErr(st, p.resps[0].Body())
	}
	if p.rep == nil {
		return nil
	}
	return p.s.takeAnswer(p.resps[1], p.id, p.rep)
}

func (p *preamble) release() {
	for i := range p.reqs {
		fasthttp.ReleaseRequest(p.reqs[i])
		fasthttp.ReleaseResponse(p.resps[i])
	}
	putBody(p.body)
}

func (s *httpSession) Info() Info {
	i := s.info
	ep, _ := s.instance()
	i.URL, i.Moves = ep.url, s.moves.Load()
	return i
}

// setHeaders sets the headers every POST, GET and DELETE of the session carries.
func (s *httpSession) setHeaders(h *fasthttp.RequestHeader) {
	for k, v := range s.d.o.Headers {
		h.Set(k, v)
	}
	if s.sessionID != "" {
		h.Set(hdrSessionID, s.sessionID)
	}
	if s.version != "" {
		h.Set(hdrProtocol, s.version)
	}
}

// Call implements Session.
func (s *httpSession) Call(r *Request, deadline time.Time, rep *Reply) error {
	if s.closed.Load() {
		return transportErr("call on closed session", ErrClosed)
	}
	id := s.ids.Add(1)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	body := getBody()
	defer putBody(body)

	params := r.Params
	if s.d.meta != nil {
		*body = appendWithMeta(*body, params, s.d.meta)
		params = *body
	}
	start := len(*body)
	*body = wire.AppendRequest(*body, id, r.Method, params)
	// An instance that does not answer at all hands the call to the next one (see
	// failover), each instance at most once.
	for tries := 1; ; tries++ {
		ep, at := s.instance()
		s.prepareAt(req, (*body)[start:], ep)
		if s.d.meta != nil {
			req.Header.Set(hdrMethod, r.Method)
			if len(r.Name) > 0 {
				req.Header.SetBytesV(hdrName, r.Name)
			}
		}
		// The body is streamed, not buffered: an SSE reply may carry a server-to-client
		// request (ping, sampling, elicitation) that must be answered before the server
		// can send the reply, so waiting for the end of the body would deadlock.
		resp.StreamBody = true
		err := ep.hc.DoDeadline(req, resp, deadline)
		if err == nil {
			break
		}
		if !unanswered(err) || !s.failover(at) || tries >= len(s.insts) || s.closed.Load() {
			return doErr(err)
		}
		resp.Reset()
	}
	defer resp.CloseBodyStream() //nolint:errcheck // drains or drops the connection
	status := resp.StatusCode()
	if r.Method == "initialize" {
		if sid := resp.Header.Peek(hdrSessionID); len(sid) > 0 {
			s.sessionID = string(sid)
		}
	}
	if err := s.answerErr(resp); err != nil {
		return err
	}
	if resp.BodyStream() == nil {
		return protocolErr("reply without a body")
	}
	if bytes.HasPrefix(resp.Header.ContentType(), eventStream) {
		return s.readSSEReply(resp.BodyStream(), id, status, rep)
	}
	sc := s.d.scratch()
	defer s.d.putScratch(sc)
	b, err := bytesio.AppendAtMost(sc.body[:0], resp.BodyStream(), s.d.o.MaxMessage, errTooLarge)
	sc.body = b
	if err != nil {
		return bodyErr(err)
	}
	return s.readJSONReply(b, id, status, rep)
}

// answerErr judges the status of the answer to a call before its reply is read: nil
// for a 2xx answer but 202.
func (s *httpSession) answerErr(resp *fasthttp.Response) error {
	status := resp.StatusCode()
	if status < 200 || status >= 300 {
		return s.statusErr(status, s.readBody(resp))
	}
	if status == fasthttp.StatusAccepted {
		return protocolErr("202 Accepted in answer to a request")
	}
	return nil
}

// takeAnswer reads the reply to call id from resp, an answer read whole (see preamble).
func (s *httpSession) takeAnswer(resp *fasthttp.Response, id uint64, rep *Reply) error {
	if err := s.answerErr(resp); err != nil {
		return err
	}
	if bytes.HasPrefix(resp.Header.ContentType(), eventStream) {
		return s.readSSEReply(bytes.NewReader(resp.Body()), id, resp.StatusCode(), rep)
	}
	return s.readJSONReply(resp.Body(), id, resp.StatusCode(), rep)
}

// readBody reads the start of an error body, for the JSON-RPC error it may hold: from
// its stream when the answer is streamed, else the body read whole.
func (s *httpSession) readBody(resp *fasthttp.Response) []byte {
	r := resp.BodyStream()
	if r == nil {
		return resp.Body()
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadFull(r, buf)
	return buf[:n]
}

var errTooLarge = errors.New("reply larger than the message limit")

// bodyErr classifies a failure while reading a reply body.
func bodyErr(err error) error {
	if errors.Is(err, errTooLarge) {
		return &Error{Class: ClassProtocol, Msg: "reading the reply", Err: err}
	}
	return doErr(err)
}

// prepareAt makes req the POST of body to the instance ep.
func (s *httpSession) prepareAt(req *fasthttp.Request, body []byte, ep instance) {
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI(ep.url)
	req.Header.SetContentType(contentJSON)
	req.Header.Set(fasthttp.HeaderAccept, acceptPOST)
	s.setHeaders(&req.Header)
	req.SetBodyRaw(body)
}

// statusErr classifies a non-2xx answer with body.
func (s *httpSession) statusErr(status int, body []byte) error {
	e := httpStatusErr(status, body)
	if status == fasthttp.StatusNotFound && s.sessionID != "" {
		e.Err = ErrSessionExpired
	}
	return e
}

// httpStatusErr classifies a non-2xx answer by the JSON-RPC error in its body, if it
// holds one, and by the status otherwise.
func httpStatusErr(status int, body []byte) *Error {
	var m codec.Message
	if len(body) > 0 && len(body) < 64<<10 && codec.Scan(body, &m) == nil && m.Kind == codec.KindError {
		if code, msg, ok := wire.ErrorCode(m.Error); ok {
			return &Error{Class: ClassJSONRPC, Code: code, Msg: msg, Status: status}
		}
	}
	return &Error{Class: ClassHTTP, Code: status, Status: status}
}

func doErr(err error) error {
	if isDeadline(err) {
		return &Error{Class: ClassTimeout, Err: ErrTimeout, Msg: err.Error()}
	}
	return transportErr("", err)
}

// readJSONReply takes an application/json body holding the reply.
func (s *httpSession) readJSONReply(body []byte, id uint64, status int, rep *Reply) error {
	var m codec.Message
	if err := codec.Scan(body, &m); err != nil {
		return &Error{Class: ClassProtocol, Msg: "reply is not a JSON-RPC message", Err: err}
	}
	return s.takeReply(&m, id, status, rep)
}

// takeReply checks that m is the reply to id and stores it.
func (s *httpSession) takeReply(m *codec.Message, id uint64, status int, rep *Reply) error {
	switch m.Kind {
	case codec.KindResult:
		if got, ok := codec.ParseUintID(m.ID); !ok || got != id {
			return protocolErr("reply id " + string(m.ID) + " does not match the request")
		}
		rep.set(status, m.Result)
		return nil
	case codec.KindError:
		return rpcError(m.Error)
	}
	return protocolErr("reply is not a response")
}

// readSSEReply reads an SSE-framed POST response until the reply to id. Messages
// before it (progress, logging, server requests) are handled as they would be on a
// stream, as they arrive.
func (s *httpSession) readSSEReply(body io.Reader, id uint64, status int, rep *Reply) error {
	sc := s.d.scratch()
	defer s.d.putScratch(sc)
	if sc.rd == nil {
		// A small read buffer: the reader is pooled with its scratch, and replies are short.
		sc.rd = sse.NewReaderSize(body, 4096, s.d.o.MaxMessage)
	} else {
		sc.rd.Reset(body)
	}
	m := &sc.m
	for {
		ev, err := sc.rd.Next()
		if err != nil {
			sc.rd.Reset(nil) // do not keep the connection's reader
			switch {
			case errors.Is(err, io.EOF):
				return protocolErr("SSE response ended without the reply")
			case errors.Is(err, sse.ErrEventTooLarge):
				return &Error{Class: ClassProtocol, Msg: "bad SSE framing", Err: err}
			}
			return doErr(err)
		}
		if len(ev.Data) == 0 {
			continue // priming event
		}
		at := time.Now()
		if err := codec.Scan(ev.Data, m); err != nil {
			return &Error{Class: ClassProtocol, Msg: "SSE event is not a JSON-RPC message", Err: err}
		}
		switch m.Kind {
		case codec.KindResult, codec.KindError:
			if got, ok := codec.ParseUintID(m.ID); ok && got == id {
				err := s.takeReply(m, id, status, rep)
				sc.rd.Reset(nil)
				return err
			}
		case codec.KindNotification:
			if s.d.o.OnNotification != nil {
				s.d.o.OnNotification(s.index, m, at)
			}
		case codec.KindRequest:
			// Answered synchronously: the server waits for it before it goes on.
			s.post(answerServerRequest(nil, m), time.Now().Add(10*time.Second))
		}
	}
}

// Notify implements Session.
func (s *httpSession) Notify(method string, params []byte, deadline time.Time) error {
	return notify(method, params, deadline, s.post)
}

// post sends a notification or an answer to a server request (see postMessage) to
// the instance the session uses now; one that does not answer moves the session on.
func (s *httpSession) post(msg []byte, deadline time.Time) error {
	ep, at := s.instance()
	err := postMessage(&s.closed, ep.hc, msg, deadline, func(req *fasthttp.Request, body []byte) { s.prepareAt(req, body, ep) }, s.statusErr)
	var e *Error
	if errors.As(err, &e) && e.Class == ClassTransport && unanswered(e.Err) && s.failover(at) {
		ep, _ = s.instance()
		err = postMessage(&s.closed, ep.hc, msg, deadline, func(req *fasthttp.Request, body []byte) { s.prepareAt(req, body, ep) }, s.statusErr)
	}
	return err
}

// postMessage POSTs msg, a message that expects no reply in the HTTP response (a
// notification, an answer to a server request, or any message of the legacy transport,
// whose replies travel on the stream), and expects a 2xx status: 202 is what the
// specifications prescribe, 200 and 204 come from older servers. prepare sets the
// request's method, URI, headers and body; statusErr classifies any other status. A
// session already closed (closed set) sends nothing.
func postMessage(closed *atomic.Bool, hc *fasthttp.HostClient, msg []byte, deadline time.Time,
	prepare func(req *fasthttp.Request, body []byte), statusErr func(status int, body []byte) error) error {
	if closed.Load() {
		return transportErr("post on closed session", ErrClosed)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	prepare(req, msg)
	if err := hc.DoDeadline(req, resp, deadline); err != nil {
		return doErr(err)
	}
	if st := resp.StatusCode(); st < 200 || st >= 300 {
		return statusErr(st, resp.Body())
	}
	return nil
}

// Close implements Session: it stops the GET stream and sends DELETE. A 405 answer
// (the server does not let clients end sessions) is not an error.
func (s *httpSession) Close(deadline time.Time) error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stream != nil {
		s.stream.close()
	}
	s.listenMu.Lock()
	listens := s.listens
	s.listens = nil
	s.listenMu.Unlock()
	for _, l := range listens {
		l.close()
	}
	if s.sessionID == "" {
		return nil
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ep, _ := s.instance()
	req.Header.SetMethod(fasthttp.MethodDelete)
	req.SetRequestURI(ep.url)
	s.setHeaders(&req.Header)
	if err := ep.hc.DoDeadline(req, resp, deadline); err != nil {
		return doErr(err)
	}
	switch st := resp.StatusCode(); {
	case st == fasthttp.StatusMethodNotAllowed, st == fasthttp.StatusNotFound, st >= 200 && st < 300:
		return nil
	default:
		return &Error{Class: ClassHTTP, Code: st, Msg: "DELETE"}
	}
}
