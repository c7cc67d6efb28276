package server

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
)

// The 2026-07-28 side of the server: each request carries its version and capabilities in
// _meta and is served on its own (a Session that lives as long as the request), results
// carry resultType, serverInfo and, where the revision asks, caching fields; sampling is
// an input_required round trip; resource updates flow on subscriptions/listen streams.
// The rules themselves (what is a valid request, which error, which status) are
// router/modern's, which the router applies too.

// levelOff is a log level above every real one: a 2026-07-28 request without
// io.modelcontextprotocol/logLevel gets no notifications/message at all.
const levelOff = int32(len(logLevels))

// modernState is what the server keeps for the 2026-07-28 side: the checker, its own
// serverInfo, the requestState sealer and the open listen streams.
type modernState struct {
	checker modern.Checker
	info    []byte // serverInfo, encoded once
	sealer  *modern.Sealer

	mu        sync.Mutex
	listeners map[*Session]Responder // open subscriptions/listen streams
	closed    bool
}

// initModern prepares the 2026-07-28 side. The requestState key is random per process:
// a retry reaches the instance that issued the state (a fleet of backends behind a
// router shares nothing).
func (s *Server) initModern() {
	supported := []string{modern.Version}
	if s.cfg.Eras.legacy() {
		for i := len(router.Versions) - 1; i >= 0; i-- {
			supported = append(supported, router.Versions[i])
		}
	}
	s.mod.checker = modern.Checker{Supported: supported}
	s.mod.info = modern.AppendImplementation(nil, s.cfg.Name, s.cfg.Version)
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	sealer, err := modern.NewSealer(key)
	if err != nil {
		panic(err) // a 32-byte key cannot be refused
	}
	s.mod.sealer = sealer
	s.mod.listeners = make(map[*Session]Responder)
}

// Supported lists the protocol versions the server answers 2026-07-28 requests with in
// server/discover and -32022, preferred first.
func (s *Server) Supported() []string { return s.mod.checker.Supported }

// claimsModern reads the _meta of m and reports whether it is a 2026-07-28 message the
// server should serve as one (header is the MCP-Protocol-Version header, nil on stdio).
func (s *Server) claimsModern(m *codec.Message, meta *modern.Meta, header []byte) bool {
	if !s.cfg.Eras.modern() || (m.Kind != codec.KindRequest && m.Kind != codec.KindNotification) {
		return false
	}
	modern.ReadMeta(m.Params, meta)
	return meta.Claimed(header)
}

// modernRequest is what one 2026-07-28 request needs, allocated once: its Session and
// the decorator of its replies.
type modernRequest struct {
	sess Session
	dec  decorator
}

// requestSession is the state of one 2026-07-28 request: what its _meta declares.
func (s *Server) requestSession(meta *modern.Meta) *Session {
	req := &modernRequest{}
	sess := &req.sess
	sess.srv, sess.version, sess.era, sess.modern = s, modern.Version, era20250618, true
	sess.sampling = meta.Caps&modern.CapSampling != 0
	sess.req = req
	sess.logLevel.Store(levelOff)
	if meta.LogLevel != nil {
		if i := modern.LogLevelIndex(meta.LogLevel); i >= 0 {
			sess.logLevel.Store(int32(i))
		}
	}
	return sess
}

