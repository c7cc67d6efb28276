package server

import (
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// Responder is the way back to the client for one message: what every transport offers.
// *transport.Exchange implements it.
//
// For each message handed to Serve exactly one of Reply (requests) or Done (notifications,
// responses, and requests the client cancelled) is called, once, from any goroutine. Send
// delivers a message that belongs to the request and precedes its reply (progress,
// logging, a server-to-client request); it is never called after Reply or Done. Reply and
// Send copy msg.
type Responder interface {
	Reply(msg []byte)
	Done()
	Send(msg []byte) error
}

// Sender is the transport side of a session: server-initiated messages that belong to no
// request (resources/updated) go through Send; Close ends the session (the shutdown
// request). *transport.Session implements it.
type Sender interface {
	Send(msg []byte) error
	Close()
}

// Binder records a newly initialized session with the transport that carried initialize,
// and returns the transport side of it.
type Binder func(version string, s *Session) (Sender, error)

// Stats are cheap counters, for tests and logs.
type Stats struct {
	Messages  atomic.Uint64 // messages handed to Serve or HandleMessage
	Calls     atomic.Uint64 // tools/call requests
	Cancelled atomic.Uint64 // in-flight calls and listen streams ended by their client (notifications/cancelled, a closed stream)
	Overload  atomic.Uint64 // calls refused by MaxInFlight
	Updates   atomic.Uint64 // notifications/resources/updated sent
}

// Server is the reference MCP backend. It implements transport.Handler and
// transport.SessionlessPolicy; Start and ServeStdio serve it on the project's
// transports, Serve is the transport-independent entry point.
type Server struct {
	cfg Config
	log *slog.Logger
	cat *catalog

	reg  *transport.Registry
	http *transport.HTTPServer
	lis  listener

	inflight atomic.Int64
	nextCall atomic.Uint64 // ids of server-to-client requests

	wire  *stdioWire                         // stdout shared with fault_slow_bytes (Config.Faults only)
	mod   modernState                        // the 2026-07-28 side
	conns map[*transport.Session]*modernConn // 2026-07-28 requests in flight per stdio/NATS connection, under mod.mu

	subMu sync.Mutex
	subs  map[string]map[*Session]struct{} // resource URI -> subscribed sessions

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	Stats Stats
}

// New builds a server from cfg. It opens no listener; the resource ticker starts at once
// and stops at Close.
func New(cfg Config) (*Server, error) {
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:  cfg,
		log:  cfg.Logger,
		cat:  newCatalog(cfg),
		subs: make(map[string]map[*Session]struct{}),
		stop: make(chan struct{}),
	}
	s.initModern()
	s.conns = make(map[*transport.Session]*modernConn)
	s.reg = transport.NewRegistry(transport.RegistryConfig{MaxSessions: cfg.MaxSessions, IdleTimeout: cfg.IdleTimeout, InitTimeout: cfg.InitTimeout}, s)
	s.http = transport.NewHTTPServer(transport.HTTPConfig{Rules: s.httpRules()}, s.reg, s)
	if cfg.Tick > 0 {
		s.wg.Add(1)
		go s.ticker(cfg.Tick)
	}
	return s, nil
}

// Config returns the configuration in effect (defaults applied).
func (s *Server) Config() Config { return s.cfg }

// Registry is the transport registry holding the server's client sessions.
func (s *Server) Registry() *transport.Registry { return s.reg }

func (s *Server) ticker(period time.Duration) {
	defer s.wg.Done()
	ctxtime.Every(s.stop, period, func() { s.changed(s.cat.counter) })
}

// Session is the server's state of one client session.
type Session struct {
	srv      *Server
	version  string
	era      era
	sampling bool // the client declared the sampling capability

	// modern marks the state of one 2026-07-28 request: it lives as long as the request
	// and holds what its _meta said (capabilities, log level), nothing from earlier
	// requests. listenID is the request id of a subscriptions/listen stream (its
	// subscriptionId), nil for any other request.
	modern   bool
	listenID []byte
	req      *modernRequest // the request this Session belongs to (modern only)

	logLevel    atomic.Int32 // index into logLevels
	initialized atomic.Bool

	mu     sync.Mutex
	out    Sender // set once bound; read through sender()
	closed bool
	ops    map[string]*op       // in-flight asynchronous calls by request id token
	calls  map[string]*op       // our requests to the client awaiting an answer, by id token
	subs   map[string]*resource // subscribed resources by URI
}

