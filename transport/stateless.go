package transport

import (
	"bytes"
	"syscall"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/budget"
	"github.com/mcprouter/mcprouter/transport/closewatch"
	"github.com/mcprouter/mcprouter/transport/readahead"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Stateless requests: revisions from 2026-07-28 on have no sessions. Each request says
// in its own body (params._meta) and headers which revision it speaks, so one endpoint
// serves both generations and decides per request: a request the handler claims as
// stateless (StatelessPolicy.Stateless) is served without a session, anything else the
// session way. The transport stays blind to what makes a request stateless; it only
//
//   - skips the session machinery (no Mcp-Session-Id, no initialize rate limit, no
//     session-scoped MCP-Protocol-Version check: an unknown version reaches the
//     handler, which answers it with the revision's own error);
//   - hands the handler the raw headers the revision defines (StatelessHeaders);
//   - opens an SSE stream on the POST itself when the handler sends something before
//     the reply, or the reply is slow to come (no session, so no GET stream and no
//     resumption);
//   - sets the reply's HTTP status (Exchange.SetStatus, else HTTPConfig.StatusOf);
//   - runs what the handler registered with Exchange.OnAbandon when the client closes
//     the stream before the reply: closing the stream is how the revision cancels;
//   - passes what goes back through the handler's StatelessScreen;
//   - refuses GET and DELETE with 405 for a client that speaks such a revision.
//
// On stdio a claimed message goes over the same way on the session's channel, without
// headers (statelessOnStdio); its client cancels with notifications/cancelled.

// StatelessPolicy is implemented by handlers that serve requests without a session.
// Stateless reports whether a message (nil for a GET or DELETE, judged on the header
// alone) is to be served statelessly, given the raw MCP-Protocol-Version header (nil
// when absent). It must not block and must not keep m or header.
type StatelessPolicy interface {
	Stateless(m *codec.Message, versionHeader []byte) bool
}

// StatelessScreen is implemented by handlers that adjust what goes back to a stateless
// request: ScreenSend may drop (ok false) or rewrite a message sent before the reply,
// ScreenReply may rewrite the reply. They append what to send to buf (or return msg
// itself) and run on the sender's goroutine, before the transport copies the bytes;
// x is valid for their duration.
type StatelessScreen interface {
	ScreenSend(x *Exchange, msg, buf []byte) (out []byte, ok bool)
	ScreenReply(x *Exchange, msg, buf []byte) []byte
}

// StatelessHeaders are the raw values of the headers a stateless request carries over
// HTTP (nil when absent; all nil on other carriers), views into the exchange's own
// bytes, valid as long as it is.
type StatelessHeaders struct {
	Version []byte // MCP-Protocol-Version
	Method  []byte // Mcp-Method
	Name    []byte // Mcp-Name
	// Params are the Mcp-Param-* headers as they came, one "Name: value\n" line each,
	// for the handler to check or pass on.
	Params []byte
}

// Header names of the stateless revision's Streamable HTTP binding.
const (
	HeaderMethod = "Mcp-Method"
	HeaderName   = "Mcp-Name"
)

// OnAbandon registers fn to run, once, if the client goes away before x is answered (it
// closes the stream of a stateless request): the handler cancels the request's work.
// fn must not use x, which may be recycled by then, and runs on the transport's
// goroutine without its locks. Calling it after Reply or Done is a no-op.
func (x *Exchange) OnAbandon(fn func()) { x.call.onAbandon(abandonFunc(fn)) }

// OnAbandonBy is OnAbandon for a handler that keeps the request's state in an object
// of its own anyway (the router's Session of a stateless request): registering it
// costs no closure per request. a.Abandon is run as OnAbandon runs fn.
func (x *Exchange) OnAbandonBy(a Abandoner) { x.call.onAbandon(a) }

// Abandoner is what OnAbandonBy registers.
type Abandoner interface{ Abandon() }

// UnusedAbandoner is an Abandoner that is told when its request finished with its client
// still there, so that Abandon will never run: the one moment after which neither the
// handler (it answered) nor the transport uses what Abandon would have used, which the
// handler may then recycle (the router's Session of a stateless call). Exactly one of
// Abandon and Unused runs, at most once, unless the transport drops the request
// unfinished (then neither). Unused runs under the request's lock, on the goroutine
// that finished it: it must not block, nor use the exchange.
type UnusedAbandoner interface {
	Abandoner
	Unused()
}

// abandonFunc is a func registered with OnAbandon.
type abandonFunc func()

func (f abandonFunc) Abandon() { f() }

// SetStatus sets the HTTP status of the JSON reply to a POST of one message (stateless
// or of a session), for an answer whose status the handler knows better than
// HTTPConfig.StatusOf can tell from its code: a request refused whole (403, or 429 with
// Retry-After from the error's data.retryAfterMs, see refusedWhole). Call it before
// Reply; batch elements, streamed replies and other transports ignore it.
func (x *Exchange) SetStatus(status int) {
	c := x.call
	c.mu.Lock()
	c.status = status
	c.mu.Unlock()
}

// SettleStatus sets the HTTP status of x's JSON reply as SetStatus does, unless the
// handler set one already: for a StatelessScreen, which reads the reply anyway and so
// knows its status (a result 200), so that HTTPConfig.StatusOf need not scan the reply a
// second time. An exchange on no call (made outside the transport) has no status.
func (x *Exchange) SettleStatus(status int) {
	c := x.call
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.status == 0 {
		c.status = status
	}
	c.mu.Unlock()
}

// HoldStream keeps a stateless request's reply from turning into a stream because it is
// slow (HTTPConfig.StatelessStreamAfter): its stream opens with the first message the
// handler sends. For a request whose first message says something the client waits for
// (subscriptions/listen's acknowledgement: the subscription holds from then on).
func (x *Exchange) HoldStream() {
	c := x.call
	c.mu.Lock()
	c.noEarly = true
	c.mu.Unlock()
}

// keepScreenBuf puts the pooled buffer bp back with what a screen grew it into (out),
// so that the next reply screened does not grow one again; when out is msg, or a view
// into it, it is not the pool's to keep.
func keepScreenBuf(bp *[]byte, out, msg []byte) {
	if cap(out) > cap(*bp) && !within(out, msg) {
		*bp = out[:0]
	}
	putScreenBuf(bp)
}

// within reports whether b's bytes lie in the backing array of msg.
func within(b, msg []byte) bool {
	if cap(b) == 0 || cap(msg) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(msg)))
	return p >= lo && p < lo+uintptr(cap(msg))
}

