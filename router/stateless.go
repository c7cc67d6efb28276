package router

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/router/params"
	"github.com/mcprouter/mcprouter/transport"
)

// Stateless requests (MCP 2026-07-28): no session, every request carrying its revision
// and the client's capabilities in params._meta. The transport hands the router each
// request it claims (Stateless) with its headers; the router judges it (modern.Checker:
// _meta, headers against the body, version, method), answers server/discover itself,
// and sends the rest to the fleet on a Session made for that one request from its _meta
// (statelessSession): the fleet's forwarding, tracking and cancellation stay what they
// are for a session, and nothing is kept once the request is answered. What goes back
// passes the screen: every result gets resultType and the router's serverInfo (and the
// caching fields of a cacheable one), and a notifications/message goes out only when the
// request asked for log messages at its level or above.
//
// The route comes from the body, with Mcp-Method and Mcp-Name checked against it, not
// from the headers in its place: the router processes the body (it rewrites the id and
// checks the params), and the revision requires any server that does to reject headers
// that disagree with it (-32020, HTTP 400). That costs no second parse: the transport's
// one scan (codec.Scan) yields the method, params.name and params.uri the route is
// taken from, and the headers are compared with those bytes (modern.CheckHeaders).

// StatelessFleet is what a Fleet offers stateless clients beyond Fleet; the router uses
// it when its fleet implements it.
type StatelessFleet interface {
	// CancelRequest cancels the request id of the stateless session s, forwarded and
	// not yet answered: its client closed the request's stream.
	CancelRequest(s *Session, id []byte)
	// ListCache returns the caching fields of what the fleet answers to a list method
	// (tools/list...) from its merged catalog: the smallest ttlMs and the most
	// restrictive scope of the backends that contributed.
	ListCache(method []byte) modern.Cache
	// Listen serves subscriptions/listen on x for s: the acknowledgement, then the
	// notifications asked for, each tagged with the subscription id, until the client
	// closes the stream or EndListeners ends it with its result. It finishes x.
	Listen(s *Session, x *transport.Exchange)
	// EndListeners ends every listen stream gracefully (the router is closing).
	EndListeners()
	// EndParked ends every call waiting for its client's retry with answers
	// (input_required) and parks none after: the router is closing, and such a call's
	// backend would otherwise hold the wait for the calls in flight.
	EndParked()
}

// statelessState is what the router judges and decorates stateless requests with,
// made once.
type statelessState struct {
	checker modern.Checker
	// decoration is what every result gets but its caching fields: the router's
	// serverInfo (its Implementation object), in place of a 2026-07-28 backend's own:
	// the client speaks to the router, which says who it is, as at initialize.
	decoration modern.Decoration
	// open holds the stateless requests in flight on a transport that cancels with
	// notifications/cancelled rather than by closing a stream (stdio): (its transport
	// session, the request id) → the request's Session, until it is answered.
	open sync.Map
	// discover is the server/discover result of the fleet's current generation
	// (discover.go).
	discover atomic.Pointer[discoverResult]
	// metas are the _meta read lately (stateless_meta.go).
	metas *metaMemos
}

// openKey names a stateless request in flight on a transport session.
type openKey struct {
	t  *transport.Session
	id string
}

func newStatelessState(cfg *Config) statelessState {
	return statelessState{
		checker:    modern.Checker{Supported: StatelessVersions},
		decoration: modern.Decoration{ServerInfo: modern.AppendImplementation(nil, cfg.Name, cfg.Version), ReplaceInfo: true},
		metas:      newMetaMemos(),
	}
}

// The modes of Config.Stateless.
const (
	// StatelessAuto serves 2026-07-28 requests statelessly when the fleet can answer
	// them without translating between protocol generations (Native); otherwise such
	// a client is answered as a 2025 server answers it (server/discover is -32601) and
	// falls back to initialize and a session, which keeps every feature: a 2025-era
	// backend's requests to the client (sampling, elicitation, roots), per-client
	// upstream sessions and log levels, which the stateless path does not translate yet.
	StatelessAuto = "auto"
	// StatelessOn serves every 2026-07-28 request statelessly; what needs translation
	// gets an error that says so.
	StatelessOn = "on"
	// StatelessOff never does: every client opens a session.
	StatelessOff = "off"
)

// NativeFleet is a fleet that can tell whether it serves stateless clients natively:
// every backend speaks 2026-07-28 over one shared connection, so nothing of a
// stateless request needs translating.
type NativeFleet interface {
	Native() bool
}

// servesStateless applies Config.Stateless.
func (r *Router) servesStateless() bool {
	switch r.cfg.Stateless {
	case StatelessOn:
		return true
	case StatelessOff:
		return false
	}
	if r.fleet == nil {
		return true
	}
	nf, ok := r.fleet.(NativeFleet)
	return ok && nf.Native()
}