// Version is the negotiated protocol revision.
func (s *Session) Version() string { return s.version }

// sender is the transport side of the session, nil until initialize has bound it. The
// session is visible to other messages (legacy SSE and stdio sessions exist before
// initialize) before Initialize learns its Sender, hence the lock.
func (s *Session) sender() Sender {
	s.mu.Lock()
	out := s.out
	s.mu.Unlock()
	return out
}

// NewSession creates the state of a session that initialize negotiated: version is the
// revision, capabilities the raw capabilities object the client sent (may be nil), out
// the transport side. Transports other than the built-in ones call it (see the package
// documentation); HandleMessage does it for them.
func (s *Server) NewSession(version string, capabilities []byte, out Sender) *Session {
	sess := &Session{srv: s, out: out, version: version, era: eraOf(version)}
	sess.sampling = member(capabilities, "sampling") != nil
	sess.logLevel.Store(levelInfo)
	return sess
}

// CloseSession ends what the session has in flight (in-flight calls finish without a
// reply, pending client requests are forgotten) and drops its subscriptions. The
// transport calls it once the session is gone.
func (s *Server) CloseSession(sess *Session) {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	sess.closed = true
	ops := make([]*op, 0, len(sess.ops))
	for _, o := range sess.ops {
		ops = append(ops, o)
	}
	subs := sess.subs
	sess.ops, sess.calls, sess.subs = nil, nil, nil
	sess.mu.Unlock()
	for _, o := range ops {
		o.abandon()
	}
	s.subMu.Lock()
	for uri := range subs {
		if set := s.subs[uri]; set != nil {
			delete(set, sess)
			if len(set) == 0 {
				delete(s.subs, uri)
			}
		}
	}
	s.subMu.Unlock()
}

// HandleMessage implements transport.Handler. It never blocks: every method is answered
// inline except the timed tools, which run on timers.
func (s *Server) HandleMessage(x *transport.Exchange) {
	if s.serveModernConn(x) {
		return
	}
	var sess *Session
	if x.Session != nil {
		sess, _ = x.Session.State().(*Session)
	}
	if sess != nil {
		ts := x.Session // x is the transport's again once Serve is done with it
		s.Serve(&x.Msg, sess, x)
		if !ts.Ready() && sess.initialized.Load() {
			// The handshake is over: the transport no longer ends the session for an
			// unfinished one (RegistryConfig.InitTimeout).
			ts.MarkReady()
		}
		return
	}
	s.Stats.Messages.Add(1)
	s.serveUninitialized(&x.Msg, x, func(version string, ns *Session) (Sender, error) {
		ts, err := x.Bind(version, ns)
		if err != nil {
			return nil, err
		}
		return ts, nil
	})
}

// SessionClosed implements transport.Handler.
func (s *Server) SessionClosed(ts *transport.Session) {
	s.connClosed(ts)
	if sess, ok := ts.State().(*Session); ok {
		s.CloseSession(sess)
	}
}

// AcceptSessionless implements transport.SessionlessPolicy: initialize opens a session,
// and server/discover (the stateless probe of later revisions) is let through so that it
// gets a proper "method not found" and clients fall back to initialize.
func (s *Server) AcceptSessionless(m *codec.Message, _ string) bool {
	return m.Kind == codec.KindRequest && (string(m.Method) == "initialize" || string(m.Method) == "server/discover")
}

