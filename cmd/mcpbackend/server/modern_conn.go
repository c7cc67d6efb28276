package server

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// 2026-07-28 requests over the connection-carried transports (stdio, NATS): the message
// comes without HTTP headers, and cancellation is notifications/cancelled naming the
// request, so the requests in flight are tracked per connection. Nothing else is: each
// request is served on what its own _meta says.

// modernConn holds one connection's 2026-07-28 requests in flight, by id token.
type modernConn struct {
	reqs map[string]*Session // under Server.mod.mu
}

// serveModernConn serves x when it is a 2026-07-28 message (or a cancellation of one),
// and reports whether it did.
func (s *Server) serveModernConn(x *transport.Exchange) bool {
	m := &x.Msg
	if m.Kind == codec.KindNotification && string(m.Method) == "notifications/cancelled" && m.RequestID != nil {
		if sess := s.trackedRequest(x.Session, m.RequestID); sess != nil {
			s.cancelRequest(sess, m.RequestID)
			x.Done()
			return true
		}
		return false // a 2025 session's cancellation
	}
	var meta modern.Meta
	if !s.claimsModern(m, &meta, nil) {
		return false
	}
	if m.Kind != codec.KindRequest {
		s.Stats.Messages.Add(1)
		x.Done() // 2026-07-28 defines no other client notification
		return true
	}
	if rej := s.mod.checker.Check(m, &meta, nil); !rej.OK() {
		s.Stats.Messages.Add(1)
		bp := getBuf()
		b := rej.AppendError(*bp, m.ID, s.mod.checker.Supported)
		x.Reply(b)
		*bp = b
		putBuf(bp)
		return true
	}
	sess := s.requestSession(&meta)
	var r Responder = x
	if x.Session != nil {
		key := string(m.ID)
		if !s.track(x.Session, key, sess) {
			replyError(x, m.ID, codec.CodeInvalidRequest, "Invalid Request: a request with this id is already in flight", nil)
			return true
		}
		r = &trackedResponder{Responder: x, srv: s, conn: x.Session, key: key}
	}
	s.serveModern(m, &meta, sess, r)
	return true
}

// trackedResponder forgets its request once it is answered.
type trackedResponder struct {
	Responder
	srv  *Server
	conn *transport.Session
	key  string
}

func (t *trackedResponder) Reply(msg []byte) { t.srv.untrack(t.conn, t.key); t.Responder.Reply(msg) }
func (t *trackedResponder) Done()            { t.srv.untrack(t.conn, t.key); t.Responder.Done() }

// track records a request in flight; false when its id is in flight already.
func (s *Server) track(conn *transport.Session, key string, sess *Session) bool {
	s.mod.mu.Lock()
	defer s.mod.mu.Unlock()
	c := s.conns[conn]
	if c == nil {
		c = &modernConn{reqs: make(map[string]*Session)}
		s.conns[conn] = c
	}
	if _, dup := c.reqs[key]; dup {
		return false
	}
	c.reqs[key] = sess
	return true
}

func (s *Server) untrack(conn *transport.Session, key string) {
	s.mod.mu.Lock()
	if c := s.conns[conn]; c != nil {
		delete(c.reqs, key)
	}
	s.mod.mu.Unlock()
}

func (s *Server) trackedRequest(conn *transport.Session, id []byte) *Session {
	if conn == nil {
		return nil
	}
	s.mod.mu.Lock()
	defer s.mod.mu.Unlock()
	if c := s.conns[conn]; c != nil {
		return c.reqs[string(id)]
	}
	return nil
}

// connClosed ends the requests a closed connection left in flight.
func (s *Server) connClosed(conn *transport.Session) {
	s.mod.mu.Lock()
	c := s.conns[conn]
	delete(s.conns, conn)
	s.mod.mu.Unlock()
	if c == nil {
		return
	}
	for key, sess := range c.reqs {
		s.cancelRequest(sess, []byte(key))
	}
}