// Stateless implements transport.StatelessPolicy: a message whose _meta carries a
// protocol version, or whose MCP-Protocol-Version header names a stateless revision, is
// served statelessly (an unknown version then gets -32022, not a session). m nil: a GET
// or DELETE, judged on the header.
func (r *Router) Stateless(m *codec.Message, header []byte) bool {
	// The claim first: it is read for every message, and a session's messages claim
	// nothing; only a claiming one pays for asking the fleet (servesStateless). The
	// header claims on its own, so an HTTP request that has it (every 2026-07-28 one)
	// is not read twice: handleStateless reads its _meta.
	switch {
	case modern.IsModernVersion(header):
		return r.servesStateless()
	case m == nil:
		return false
	}
	var meta modern.Meta
	modern.ReadMetaOf(m, &meta)
	return meta.Claimed(nil) && r.servesStateless()
}

// handleStateless answers or forwards a stateless message; true: done (answered here or
// by the fleet's Prepare), false: the fleet's Run follows.
func (r *Router) handleStateless(j *job) bool {
	x := j.x
	m := &x.Msg
	if m.Kind != codec.KindRequest {
		// Without a session a notification concerns nothing the router holds but a
		// stdio client's cancellation (over HTTP, the closing of the request's stream).
		if x.Session != nil && string(m.Method) == "notifications/cancelled" && m.RequestID != nil {
			r.cancelStateless(x.Session, m.RequestID)
		}
		j.done()
		return true
	}
	var meta modern.Meta
	memo := r.modern.metas.read(m, &meta)
	var hp *modern.Headers
	if x.Carrier == transport.CarrierStreamable {
		hp = &modern.Headers{Version: x.Headers.Version, Method: x.Headers.Method, Name: x.Headers.Name}
	}
	if rej := r.modern.checker.Check(m, &meta, hp); !rej.OK() {
		j.buf = rej.AppendError(j.buf[:0], m.ID, DiscoverVersions)
		j.refuse(rej.Status)
		return true
	}
	if lvl := meta.LogLevel; lvl != nil && modern.LogLevelIndex(lvl) < 0 {
		j.buf = codec.AppendError(j.buf[:0], m.ID, codec.CodeInvalidParams,
			"Invalid params: _meta."+modern.KeyLogLevel+" is not a log level (debug, info, notice, warning, error, critical, alert, emergency)", nil)
		j.refuse(http.StatusBadRequest)
		return true
	}
	// After the revision's own refusals (-32020..-32022), which say more to a client
	// that got the revision wrong than a member of its params would. A _meta kept
	// (memo) has its schema checked once, not with every request that carries it; the
	// refusal checks params again for its answer, the rare case.
	if params.ValidateJudged(V20260728, m.Method, m.Params, m.Meta, memo.judgement()) != nil &&
		j.refuseParams(V20260728, m.Method) {
		return true
	}
	if string(m.Method) == "server/discover" {
		r.discover(j)
		return true
	}
	if r.fleet == nil {
		j.buf = codec.AppendError(j.buf[:0], m.ID, codec.CodeMethodNotFound, "Method not found: this router has no backends", nil)
		j.refuse(http.StatusNotFound)
		return true
	}
	sf, ok := r.fleet.(StatelessFleet)
	listen := ok && string(m.Method) == "subscriptions/listen"
	q := r.statelessSession(x, &meta, memo, ok && !listen && x.Session == nil)
	s := &q.s
	j.s = s
	if ok && x.Session != nil {
		r.modern.open.Store(openKey{x.Session, string(m.ID)}, s)
	}
	if listen {
		j.observe(OutcomeOK)
		sf.Listen(s, x)
		j.x = nil
		return true
	}
	if ok {
		x.OnAbandonBy(q)
	}
	return !r.fleet.Prepare(s, x)
}

// refuse answers j's stateless request with the error response in j.buf, with its HTTP
// status (the revision says some errors with a status too).
func (j *job) refuse(status int) {
	j.observe(OutcomeError)
	j.x.SetStatus(status)
	j.x.Reply(j.buf)
	j.x = nil
}

// cancelStateless cancels the stateless request id of transport session t (its
// client's notifications/cancelled), a listen stream included.
func (r *Router) cancelStateless(t *transport.Session, id []byte) {
	v, ok := r.modern.open.LoadAndDelete(openKey{t, string(id)})
	if !ok {
		return
	}
	if sf, ok := r.fleet.(StatelessFleet); ok {
		sf.CancelRequest(v.(*Session), id)
	}
}