// serveUninitialized answers a message that arrived before its session was initialized.
func (s *Server) serveUninitialized(m *codec.Message, r Responder, bind Binder) {
	if m.Kind != codec.KindRequest {
		r.Done() // nothing to say to notifications or responses yet
		return
	}
	var mb [64]byte
	switch string(methodOf(m, mb[:0])) {
	case "initialize":
		if !s.cfg.Eras.legacy() {
			// The revision asks a modern-only server to name its versions to a legacy
			// client, which has no other way to learn why it cannot connect.
			replyError(r, m.ID, codec.CodeInvalidRequest, "this server speaks MCP 2026-07-28 only (no initialize): send requests with _meta "+modern.KeyProtocolVersion+" \"2026-07-28\"", nil)
			return
		}
		s.Initialize(m, r, bind)
	case "ping":
		replyResult(r, m.ID, emptyObject)
	case "server/discover":
		replyError(r, m.ID, codec.CodeMethodNotFound, "Method not found: server/discover (this server speaks initialize-based revisions)", nil)
	default:
		replyError(r, m.ID, codec.CodeInvalidRequest, "session not initialized: send initialize first", nil)
	}
}

type initializeParams struct {
	ProtocolVersion *string         `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
}

// Initialize answers an initialize request: it negotiates the revision as the router
// does, creates the Session, records it with bind and replies with the server's
// capabilities. It runs once per session, so it may use a real parse.
func (s *Server) Initialize(m *codec.Message, r Responder, bind Binder) {
	var p initializeParams
	if len(m.Params) == 0 || sonic.Unmarshal(m.Params, &p) != nil || p.ProtocolVersion == nil {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: initialize needs protocolVersion, capabilities and clientInfo", nil)
		return
	}
	version := router.Negotiate(*p.ProtocolVersion)
	sess := s.NewSession(version, p.Capabilities, nil)
	out, err := bind(version, sess)
	if err != nil {
		replyError(r, m.ID, codec.CodeInvalidRequest, "cannot open session: "+err.Error(), nil)
		return
	}
	sess.mu.Lock()
	sess.out = out
	sess.mu.Unlock()
	bp := getBuf()
	b := beginResult(*bp, m.ID)
	b = s.AppendInitializeResult(b, version)
	b = append(b, '}')
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// AppendInitializeResult appends the InitializeResult object for a session of the given
// revision.
func (s *Server) AppendInitializeResult(dst []byte, version string) []byte {
	dst = append(dst, `{"protocolVersion":`...)
	dst = codec.AppendString(dst, version)
	dst = append(dst, `,"capabilities":`...)
	dst = s.appendCapabilities(dst, version)
	dst = append(dst, `,"serverInfo":{"name":`...)
	dst = codec.AppendString(dst, s.cfg.Name)
	dst = append(dst, `,"version":`...)
	dst = codec.AppendString(dst, s.cfg.Version)
	dst = append(dst, `},"instructions":`...)
	dst = codec.AppendString(dst, instructions)
	return append(dst, '}')
}

// instructions is what initialize and server/discover tell a model about the server.
const instructions = "Reference MCP backend for tests and benchmarks: echo, sleep, payload, fail, progress, sample, touch and log tools; subscribable resources; prompts with completions."

// appendCapabilities appends the ServerCapabilities object for a revision.
func (s *Server) appendCapabilities(dst []byte, version string) []byte {
	dst = append(dst, `{"logging":{},"tools":{"listChanged":false},"resources":{"subscribe":true,"listChanged":false},"prompts":{"listChanged":false}`...)
	if eraOf(version) >= era20250326 {
		dst = append(dst, `,"completions":{}`...)
	}
	return append(dst, '}')
}

// Serve handles one message of an initialized session. m is the codec's scan of the
// message; its views must stay valid until r's Reply or Done, which Serve or a timer
// calls exactly once.
func (s *Server) Serve(m *codec.Message, sess *Session, r Responder) {
	s.Stats.Messages.Add(1)
	switch m.Kind {
	case codec.KindRequest:
		s.request(m, sess, r)
	case codec.KindNotification:
		s.notification(m, sess)
		r.Done()
	case codec.KindResult, codec.KindError:
		sess.answered(m)
		r.Done()
	default:
		r.Done()
	}
}

func (s *Server) notification(m *codec.Message, sess *Session) {
	var mb [64]byte
	switch string(methodOf(m, mb[:0])) {
	case "notifications/initialized":
		sess.initialized.Store(true)
	case "notifications/cancelled":
		if m.RequestID != nil {
			sess.cancel(m.RequestID)
		}
	}
	// Anything else (roots/list_changed, progress of our requests...) needs nothing here.
}

func (s *Server) request(m *codec.Message, sess *Session, r Responder) {
	var mb [64]byte
	method := methodOf(m, mb[:0])
	if s.serveShared(method, m, sess, r) {
		return
	}
	switch string(method) {
	case "ping":
		replyResult(r, m.ID, emptyObject)
	case "resources/subscribe":
		s.subscribe(m, sess, r, true)
	case "resources/unsubscribe":
		s.subscribe(m, sess, r, false)
	case "logging/setLevel":
		s.setLevel(m, sess, r)
	case "initialize":
		replyError(r, m.ID, codec.CodeInvalidRequest, "session already initialized: initialize may be sent once per session", nil)
	case "shutdown":
		// From the seed documents: answer {} and end the session once the answer is out.
		replyResult(r, m.ID, emptyObject)
		if out := sess.sender(); out != nil {
			go out.Close()
		}
	default:
		replyError(r, m.ID, codec.CodeMethodNotFound, "Method not found", nil)
	}
}

// serveShared answers the requests both protocol generations serve alike (tools, lists,
// resources/read, prompts/get, completion), through r: a 2025 session's Responder, or
// the decorator of a 2026-07-28 request. It reports false for any other method.
func (s *Server) serveShared(method []byte, m *codec.Message, sess *Session, r Responder) bool {
	switch string(method) {
	case "tools/call":
		s.Stats.Calls.Add(1)
		s.callTool(m, sess, r)
	case "tools/list", "resources/list", "resources/templates/list", "prompts/list":
		s.list(m, sess, r, s.cat.listOf(method))
	case "resources/read":
		s.readResource(m, sess, r)
	case "prompts/get":
		s.getPrompt(m, r)
	case "completion/complete":
		s.complete(m, r)
	default:
		return false
	}
	return true
}

// methodOf returns the method name, decoded into buf in the rare case it was written
// with escapes.
func methodOf(m *codec.Message, buf []byte) []byte {
	if m.Flags&codec.MethodEscaped == 0 {
		return m.Method
	}
	if dec, err := codec.Unquote(buf, m.Method); err == nil {
		return dec
	}
	return m.Method
}

var emptyObject = []byte("{}")

// replyResult answers with a result given as raw JSON.
func replyResult(r Responder, id, result []byte) {
	bp := getBuf()
	b := codec.AppendResult(*bp, id, result)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// replyError answers with a JSON-RPC error.
func replyError(r Responder, id []byte, code int, msg string, data []byte) {
	bp := getBuf()
	b := codec.AppendError(*bp, id, code, msg, data)
	r.Reply(b)
	*bp = b
	putBuf(bp)
}

// Log levels of logging/setLevel and notifications/message, least severe first.
var logLevels = [...]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

const (
	levelDebug = 0
	levelInfo  = 1
)

func levelIndex(name []byte) int {
	for i, l := range logLevels {
		if l == string(name) {
			return i
		}
	}
	return -1
}

func (s *Server) setLevel(m *codec.Message, sess *Session, r Responder) {
	lvl, ok := stringValue(member(m.Params, "level"))
	i := levelIndex([]byte(lvl))
	if !ok || i < 0 {
		replyError(r, m.ID, codec.CodeInvalidParams, "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency", nil)
		return
	}
	sess.logLevel.Store(int32(i))
	replyResult(r, m.ID, emptyObject)
}

// logTo sends notifications/message on the request's stream when the session's level
// lets it through.
func (s *Server) logTo(r Responder, sess *Session, level int, text string) {
	if int32(level) < sess.logLevel.Load() {
		return
	}
	bp := getBuf()
	b := append(*bp, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"`...)
	b = append(b, logLevels[level]...)
	b = append(b, `","logger":`...)
	b = codec.AppendString(b, s.cfg.Name)
	b = append(b, `,"data":`...)
	b = codec.AppendString(b, text)
	b = append(b, `}}`...)
	r.Send(b)
	*bp = b
	putBuf(bp)
}
