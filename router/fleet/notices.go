package fleet

import (
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// notices is the part that carries notifications: from backends (fromBackend, on the
// connection's reader goroutine) progress and logging go to the client whose request
// they belong to, list changes refresh the catalog and are announced to the other
// router instances, resource updates go to the subscriptions, a backend's cancellation
// of its own request to a client goes to serverRequests; from clients (fromClient, in
// Prepare) cancellations go to the forwarder and roots changes to the client's own
// upstream sessions; to every client, list changes (broadcast) and resource updates
// (fanOut). It owns no state: each notification goes to the part that owns what it
// concerns.
type notices struct {
	life     *lifecycle
	table    *table // read only: the request a notification belongs to
	sessions *sessions
	catalog  *catalogBuilder
	bus      *changeBus
	srv      *serverRequests
	subs     subscriber
	fwd      *forwarder
	rep      *reporter
	stats    *Stats
	pol      *policer // nil without a policy: list_changed to every session (policy_list.go)
}

// broadcast sends a notification to every client session.
func (n *notices) broadcast(method string) {
	msg := codec.AppendNotification(nil, method, nil)
	var changed func(*router.Session) bool
	if n.pol != nil {
		changed = n.pol.changedFor(method, n.catalog.load())
	}
	for _, st := range n.sessions.all() {
		if t := st.sess.TransportSession(); t != nil && (changed == nil || changed(st.sess)) {
			t.SendNotice(msg)
		}
	}
}

// fanOut hands a resource update to each subscribed session's stream and records the
// delivery latency from received (when the router got it from the backend, unix ns).
func (n *notices) fanOut(list []*router.Session, msg []byte, received int64) {
	var obs router.Observer
	if received > 0 {
		obs = n.rep.obs // nil: nothing observed
	}
	for _, sess := range list {
		if t := sess.TransportSession(); t != nil {
			t.SendNotice(msg)
		} else if sess.Stateless() {
			n.catalog.listeners.updated(sess, msg) // a listen stream's (listen_client.go)
		} else {
			continue
		}
		// Timed for a 2026-07-28 client's listen stream as for a session's stream:
		// the delivery panel shows both.
		if obs != nil {
			obs.FanOutDelivered(time.Now().UnixNano() - received)
		}
	}
	n.stats.FanOut.Add(uint64(len(list)))
}

// adopted sends a session that moved here a fresh notifications/resources/updated for
// each of its subscriptions, since an update may have been emitted while no instance
// held it.
func (n *notices) adopted(s *router.Session) {
	t := s.TransportSession()
	if t == nil {
		return
	}
	for _, k := range n.subs.list(s) {
		t.SendNotice(codec.AppendNotification(nil, "notifications/resources/updated", uriParams(k.uri)))
	}
}

// fromBackend handles a notification from a backend; reqID, when known, is the
// backend's id of the request on whose reply stream it came.
func (n *notices) fromBackend(c *upConn, msg []byte, m *codec.Message, reqID []byte) {
	switch string(m.Method) {
	case "notifications/progress":
		tok := m.ProgressToken
		id, ok := parseID(tok)
		if !ok {
			return
		}
		bp := getBuf()
		n.table.with(id, func(e *entry) {
			if e.progress {
				*bp = codec.AppendSplices((*bp)[:0], msg, []codec.Splice{{Old: tok, New: e.origToken}})
				e.x.Send(*bp)
			}
		})
		putBuf(bp)
	case "notifications/resources/updated":
		uri := string(m.URI)
		if m.Flags&codec.URIEscaped != 0 {
			if u, err := codec.Unquote(nil, m.URI); err == nil {
				uri = string(u)
			}
		}
		if c.modern {
			// Without the router's own subscriptionId, which means nothing to clients.
			msg = codec.AppendNotification(nil, "notifications/resources/updated",
				append(append(append([]byte(`{"uri":"`), m.URI...), '"'), '}'))
		}
		if !n.sessions.principalUpdated(c, uri, msg, &n.catalog.listeners) { // listen_principal.go
			n.subs.updated(c.b, uri, msg)
		}
	case "notifications/subscriptions/acknowledged":
		if c.listen != nil {
			c.listen.acked(m.Params)
		}
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		n.life.spawn(func() { n.catalog.refresh(c.b, c) })
		n.bus.announce(c.b)
	case "notifications/cancelled":
		// The backend gave up one of its requests to a client.
		n.srv.cancelled(c, msg, m)
	default:
		// notifications/message (logging) and the rest go to the client the message
		// belongs to: the requester when known, the session owner in per-client mode.
		sent := false
		if id := n.table.related(c, reqID); id != 0 {
			sent = n.table.with(id, func(e *entry) {
				if e.x.Stateless && modern.DroppedForModern(m.Method) {
					return // 2026-07-28 has no such notification (modern.Mappings)
				}
				if !n.sessions.conns.belowLevel(e.sess, m) { // loglevel.go
					e.x.Send(msg)
				}
			})
		}
		if !sent && c.owner != nil && c.owner.TransportSession() != nil && !n.sessions.conns.belowLevel(c.owner, m) {
			c.owner.TransportSession().Send(msg)
		}
	}
}

// fromClient handles a notification from a client that concerns backends.
func (n *notices) fromClient(s *router.Session, x *transport.Exchange) bool {
	switch string(x.Msg.Method) {
	case "notifications/cancelled":
		n.fwd.cancel(s, x.Msg.RequestID)
	case "notifications/roots/list_changed":
		n.rootsChanged(s)
	}
	x.Done()
	return false
}

// rootsChanged passes a client's notifications/roots/list_changed to its own upstream
// sessions with 2025 backends; for 2026-07-28 ones it is absorbed (modern.Mappings):
// the revision has no such notification, its servers ask for roots anew each time.
func (n *notices) rootsChanged(s *router.Session) {
	n.sessions.eachConn(s, func(c *upConn) {
		if c.modern {
			return
		}
		c.conn.Send(n.life.ctx, codec.AppendNotification(nil, "notifications/roots/list_changed", nil))
	})
}