// serveModern serves one 2026-07-28 request that passed modern.Checker.Check, with sess
// from requestSession: the transport keeps sess to cancel the request (cancelRequest)
// when the client goes away before the answer.
func (s *Server) serveModern(m *codec.Message, meta *modern.Meta, sess *Session, r Responder) {
	s.Stats.Messages.Add(1)
	if meta.LogLevel != nil && modern.LogLevelIndex(meta.LogLevel) < 0 {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: _meta."+modern.KeyLogLevel+" must be one of debug, info, notice, warning, error, critical, alert, emergency", nil)
		return
	}
	var mb [64]byte
	method := methodOf(m, mb[:0])
	def := modern.LookupMethod(method)
	if def == nil { // Check lets none through; a caller that skipped it gets the answer
		replyError(r, m.ID, codec.CodeMethodNotFound, "Method not found", nil)
		return
	}
	d := &sess.req.dec
	*d = decorator{r: r, dec: modern.Decoration{ServerInfo: s.mod.info}}
	switch def.Name {
	case "server/discover":
		bp := getBuf()
		b := beginResult(*bp, m.ID)
		b = modern.AppendDiscoverResult(b, &modern.Discover{
			Supported: s.mod.checker.Supported, Capabilities: s.appendCapabilities(nil, modern.Version),
			ServerInfo: s.mod.info, Instructions: instructions,
			Cache: modern.Cache{TTLms: s.cfg.ListTTL.Milliseconds(), Scope: modern.ScopePublic},
		})
		b = append(b, '}')
		r.Reply(b)
		*bp = b
		putBuf(bp)
	case "subscriptions/listen":
		s.listen(m, sess, r)
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		d.cache(s.cfg.ListTTL)
		s.serveShared(method, m, sess, d)
	case "resources/read":
		d.cache(0) // counter://tick changes every Tick
		s.serveShared(method, m, sess, d)
	default:
		if !s.serveShared(method, m, sess, d) { // the tasks extension: Check passed it because the client declared it
			replyError(r, m.ID, codec.CodeMethodNotFound, "Method not found: this server does not offer the tasks extension", nil)
		}
	}
}

// decorator adds what every 2026-07-28 result carries (resultType, serverInfo, and for
// cacheable methods ttlMs and cacheScope) to the replies of the handlers the 2025 side
// shares; errors and notifications pass unchanged.
type decorator struct {
	r   Responder
	dec modern.Decoration
	c   modern.Cache
}

func (d *decorator) cache(ttl time.Duration) {
	d.c = modern.Cache{TTLms: ttl.Milliseconds(), Scope: modern.ScopePublic}
	d.dec.Cache = &d.c
}

func (d *decorator) Reply(msg []byte) {
	var m codec.Message
	if codec.Scan(msg, &m) != nil || m.Kind != codec.KindResult {
		d.r.Reply(msg)
		return
	}
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = modern.AppendDecorated(b, m.Result, &d.dec)
	b = append(b, '}')
	d.r.Reply(b)
	*bp = b
	putBuf(bp)
}

func (d *decorator) Done()                 { d.r.Done() }
func (d *decorator) Send(msg []byte) error { return d.r.Send(msg) }

