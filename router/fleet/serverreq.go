package fleet

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// Server-to-client requests: a backend's request (sampling, roots, elicitation) goes to
// the client whose request caused it under a router-made id; the client's answer (Prepare
// then Run) goes back to the backend under the backend's own id.

// serverRequest is a request a backend sent to a client (sampling, roots, elicitation),
// waiting for the client's answer. The client sees id; the backend gets backendID back.
type serverRequest struct {
	id        uint64
	method    string
	conn      *upConn
	backendID []byte
	sess      *router.Session
	timer     *time.Timer // the deadline; stopped by whoever removes the request
}

// serverRequests is the part that carries backends' requests to clients and their
// answers back. It owns the book of requests waiting for a client's answer, by id, by
// session and by the backend's id: a session has at most max of them, each waits at
// most its deadline (a timer per request, which expires it), and those of a session
// that ends are answered at once. It reads the in-flight table (never writes it) to
// find the client request a backend's request belongs to.
//
// Who calls it: fromBackend and cancelled run on upstream connections' reader
// goroutines, fromClient in Prepare (the session's order), run on a dispatcher
// worker, expire on its timer's goroutine, dropSession from SessionClosed. Answers to
// backends are sent on goroutines of the fleet's lifecycle; the book has its own lock,
// held for no I/O.
type serverRequests struct {
	life    *lifecycle
	table   *table
	log     *slog.Logger
	stats   *Stats
	max     int           // Config.MaxServerRequests
	timeout time.Duration // Config.ServerRequestTimeout; 0: the backend's own timeout
	park    *parking      // stateless clients' requests waiting for a retry (mrtr.go)

	mu     sync.Mutex
	next   uint64
	m      map[uint64]*serverRequest
	bySess map[*router.Session]map[uint64]*serverRequest
	// byBackend finds a request by the id its backend gave it, for the backend's
	// cancellation. A backend reusing an id still pending keeps only the newer here.
	byBackend map[backendKey]*serverRequest
}

// backendKey names a request as its backend knows it: the upstream session and the id.
type backendKey struct {
	conn *upConn
	id   string
}

func (sr *serverRequest) backendKey() backendKey {
	return backendKey{sr.conn, string(sr.backendID)}
}

func newServerRequests(life *lifecycle, table *table, log *slog.Logger, stats *Stats, max int, timeout time.Duration) *serverRequests {
	return &serverRequests{life: life, table: table, log: log, stats: stats, max: max, timeout: timeout,
		m: map[uint64]*serverRequest{}, bySess: map[*router.Session]map[uint64]*serverRequest{},
		byBackend: map[backendKey]*serverRequest{}}
}

// put records sr with a fresh id and its deadline, when expire runs, unless its session
// has max requests pending.
func (s *serverRequests) put(sr *serverRequest) bool {
	d := s.timeoutFor(sr.conn.b)
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.bySess[sr.sess]
	if len(set) >= s.max {
		return false
	}
	if set == nil {
		set = map[uint64]*serverRequest{}
		s.bySess[sr.sess] = set
	}
	s.next++
	id := s.next
	sr.id = id
	s.m[id] = sr
	set[id] = sr
	s.byBackend[sr.backendKey()] = sr
	sr.timer = time.AfterFunc(d, func() { s.expire(id) })
	return true
}

// remove forgets sr and stops its deadline; the caller holds s.mu.
func (s *serverRequests) remove(sr *serverRequest) {
	delete(s.m, sr.id)
	if k := sr.backendKey(); s.byBackend[k] == sr {
		delete(s.byBackend, k)
	}
	if set := s.bySess[sr.sess]; set != nil {
		delete(set, sr.id)
		if len(set) == 0 {
			delete(s.bySess, sr.sess)
		}
	}
	if sr.timer != nil {
		sr.timer.Stop()
	}
}

