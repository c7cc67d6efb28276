package fleet

import (
	"context"
	"strconv"
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// serverRequest is a request a backend sent to a client (sampling, roots, elicitation),
// waiting for the client's answer. The client sees id; the backend gets backendID back.
type serverRequest struct {
	id        uint64
	conn      *upConn
	backendID []byte
	sess      *router.Session
}

type serverRequests struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]*serverRequest
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

// backendRequest routes a backend's request to the client it concerns, with its id
// mapped, or answers it when the router can (ping) or no client can.
func (f *Fleet) backendRequest(c *upConn, msg []byte, m *codec.Message, reqID []byte) {
	method := string(m.Method)
	if method == "ping" {
		f.answer(c, codec.AppendResult(nil, m.ID, []byte("{}")))
		return
	}
	relID := f.relatedID(c, reqID)
	var sess *router.Session
	if relID != 0 {
		f.table.with(relID, func(e *entry) { sess = e.sess })
	}
	if sess == nil {
		sess = c.owner
	}
	if sess == nil || sess.Transport() == nil {
		f.answer(c, codec.AppendError(nil, m.ID, codec.CodeInternalError, "mcprouter: no client session to route "+method+" to (send it while handling that client's request)", nil))
		return
	}
	if capName := capabilityFor(method); capName != "" && !hasMember(sess.ClientCapabilities(), capName) {
		f.answer(c, codec.AppendError(nil, m.ID, codec.CodeMethodNotFound, "client does not support "+method+" (no "+capName+" capability)", nil))
		return
	}
	sr := &serverRequest{conn: c, backendID: append([]byte(nil), m.ID...), sess: sess}
	f.srv.mu.Lock()
	f.srv.next++
	sr.id = f.srv.next
	f.srv.m[sr.id] = sr
	f.srv.mu.Unlock()

	out := codec.AppendReplaceID(nil, msg, m, strconv.AppendUint(nil, sr.id, 10))
	sent := false
	if relID != 0 {
		// On the stream of the request that caused it, where the client expects it.
		f.table.with(relID, func(e *entry) {
			if e.x != nil {
				sent = e.x.Send(out) == nil
			}
		})
	}
	if !sent {
		if err := sess.Transport().Send(out); err != nil {
			f.srv.mu.Lock()
			delete(f.srv.m, sr.id)
			f.srv.mu.Unlock()
			f.answer(c, codec.AppendError(nil, m.ID, codec.CodeInternalError, "mcprouter: cannot reach the client: "+err.Error(), nil))
		}
	}
}

// answer sends a response to a backend in the background (it may be an HTTP POST).
func (f *Fleet) answer(c *upConn, msg []byte) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(f.ctx, c.b.cfg.Timeout)
		defer cancel()
		if err := c.conn.Send(ctx, msg); err != nil {
			f.log.Debug("cannot answer backend", "backend", c.b.cfg.Name, "err", err)
		}
	}()
}

// clientResponse takes a client's answer to a server-to-client request.
func (f *Fleet) clientResponse(s *router.Session, x *transport.Exchange) bool {
	id, ok := parseID(x.Msg.ID)
	if !ok {
		x.Done()
		return false
	}
	f.srv.mu.Lock()
	sr := f.srv.m[id]
	if sr != nil && sr.sess == s {
		delete(f.srv.m, id)
	} else {
		sr = nil
	}
	f.srv.mu.Unlock()
	if sr == nil {
		x.Done()
		return false
	}
	x.Tag = sr
	return true
}

// answerBackend passes the client's answer to the backend that asked, with its id.
func (f *Fleet) answerBackend(x *transport.Exchange, sr *serverRequest) {
	out := codec.AppendReplaceID(nil, x.Raw, &x.Msg, sr.backendID)
	x.Tag = nil
	x.Done()
	ctx, cancel := context.WithTimeout(f.ctx, sr.conn.b.cfg.Timeout)
	defer cancel()
	if err := sr.conn.conn.Send(ctx, out); err != nil {
		f.log.Warn("cannot pass the client's answer to the backend", "backend", sr.conn.b.cfg.Name, "err", err)
	}
}

// cancelled forwards a backend's cancellation of one of its server-to-client requests.
func (s *serverRequests) cancelled(f *Fleet, c *upConn, msg []byte, m *codec.Message) {
	s.mu.Lock()
	var sr *serverRequest
	for id, r := range s.m {
		if r.conn == c && string(r.backendID) == string(m.RequestID) {
			sr = r
			delete(s.m, id)
			break
		}
	}
	s.mu.Unlock()
	if sr == nil || sr.sess.Transport() == nil {
		return
	}
	out := codec.AppendSplices(nil, msg, []codec.Splice{{Old: m.RequestID, New: strconv.AppendUint(nil, sr.id, 10)}})
	sr.sess.Transport().Send(out)
}