// statelessSession makes the Session of one stateless request: its revision, the
// client's capabilities and clientInfo from its _meta, its sender, and its log level;
// q.id is a copy of the request's id, for its cancellation. The capabilities and
// clientInfo are the kept copy's when meta was read from one (memo, see metaMemos), else
// copied (the request's bytes go with its answer). It is never bound to the transport,
// never opened with the fleet, and never persisted. The Session and the copies come in
// one allocation (statelessCall) when they fit; pooled, that allocation is one a call
// finished before gave back (statelessCalls), and goes back when this one finishes.
func (r *Router) statelessSession(x *transport.Exchange, meta *modern.Meta, memo *metaMemo, pooled bool) *statelessCall {
	q := newStatelessCall(pooled)
	s := &q.s
	s.version, s.r, s.principal = V20260728, r, x.Principal
	caps, info, rid := meta.Capabilities, meta.ClientInfo, x.Msg.ID
	need := len(rid)
	if memo == nil {
		need += len(caps) + len(info)
	}
	buf := q.inline[:0]
	if need > len(q.inline) {
		buf = make([]byte, 0, need)
	}
	buf = append(buf, rid...)
	q.id = buf[:len(rid):len(rid)]
	switch {
	case memo != nil:
		s.client = memo.client
	case len(caps)+len(info) > 0:
		buf = append(buf, caps...)
		buf = append(buf, info...)
		q.client = clientFields{b: buf[len(rid):len(buf):len(buf)], n: len(caps)}
		s.client = &q.client
	}
	return q
}

// statelessCall is the Session of one stateless request with room for the request's
// id. It is also what the transport runs when the client abandons the request
// (Abandon), so that registering that costs no closure, and what it tells when the
// request finished with its client there (Unused), when a pooled one goes back.
//
// Who may hold a pooled one, and until when: the router and the fleet while the request
// is in flight (the in-flight table's entry, the forward, the policy, the screen), the
// transport's abandon hook until the request finishes. The request finishes when the
// transport has its answer (Exchange.Reply or Done); neither the router nor the fleet
// uses the Session of a request after answering it, and the transport then drops the
// hook (Abandon will never run), which it says by running Unused: the one point where
// it goes back to statelessCalls. Whoever keeps the Session past the answer (a
// principal's upstream session, a retry relayed to another instance, a backend's
// request being judged) calls Session.Keep first, and the call is then left to the
// collector. Requests that keep theirs by their nature are never pooled: a listen
// stream's (held for hours, fleet.Listen), a stdio client's (r.modern.open holds it
// for its notifications/cancelled), and any whose fleet registers no abandon hook. A
// request the client abandoned is not pooled either: Abandon may run while it is being
// answered, and Unused then never runs. A stale holder reads a zeroed Session (recycle)
// and races with the next call's writes, which -race reports.
type statelessCall struct {
	s      Session
	client clientFields // s.client when the request's _meta was not kept
	id     []byte
	inline [statelessInline]byte
}

// statelessCalls are the statelessCalls of finished plain calls (Unused), for the next:
// a 2026-07-28 call allocates nothing of the router's, as a 2025 session's call does
// not (each was one 144-byte object, which under load made the collector run for the
// stateless path alone).
var statelessCalls = sync.Pool{New: func() any { return new(statelessCall) }}

// newStatelessCall returns a blank statelessCall for a stateless Session: from the
// pool when pooled, which marks it to go back there (sessPooled), else a new one.
func newStatelessCall(pooled bool) *statelessCall {
	if !pooled {
		q := new(statelessCall)
		q.s.flags.Store(sessStateless)
		return q
	}
	q := statelessCalls.Get().(*statelessCall)
	q.s.flags.Store(sessStateless | sessPooled)
	return q
}

// Abandon implements transport.Abandoner: the client closed the request's stream, which
// cancels it. It is registered only with a fleet that cancels stateless requests, which
// it asks again here rather than keep it in every request's allocation. Once it runs,
// Unused does not: the call is never recycled (the fleet may be answering it still).
func (q *statelessCall) Abandon() {
	if sf, ok := q.s.r.fleet.(StatelessFleet); ok {
		sf.CancelRequest(&q.s, q.id)
	}
}

// Unused implements transport.UnusedAbandoner: the request finished with its client
// there, so nothing uses q any more but a holder that Kept it; a pooled q nobody kept
// goes back to statelessCalls. Run under the transport's lock of the request: it only
// clears q and puts it in the pool.
func (q *statelessCall) Unused() {
	if q.s.flags.Load()&sessPooled == 0 {
		return
	}
	*q = statelessCall{}
	statelessCalls.Put(q)
}

// statelessInline holds an id as clients write them (a number, a short string): with
// it statelessCall is 144 bytes, a size class of its own (the fleet it would cancel
// with is not kept: 16 bytes more made it 160).
const statelessInline = 16