// take removes and returns the request with the given id, if sess (nil: any) sent it.
func (s *serverRequests) take(id uint64, sess *router.Session) *serverRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.m[id]
	if sr == nil || (sess != nil && sr.sess != sess) {
		return nil
	}
	s.remove(sr)
	return sr
}

// takeSession removes and returns the session's pending requests (it ended).
func (s *serverRequests) takeSession(sess *router.Session) []*serverRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*serverRequest
	for _, sr := range s.bySess[sess] {
		out = append(out, sr)
	}
	for _, sr := range out {
		s.remove(sr)
	}
	return out
}

// capabilityFor names the client capability a server-to-client method needs.
func capabilityFor(method string) string {
	switch method {
	case "sampling/createMessage":
		return "sampling"
	case "roots/list":
		return "roots"
	case "elicitation/create":
		return "elicitation"
	}
	return ""
}

// fromBackend routes a backend's request to the client it concerns, with its id
// mapped, or answers it when the router can (ping) or no client can.
func (s *serverRequests) fromBackend(c *upConn, msg []byte, m *codec.Message, reqID []byte) {
	method := string(m.Method)
	if method == "ping" {
		s.answer(c, codec.AppendResult(nil, m.ID, []byte("{}")))
		return
	}
	relID := s.table.related(c, reqID)
	// The request's Session is read below, out of the table's lock, while its answer
	// may land: kept, so that a stateless call's is not the next call's by then
	// (router.Session.Keep).
	var sess *router.Session
	if relID != 0 {
		s.table.with(relID, func(e *entry) { sess = e.sess.Keep() })
	}
	if relID != 0 && sess == nil && s.park != nil {
		// A parked call asking more (mrtr.go); unless its retry claimed it meanwhile.
		if s.park.more(c, relID, m) {
			return
		}
		s.table.with(relID, func(e *entry) { sess = e.sess.Keep() })
	}
	if sess == nil {
		sess = c.owner
	}
	if sess != nil && sess.Stateless() {
		// The revision has no server-to-client requests: the client is answered
		// input_required and retries with the answer (mrtr.go).
		if !s.clientCan(c, sess, m) {
			return
		}
		if relID != 0 && s.park != nil && s.park.park(c, relID, m, s.timeoutFor(c.b)) {
			return
		}
		s.answer(c, codec.AppendError(nil, m.ID, codec.CodeInternalError, "mcprouter: the client speaks 2026-07-28, which has no server-to-client requests, and "+method+" came outside a request of its that can answer input_required", nil))
		return
	}
	if sess == nil || sess.TransportSession() == nil {
		s.answer(c, codec.AppendError(nil, m.ID, codec.CodeInternalError, "mcprouter: no client session to route "+method+" to (send it while handling that client's request)", nil))
		return
	}
	if !s.clientCan(c, sess, m) {
		return
	}
	sr := &serverRequest{method: method, conn: c, backendID: append([]byte(nil), m.ID...), sess: sess}
	if !s.put(sr) {
		s.answer(c, codec.AppendError(nil, m.ID, codec.CodeSessionLimit, "mcprouter: the client session already has "+strconv.Itoa(s.max)+" requests from backends waiting for an answer; "+method+" refused", nil))
		return
	}

	out := codec.AppendReplaceID(nil, msg, m, strconv.AppendUint(nil, sr.id, 10))
	sent := false
	if relID != 0 {
		// On the stream of the request that caused it, where the client expects it.
		s.table.with(relID, func(e *entry) { sent = e.x.Send(out) == nil })
	}
	if !sent {
		if err := sess.TransportSession().Send(out); err != nil && s.take(sr.id, nil) != nil {
			s.answer(c, codec.AppendError(nil, m.ID, codec.CodeInternalError, "mcprouter: cannot reach the client: "+err.Error(), nil))
		}
	}
}

// clientCan reports whether sess declared the capability the backend's request m needs,
// and otherwise refuses it to the backend.
func (s *serverRequests) clientCan(c *upConn, sess *router.Session, m *codec.Message) bool {
	if missing := missingCapability(sess.ClientCapabilities(), string(m.Method), m.Params); missing != "" {
		s.answer(c, codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "client does not support "+string(m.Method)+" (no "+missing+" capability)", nil))
		return false
	}
	return true
}

