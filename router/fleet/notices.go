package fleet

import (
	"encoding/hex"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// Notices: notifications in both directions. From backends (on the connection's reader
// goroutine): progress and logging go to the client whose request they belong to, list
// changes refresh the catalog and are announced to every client and router instance,
// resource updates go to subscriptions. From clients (in Prepare): cancellations settle
// the request in the in-flight table and tell the backend; roots changes go to the
// client's own upstream sessions.

// broadcast sends a notification to every client session.
func (f *Fleet) broadcast(method string) {
	msg := codec.AppendNotification(nil, method, nil)
	for _, st := range f.sessions.all() {
		if t := st.sess.TransportSession(); t != nil {
			t.SendNotice(msg)
		}
	}
}

// announceChange tells the other router instances that a backend's lists changed, so
// that instances without their own session to it (or that missed the notification)
// refresh too. Each instance tells its clients once: a refresh that finds nothing new
// says nothing.
func (f *Fleet) announceChange(b *backend) {
	if bus := f.cfg.Bus; bus != nil {
		bus.NC.Publish(bus.Subject("changed", backendToken(b.cfg.Name)), nil)
	}
}

// listenChanges refreshes a backend's catalog when another instance announces a change.
func (f *Fleet) listenChanges() {
	bus := f.cfg.Bus
	if bus == nil {
		return
	}
	byToken := map[string]*backend{}
	for _, b := range f.backends {
		byToken[backendToken(b.cfg.Name)] = b
	}
	sub, err := bus.NC.Subscribe(bus.Subject("changed", "*"), func(m *nats.Msg) {
		tok := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		b := byToken[tok]
		if b == nil {
			return
		}
		in := b.pick()
		if in == nil {
			return
		}
		c := in.conn.Load()
		if c == nil {
			return
		}
		f.life.spawn(func() { f.catalog.refresh(b, c) })
	})
	if err != nil {
		f.log.Warn("cannot listen for catalog changes on NATS", "err", err)
		return
	}
	go func() { <-f.life.ctx.Done(); sub.Unsubscribe() }()
}

// backendToken is a backend name as one subject token.
func backendToken(name string) string { return hex.EncodeToString([]byte(name)) }

// fanOut hands a resource update to each subscribed session's stream and records the
// delivery latency from received (when the router got it from the backend, unix ns).
func (f *Fleet) fanOut(list []*router.Session, msg []byte, received int64) {
	var obs interface{ FanOutDelivered(ns int64) }
	if o, ok := f.rep.obs.(interface{ FanOutDelivered(ns int64) }); ok && received > 0 {
		obs = o
	}
	for _, sess := range list {
		if t := sess.TransportSession(); t != nil {
			t.SendNotice(msg)
			if obs != nil {
				obs.FanOutDelivered(time.Now().UnixNano() - received)
			}
		}
	}
	f.Stats.FanOut.Add(uint64(len(list)))
}

// SessionAdopted implements router.Fleet: a session that moved here gets a fresh
// notifications/resources/updated for each of its subscriptions, since an update may
// have been emitted while no instance held it.
func (f *Fleet) SessionAdopted(s *router.Session) {
	t := s.TransportSession()
	if t == nil {
		return
	}
	for _, k := range f.subs.list(s) {
		params := append([]byte(`{"uri":`), codec.AppendString(nil, k.uri)...)
		params = append(params, '}')
		t.SendNotice(codec.AppendNotification(nil, "notifications/resources/updated", params))
	}
}

// backendNotification handles a notification from a backend; reqID, when known, is the
// backend's id of the request on whose reply stream it came.
func (f *Fleet) backendNotification(c *upConn, msg []byte, m *codec.Message, reqID []byte) {
	switch string(m.Method) {
	case "notifications/progress":
		tok := m.ProgressToken
		id, ok := parseID(tok)
		if !ok {
			return
		}
		bp := getBuf()
		f.table.with(id, func(e *entry) {
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
		f.subs.updated(c.b, uri, msg)
	case "notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed":
		f.life.spawn(func() { f.catalog.refresh(c.b, c) })
		f.announceChange(c.b)
	case "notifications/cancelled":
		// The backend gave up one of its requests to a client.
		f.srv.cancelled(c, msg, m)
	default:
		// notifications/message (logging) and the rest go to the client the message
		// belongs to: the requester when known, the session owner in per-client mode.
		sent := false
		if id := f.table.related(c, reqID); id != 0 {
			sent = f.table.with(id, func(e *entry) { e.x.Send(msg) })
		}
		if !sent && c.owner != nil && c.owner.TransportSession() != nil {
			c.owner.TransportSession().Send(msg)
		}
	}
}

// clientNotification handles a notification from a client that concerns backends.
func (f *Fleet) clientNotification(s *router.Session, x *transport.Exchange) bool {
	switch string(x.Msg.Method) {
	case "notifications/cancelled":
		f.fwd.cancel(s, x.Msg.RequestID)
	case "notifications/roots/list_changed":
		f.sessions.eachConn(s, func(c *upConn) {
			c.conn.Send(f.life.ctx, codec.AppendNotification(nil, "notifications/roots/list_changed", nil))
		})
	}
	x.Done()
	return false
}