// ScreenReply implements transport.StatelessScreen: a result gets what every 2026-07-28
// result carries and lacks (resultType, the router's serverInfo in _meta, in place of a
// backend's own) and, for a cacheable method, ttlMs and cacheScope: the fleet's merged
// fields for a list it answers, the backend's (or the conservative default, 0 and
// private) for the rest. Errors pass with their codes in the revision's numbering. The
// reply is read in one walk here (modern.ReadReply: the result entered in place, where a
// scan and then the decoration walked it twice), and its HTTP status settled from that
// walk (a result 200, an error by its code), so that the transport does not scan it
// again (StatusOf). Most results need no walk at all: one written the common way, with
// none of the members the decoration depends on, gets them inserted after its opening
// brace (modern.AppendPlainDecorated), unless its method's results are cacheable
// (their caching fields are read from the result or the fleet).
func (r *Router) ScreenReply(x *transport.Exchange, msg, buf []byte) []byte {
	if x.Session != nil {
		r.modern.open.Delete(openKey{x.Session, string(x.Msg.ID)})
	}
	def := modern.LookupMethod(x.Msg.Method)
	if def == nil || !def.Cacheable {
		if out, ok := modern.AppendPlainDecorated(buf, msg, x.Msg.ID, &r.modern.decoration); ok {
			x.SettleStatus(http.StatusOK)
			return out
		}
	}
	var rp modern.Reply
	modern.ReadReply(msg, &rp)
	if rp.Kind == codec.KindError {
		if re := r.reshapeError(x, rp.Error); re != nil { // reshape.go
			msg = re
			modern.ReadReply(msg, &rp)
		}
	}
	switch rp.Kind {
	case codec.KindError:
		out, code := appendModernError(buf, msg, rp.Error)
		x.SettleStatus(modern.HTTPStatus(code))
		return out
	case codec.KindResult:
		x.SettleStatus(http.StatusOK)
	default:
		return msg
	}
	d := r.modern.decoration
	var cache modern.Cache
	if def != nil && def.Cacheable && string(rp.ResultType()) == modern.ResultComplete {
		switch sf, ok := r.fleet.(StatelessFleet); {
		case ok && isList(x.Msg.Method):
			cache = sf.ListCache(x.Msg.Method)
		default:
			cache = rp.Cache()
		}
		d.Cache = &cache
	}
	return rp.AppendDecorated(buf, msg, &d)
}

// appendModernError appends the error response msg (whose error object is errObj) with
// its code in the revision's numbering (modern.ErrorToModern: a 2025 backend's or the
// fleet's resource not found is -32602 there), or returns msg itself when the code means
// the same; code is the code of what it returns (0 when msg has none).
func appendModernError(buf, msg, errObj []byte) (out []byte, code int) {
	val := codec.Member(errObj, "code")
	code, err := strconv.Atoi(string(val))
	if err != nil {
		return msg, 0
	}
	if mod, reshape := modern.ErrorToModern(code); !reshape && mod != code {
		var nb [12]byte
		return codec.AppendSplices(buf, msg, []codec.Splice{{Old: val, New: strconv.AppendInt(nb[:0], int64(mod), 10)}}), mod
	}
	return msg, code
}

// isList reports whether a method is one of the lists the fleet merges.
func isList(method []byte) bool {
	switch string(method) {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
		return true
	}
	return false
}

// ScreenSend implements transport.StatelessScreen: a notifications/message goes out
// only when the request's _meta set a log level and the message is at it or above (a
// 2025 backend logs at its session's level, whoever asked); everything else passes.
func (r *Router) ScreenSend(x *transport.Exchange, msg, buf []byte) ([]byte, bool) {
	var m codec.Message
	if codec.Scan(msg, &m) != nil || m.Kind != codec.KindNotification || string(m.Method) != "notifications/message" {
		return msg, true
	}
	var meta modern.Meta
	modern.ReadMetaOf(&x.Msg, &meta)
	if meta.LogLevel == nil {
		return nil, false
	}
	if l := modern.MessageLevel(m.Params); l != nil && modern.LogLevelIndex(l) < modern.LogLevelIndex(meta.LogLevel) {
		return nil, false
	}
	return msg, true
}

// StatusOf is the HTTP status of a stateless request's JSON reply
// (transport.HTTPConfig.StatusOf): by the code of an error, 404 for an unknown method
// and 400 for the revision's request errors, whether the router or a backend made it.
// A batch or a result keeps 200 (0).
func StatusOf(reply []byte) int {
	var m codec.Message
	if codec.IsBatch(reply) || codec.Scan(reply, &m) != nil || m.Kind != codec.KindError {
		return 0
	}
	return modern.HTTPStatus(modern.ErrorCode(m.Error))
}