// answer sends a response to a backend in the background (it may be an HTTP POST).
func (s *serverRequests) answer(c *upConn, msg []byte) {
	s.life.spawn(func() {
		ctx, cancel := context.WithTimeout(s.life.ctx, c.b.cfg.Timeout)
		defer cancel()
		if err := c.conn.Send(ctx, msg); err != nil {
			s.log.Debug("cannot answer backend", "backend", c.b.cfg.Name, "err", err)
		}
	})
}

// fromClient takes a client's answer to a server-to-client request, in Prepare: true
// hands it to run.
func (s *serverRequests) fromClient(sess *router.Session, x *transport.Exchange) bool {
	id, ok := parseID(x.Msg.ID)
	if !ok {
		x.Done()
		return false
	}
	sr := s.take(id, sess)
	if sr == nil {
		x.Done()
		return false
	}
	x.Tag = sr
	return true
}

// run passes the client's answer to the backend that asked, with its id (Run).
func (s *serverRequests) run(x *transport.Exchange, sr *serverRequest) {
	out := codec.AppendReplaceID(nil, x.Raw, &x.Msg, sr.backendID)
	x.Tag = nil
	x.Done()
	ctx, cancel := context.WithTimeout(s.life.ctx, sr.conn.b.cfg.Timeout)
	defer cancel()
	if err := sr.conn.conn.Send(ctx, out); err != nil {
		s.log.Warn("cannot pass the client's answer to the backend", "backend", sr.conn.b.cfg.Name, "err", err)
	}
}

// cancelled forwards a backend's cancellation of one of its server-to-client requests.
func (s *serverRequests) cancelled(c *upConn, msg []byte, m *codec.Message) {
	s.mu.Lock()
	sr := s.byBackend[backendKey{c, string(m.RequestID)}]
	if sr != nil {
		s.remove(sr)
	}
	s.mu.Unlock()
	if sr == nil || sr.sess.TransportSession() == nil {
		return
	}
	out := codec.AppendSplices(nil, msg, []codec.Splice{{Old: m.RequestID, New: strconv.AppendUint(nil, sr.id, 10)}})
	sr.sess.TransportSession().Send(out)
}

// timeoutFor is how long a request from backend b waits for a client's answer.
func (s *serverRequests) timeoutFor(b *backend) time.Duration {
	if s.timeout > 0 {
		return s.timeout
	}
	return b.cfg.Timeout
}

// expire answers the backend when its request outlived its deadline, and tells the
// client to stop working on it.
func (s *serverRequests) expire(id uint64) {
	sr := s.take(id, nil)
	if sr == nil || s.life.ended() {
		return
	}
	s.stats.ServerRequestsExpired.Add(1)
	d := s.timeoutFor(sr.conn.b)
	s.answer(sr.conn, codec.AppendError(nil, sr.backendID, codec.CodeClientTimeout, "mcprouter: the client did not answer "+sr.method+" within "+d.String(), nil))
	if t := sr.sess.TransportSession(); t != nil {
		params := append([]byte(`{"requestId":`), strconv.AppendUint(nil, sr.id, 10)...)
		params = append(params, `,"reason":"timed out"}`...)
		t.Send(codec.AppendNotification(nil, "notifications/cancelled", params))
	}
}

// dropSession answers the backends whose requests a closed session will never answer.
func (s *serverRequests) dropSession(sess *router.Session) {
	for _, sr := range s.takeSession(sess) {
		s.stats.ServerRequestsDropped.Add(1)
		if s.life.ended() {
			continue
		}
		s.answer(sr.conn, codec.AppendError(nil, sr.backendID, codec.CodeClientGone, "mcprouter: the client session ended before answering "+sr.method, nil))
	}
}