// claimStateless asks the handler whether the POST body is a stateless request: only a
// single message without a session id can be. It scans the body into p.in and reads
// the revision's headers into p (statelessHeaders: the MCP-Protocol-Version the
// handler judges the claim on comes from that walk, not from a Peek more); ok is false
// when the body is no single valid message (the session path then answers for it).
func (s *HTTPServer) claimStateless(ctx *fasthttp.RequestCtx, p *httpPost) bool {
	if s.stateless == nil || len(ctx.Request.Header.Peek(HeaderSessionID)) > 0 {
		return false
	}
	in := &p.in
	body := ctx.PostBody()
	if codec.IsBatch(body) {
		return false
	}
	if batch, err := in.split(body, s.cfg.MaxBatch); batch || err != nil {
		return false
	}
	if _, invalid := in.scan(); invalid > 0 {
		return false
	}
	m := &in.msgs[0]
	if m.Kind != codec.KindRequest && m.Kind != codec.KindNotification {
		return false
	}
	statelessHeaders(ctx, p)
	if !s.stateless.Stateless(m, p.shdr.Version) {
		p.shdr = StatelessHeaders{} // the session path's: the post keeps no view of the request
		return false
	}
	return true
}

// statelessHeaders reads the headers of the revision's binding into p.shdr (views into
// the request) and the Mcp-Param-* ones into p.hdrs, in one walk over the headers,
// where a Peek of each would walk them again (and normalize its name) four times more.
// The first of each wins, as with Peek.
func statelessHeaders(ctx *fasthttp.RequestCtx, p *httpPost) {
	p.hdrs = p.hdrs[:0]
	hd := &p.shdr
	*hd = StatelessHeaders{}
	var seen uint8
	ctx.Request.Header.VisitAll(func(k, v []byte) {
		// All of them begin with "Mcp-" (any case); the others (Host, Accept,
		// Content-Type...) are passed with one compare, not an EqualFold or two.
		if len(k) < len(HeaderName) || k[0]|0x20 != 'm' {
			return
		}
		switch {
		case len(k) > len(normParamPrefix) && headerIs(k[:len(normParamPrefix)], normParamPrefix):
			p.hdrs = append(p.hdrs, k...)
			p.hdrs = append(p.hdrs, ':', ' ')
			p.hdrs = append(p.hdrs, v...)
			p.hdrs = append(p.hdrs, '\n')
		case seen&1 == 0 && len(k) == len(normProtocolVersion) && headerIs(k, normProtocolVersion):
			hd.Version, seen = v, seen|1
		case seen&2 == 0 && len(k) == len(HeaderMethod) && headerIs(k, HeaderMethod):
			hd.Method, seen = v, seen|2
		case seen&4 == 0 && len(k) == len(HeaderName) && headerIs(k, HeaderName):
			hd.Name, seen = v, seen|4
		}
	})
	if len(p.hdrs) > 0 {
		hd.Params = p.hdrs
	}
}