// sampleModern is the sample tool for a 2026-07-28 request: no request to the client,
// but an InputRequiredResult asking for a sampling/createMessage, and on the retry the
// answer found in inputResponses. The requestState binds the retry to this very call.
func (s *Server) sampleModern(m *codec.Message, sess *Session, r Responder, prompt []byte, maxTokens int64) {
	if !sess.sampling {
		rej := modern.Require(&modern.Meta{}, modern.CapSampling)
		bp := getBuf()
		b := rej.AppendError(*bp, m.ID, s.mod.checker.Supported)
		r.Reply(b)
		*bp = b
		putBuf(bp)
		return
	}
	req := modern.RequestDigest(m)
	if state := member(m.Params, "requestState"); state != nil {
		contents, ok := stringValue(state)
		if !ok {
			replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: requestState must be a string", nil)
			return
		}
		if _, err := s.mod.sealer.Open([]byte(contents), "", req); err != nil {
			rej := modern.RejectState(err)
			replyError(r, m.ID, rej.Code, rej.Message, nil)
			return
		}
		if answer := member(member(m.Params, "inputResponses"), "sample"); answer != nil {
			if text := sampledText(answer); text != nil {
				bp := getBuf()
				b := beginResult(*bp, m.ID)
				b = append(b, `{"content":`...)
				b = appendTextContent(b, text)
				b = append(b, `,"structuredContent":{"text":`...)
				b = append(b, text...)
				b = append(b, `}}}`...)
				r.Reply(b)
				*bp = b
				putBuf(bp)
				return
			}
		}
		// A valid state without a usable answer: ask again (mrtr, error handling).
	}
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = append(b, `{"resultType":"input_required","inputRequests":{"sample":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":`...)
	b = append(b, prompt...)
	b = append(b, `}}],"maxTokens":`...)
	b = appendInt(b, maxTokens)
	b = append(b, `}}},"requestState":"`...)
	b = append(b, s.mod.sealer.Seal(nil, "", req, s.cfg.SampleTimeout)...)
	b = append(b, `"}}`...)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// listen serves subscriptions/listen: the acknowledgement with the part of the filter
// the server honours (resource updates of its listed resources: its lists never change,
// so the list_changed types are left out, as its capabilities say), then
// notifications/resources/updated tagged with the subscriptionId, until the client goes
// away (unlisten) or the server closes (a completion result).
func (s *Server) listen(m *codec.Message, sess *Session, r Responder) {
	sess.listenID = append([]byte(nil), m.ID...)
	var uris []*resource
	forEach(path(m.Params, "notifications", "resourceSubscriptions"), func(v []byte) bool {
		if uri, ok := stringValue(v); ok {
			if res := s.cat.resByURI[uri]; res != nil {
				uris = append(uris, res)
			}
		}
		return true
	})
	s.mod.mu.Lock()
	if s.mod.closed {
		s.mod.mu.Unlock()
		r.Reply(appendListenEnd(nil, sess.listenID))
		return
	}
	s.mod.listeners[sess] = r
	s.mod.mu.Unlock()

	ack := append([]byte(nil), `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"`+modern.KeySubscriptionID+`":`...)
	ack = append(ack, sess.listenID...)
	ack = append(ack, `},"notifications":{"resourceSubscriptions":[`...)
	for i, res := range uris {
		if i > 0 {
			ack = append(ack, ',')
		}
		ack = codec.AppendString(ack, res.uri)
	}
	ack = append(ack, `]}}}`...)
	// The acknowledgement goes out before the stream is registered for updates, so that
	// no notification precedes it.
	if r.Send(ack) != nil {
		s.unlisten(sess)
		return
	}
	sess.mu.Lock()
	sess.out = listenSender{r}
	s.subMu.Lock()
	for _, res := range uris {
		set := s.subs[res.uri]
		if set == nil {
			set = make(map[*Session]struct{})
			s.subs[res.uri] = set
		}
		set[sess] = struct{}{}
		if sess.subs == nil {
			sess.subs = make(map[string]*resource)
		}
		sess.subs[res.uri] = res
	}
	s.subMu.Unlock()
	sess.mu.Unlock()
}

// listenSender delivers a listen stream's notifications on the listen request's stream.
type listenSender struct{ r Responder }

func (l listenSender) Send(msg []byte) error { return l.r.Send(msg) }
func (l listenSender) Close()                {}

// unlisten ends a listen stream the client closed (or cancelled on stdio): no answer.
// It reports whether the stream was still open.
func (s *Server) unlisten(sess *Session) bool {
	s.mod.mu.Lock()
	r, ok := s.mod.listeners[sess]
	delete(s.mod.listeners, sess)
	s.mod.mu.Unlock()
	s.CloseSession(sess)
	if ok {
		s.Stats.Cancelled.Add(1)
		r.Done()
	}
	return ok
}

// closeListeners ends every listen stream gracefully, with the completion result the
// specification asks of a server that tears a subscription down.
func (s *Server) closeListeners() {
	s.mod.mu.Lock()
	s.mod.closed = true
	open := s.mod.listeners
	s.mod.listeners = nil
	s.mod.mu.Unlock()
	for sess, r := range open {
		s.CloseSession(sess)
		r.Reply(appendListenEnd(nil, sess.listenID))
	}
}

// appendListenEnd appends the response that ends a listen stream gracefully.
func appendListenEnd(dst, id []byte) []byte {
	dst = beginResult(dst, id)
	dst = append(dst, `{"resultType":"complete","_meta":{"`+modern.KeySubscriptionID+`":`...)
	dst = append(dst, id...)
	return append(dst, `}}}`...)
}

// appendUpdated appends notifications/resources/updated for a listen stream.
func appendUpdated(dst, listenID []byte, uri string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"`+modern.KeySubscriptionID+`":`...)
	dst = append(dst, listenID...)
	dst = append(dst, `},"uri":`...)
	dst = codec.AppendString(dst, uri)
	return append(dst, `}}`...)
}

// cancelRequest ends a 2026-07-28 request whose client went away (closed the stream on
// HTTP, notifications/cancelled on stdio): a listen stream is unregistered, a call in
// flight stops without a reply.
func (s *Server) cancelRequest(sess *Session, id []byte) {
	if sess.listenID != nil {
		s.unlisten(sess)
		return
	}
	sess.cancel(id)
}