// headerIs reports whether the header name k is name in any case, comparing first with
// name as fasthttp normalizes it (each word capitalized), which is how a server that
// normalizes hands every name over: bytes.EqualFold of the revision's three names and
// the prefix was the header walk's largest cost.
func headerIs(k []byte, name string) bool {
	return string(k) == name || bytes.EqualFold(k, []byte(name))
}

// The revision's header names as fasthttp normalizes them (headerIs).
const (
	normProtocolVersion = "Mcp-Protocol-Version"
	normParamPrefix     = "Mcp-Param-"
)

// statelessRefused answers 405 to a GET or DELETE whose MCP-Protocol-Version names a
// stateless revision: there is no session to stream or end. It reports whether it did.
func (s *HTTPServer) statelessRefused(ctx *fasthttp.RequestCtx) bool {
	if s.stateless == nil || len(ctx.Request.Header.Peek(HeaderSessionID)) > 0 ||
		!s.stateless.Stateless(nil, ctx.Request.Header.Peek(HeaderProtocolVersion)) {
		return false
	}
	ctx.Response.Header.Set("Allow", "POST")
	s.httpError(ctx, fasthttp.StatusMethodNotAllowed, "this protocol revision has no sessions: GET and DELETE are not served, POST each request")
	return true
}

// postStateless serves a stateless request scanned into p.in, its headers read into p
// (claimStateless), whose post p is set up but for its message.
func (s *HTTPServer) postStateless(ctx *fasthttp.RequestCtx, p *httpPost, principal *auth.Principal) {
	p.stateless = true
	hd := &p.shdr
	c := p.call
	c.init(p, false)
	p.inl.ctx = ctx // for a handler that works on this goroutine (WatchOnCaller)
	p.in.handOff(c, s.handler, arrival{carrier: CarrierStreamable, principal: principal, stateless: hd, screen: s.screen}, &p.tmp)
	p.inl.stop()
	*hd = StatelessHeaders{} // copied onto the exchange: the post keeps no view of the request
	if p.in.msgs[0].Kind != codec.KindRequest {
		c.unref()
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		return
	}
	s.await(ctx, p)
}

// copyHeaders appends the headers of a stateless request to own (the exchange's copy
// of its message) and points x.Headers at the copies.
func copyHeaders(x *Exchange, own []byte, h *StatelessHeaders) []byte {
	start := len(own)
	var ends [4]int
	for i, v := range [4][]byte{h.Version, h.Method, h.Name, h.Params} {
		own = append(own, v...)
		ends[i] = len(own)
	}
	view := func(i, from int, was []byte) []byte {
		if was == nil {
			return nil
		}
		return own[from:ends[i]:ends[i]]
	}
	x.Headers = StatelessHeaders{
		Version: view(0, start, h.Version),
		Method:  view(1, ends[0], h.Method),
		Name:    view(2, ends[1], h.Name),
		Params:  view(3, ends[2], h.Params),
	}
	return own
}

// awaitReply blocks the request's goroutine until p's call finishes or turns into a
// stream, or HTTPConfig.ReplyTimeout passes (await tells which from the call). A
// stateless request whose client takes streams turns into one of its own once
// StatelessStreamAfter has passed without a reply (streamStateless). One timer serves
// both deadlines, the early one first: a second timer, armed and stopped for every
// stateless request, cost it more than any other difference from a session's request
// under load (the runtime's timer heap, its lock, a select of three).
func (s *HTTPServer) awaitReply(p *httpPost) {
	wait, early := s.cfg.ReplyTimeout, s.cfg.StatelessStreamAfter
	if !p.stateless || p.accept&acceptSSE == 0 || early <= 0 || early >= wait {
		early = 0
	}
	if early > 0 {
		p.timer.Reset(early)
	} else {
		p.timer.Reset(wait)
	}
	for {
		select {
		case <-p.wake:
		case <-p.timer.C:
			if early > 0 && !s.streamStateless(p) {
				// Held (HoldStream): the stream opens with the handler's first message,
				// which wakes this wait; the reply's own deadline still holds.
				p.timer.Reset(wait - early)
				early = 0
				continue
			}
		}
		break
	}
	p.timer.Stop()
}

// holdStream hands the call of stateless post p, whose stream is open, over to a
// heldStream, which delivers the rest of the call's messages on the stream, and leaves
// p to go back to the pool whole (its scan, headers, buffers and timer serve the next
// post): a held stream (subscriptions/listen, held for hours) kept the whole post,
// about 700 bytes, and its timer for its call, stream and account. Called with
// p.call.mu held once the wait for the reply is over; the caller puts p back once it
// has unlocked. The call's reply buffers go too: a streamed call sends its replies as
// they come.
func (p *httpPost) holdStream() {
	c := p.call
	c.out = &heldStream{stream: p.stream, acct: p.acct}
	c.buf, c.ends = nil, nil
	p.call, p.stream, p.acct = nil, nil, nil
}

// heldStream is the output of a stateless request's call once its post has gone back to
// the pool (holdStream): the call is streamed, so what comes goes on the stream, and
// the stream's account closes when the call is released.
type heldStream struct {
	stream *sse.Stream
	acct   *budget.Account
}

func (h *heldStream) finish(*call) {} // a streamed call ends through streamed

func (h *heldStream) related(c *call, msg []byte) (bool, error) {
	_, err := h.stream.Publish("", msg)
	return true, err
}

func (h *heldStream) streamed(c *call, msg []byte, last bool) { streamReply(h.stream, msg, last) }

// bind refuses: once the stream's headers are out, the client could never learn the id
// of a session opened now.
func (h *heldStream) bind(*call, string, SessionState) (*Session, error) {
	return nil, ErrAlreadyBound
}

func (h *heldStream) released(*call) { h.acct.Close() }

// streamStateless turns the reply of stateless post p into a stream of its own, unless
// it came meanwhile or a stream is open already: a slow request's client may then cancel
// it by closing the connection, which the stream notices (watchClose), where a JSON
// reply would leave it waiting unseen. The reply is the stream's last event. It reports
// whether the wait for the reply is over: a stream is open or the call finished (false:
// the handler holds the stream back, HoldStream).
func (s *HTTPServer) streamStateless(p *httpPost) bool {
	c := p.call
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.finished && p.stream == nil && !c.noEarly {
		p.stream = s.statelessStream(p)
		c.streamed = true
	}
	return c.finished || p.stream != nil
}

// callStreamConn is the connection of stateless post p's stream for the close watcher,
// when that stream is a call's (its handler did not hold it back, HoldStream) and the
// watcher can take the connection: serveStream then pumps it on the response, as a
// session's POST stream is, with the connection watched for the client's close (which
// cancels the call) until the stream ends, and a stream that ended cleanly leaves the
// connection to serve the client's next request. A stream that takes the connection
// over (hijackStream) ends with it: a client whose calls stream (progress, logs, a slow
// reply) connected again for each. nil: the stream takes the connection over still,
// because its handler holds it (subscriptions/listen: it may live for hours, and
// fan-out writes to it from the publisher's goroutine, with no pipe and no goroutine
// of fasthttp's in between), or because the watcher cannot take the connection (no
// descriptor, as with TLS, or not Linux), so that a reader of its own must see the
// close (watchClose), after which the connection carries nothing more. Called with
// p.call.mu held.
func (s *HTTPServer) callStreamConn(ctx *fasthttp.RequestCtx, c *call) syscall.RawConn {
	if c.noEarly || s.watcher == nil {
		return nil
	}
	rc, _ := readahead.RawConnOf(ctx.Conn())
	return rc
}

// watchCallStream puts the connection rc of a stateless call's stream pumped on its
// response (callStreamConn; nil: none) under the close watcher, which closes cons, and
// so ends the stream and abandons the call, when the client closes it. The zero Reg: not
// watched (the client's close is then seen at the stream's next write).
func (s *HTTPServer) watchCallStream(rc syscall.RawConn, cons *sse.Consumer) closewatch.Reg {
	if rc == nil {
		return closewatch.Reg{}
	}
	reg, _ := s.watcher.Add(rc, cons)
	return reg
}

// unwatchCallStream ends watchCallStream's watch, before the connection can close.
func (s *HTTPServer) unwatchCallStream(rc syscall.RawConn, reg closewatch.Reg) {
	if reg.Registered() {
		s.watcher.Remove(rc, reg)
	}
}

// statelessStream is the SSE stream a stateless POST p turns into: its own, outside any
// session (nothing resumes it, so it keeps no event once written: DiscardWritten), with
// an account of its own in the sessions' memory budget, so that many long streams
// (subscriptions/listen) are held to it like sessions are: what its client has read is
// given back first (Trim). The account closes with the post.
func (s *HTTPServer) statelessStream(p *httpPost) *sse.Stream {
	cfg := s.cfg.Stream
	p.acct = s.reg.newAccount()
	cfg.Account = p.acct
	st := sse.NewStream(1, cfg)
	st.DiscardWritten() // a held listen stream keeps no buffer for its acknowledgement
	p.acct.SetReclaim(st)
	return st
}
