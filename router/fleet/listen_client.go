package fleet

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// subscriptions/listen for stateless (2026-07-28) clients: the stream that replaces a
// session's GET stream. The fleet acknowledges the subset of the client's filter it
// honours, then sends each list change of the merged catalog the client asked for, every
// message tagged with the subscription's id (the listen request's JSON-RPC id); the
// stream ends when the client closes it (the transport's OnAbandon) or, gracefully, with
// a result when the router shuts down (EndListeners).
//
// List changes reach it wherever they come from: a backend's list_changed here, or
// another router instance's over the bus, both of which refresh the catalog, whose
// change notices feed clientListeners.changed.
//
// resourceSubscriptions are honoured for the URIs a backend serves and lets clients
// subscribe to (the rest are left out of the acknowledgement, as the revision allows).

// clientListeners holds this instance's listen streams (the catalog owns it, beside the
// list changes that feed it). Who calls it: Listen (add, from the listen request's Run:
// a worker or the request's own goroutine), the goroutine that announces a list change
// (changed: a catalog refresh, a reload), the fan-out of a resource update (updated, on
// the goroutine that received it: an upstream reader or the bus's), a client leaving
// (remove, from the transport's close watcher) and EndListeners (the router's Close).
// Its lock is held for no I/O: sends go out under each stream's own lock. The zero
// value is ready.
type clientListeners struct {
	mu sync.Mutex
	// bySess is every stream, by its stateless session (one stream each): the set the
	// list changes go to, and where resource updates find theirs.
	bySess map[*router.Session]*clientListener
	closed bool // EndListeners ran: no new streams
}

// clientListener is one listen stream: its request, held (transport.Held: the request's
// bytes, scan and headers given back once admitted) until the client leaves or the
// router ends it, and the notifications it asked for.
type clientListener struct {
	mu    sync.Mutex // serializes sends with the end of the exchange
	x     *transport.Held
	ln    *listening      // for Abandon
	sess  *router.Session // the stateless session of the listen request
	acked bool            // nothing goes out before the acknowledgement
	done  bool
	id    []byte // the subscription id: the request's raw JSON-RPC id, copied

	tools, prompts, resources bool
	uris                      []string // the resources subscribed to, until acknowledged
}

// listenFilter is the params.notifications of subscriptions/listen.
type listenFilter struct {
	Notifications struct {
		ToolsListChanged      bool     `json:"toolsListChanged"`
		PromptsListChanged    bool     `json:"promptsListChanged"`
		ResourcesListChanged  bool     `json:"resourcesListChanged"`
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	} `json:"notifications"`
}

// listening is the part that serves subscriptions/listen: it opens each stream (its
// acknowledgement once its subscriptions hold), and ends it (the client leaving, its
// principal's upstream session lost, the router's Close); the streams themselves are
// the catalog's clientListeners, which list changes and resource updates reach. Who
// calls it: Listen, from the listen request's Run (a worker or the request's own
// goroutine); Abandon, from the transport's close watcher; the sessions part when a
// principal's upstream session is lost (endAllWith); CancelRequest (stdio cancels a
// stream by notification); EndListeners, from the router's Close. Subscribing waits for
// backends, so it runs on a goroutine of the fleet's lifecycle.
type listening struct {
	streams  *clientListeners // the catalog's
	catalog  *catalogBuilder
	set      *backendSet
	subs     subscriber
	sessions *sessions
	routes   *routing // for its policy (routes.pol), which SetPolicy sets after New
	rep      *reporter
	life     *lifecycle
	log      *slog.Logger
}

// Listen implements router.StatelessFleet: it opens a listen stream for stateless
// session s on x, which it finishes when the stream ends.
func (f *Fleet) Listen(s *router.Session, x *transport.Exchange) { f.listening.open(s, x) }

// open opens a listen stream for stateless session s on x (Listen).
func (f *listening) open(s *router.Session, x *transport.Exchange) {
	var p listenFilter
	if len(x.Msg.Params) > 0 {
		if err := sonic.Unmarshal(x.Msg.Params, &p); err != nil {
			f.rep.replyErr(x, codec.CodeInvalidParams, "Invalid params: subscriptions/listen needs a notifications object")
			return
		}
	}
	// The stream opens with the acknowledgement, once the subscriptions hold: a client
	// may take the opening of the stream for it.
	x.HoldStream()
	n := p.Notifications
	l := &clientListener{sess: s, id: append([]byte(nil), x.Msg.ID...)}
	l.tools = n.ToolsListChanged && f.offers("tools")
	l.prompts = n.PromptsListChanged && f.offers("prompts")
	l.resources = n.ResourcesListChanged && f.offers("resources")
	uris := n.ResourceSubscriptions
	if pol := f.routes.pol; pol != nil { // the rules on its entries (policy_listen.go)
		var ok bool
		if uris, ok = pol.listenEntries(f.rep, s, x, f.catalog.load(), uris, l.tools || l.prompts || l.resources); !ok {
			return
		}
	}

	ls := f.streams
	// Under l.mu until x is held: once added, the stream may be ended (EndListeners,
	// the client leaving), which takes l.mu before it uses l.x.
	l.mu.Lock()
	if !ls.add(l) {
		l.mu.Unlock()
		f.rep.replyErr(x, codec.CodeOverloaded, "the router is shutting down: subscriptions/listen refused")
		return
	}
	l.ln = f
	x.OnAbandonBy(l) // Abandon: no closure per stream
	l.x = x.Hold()   // x is not to be used from here on
	l.mu.Unlock()
	if len(uris) == 0 {
		f.acknowledge(l)
		return
	}
	// Subscribing waits for backends: not on the dispatcher's goroutine.
	f.life.spawn(func() {
		l.uris = f.subscribe(l, uris)
		f.acknowledge(l)
	})
}

// Abandon implements transport.Abandoner: the client closed the stream, which ends it
// without a reply.
func (l *clientListener) Abandon() { l.ln.end(l, nil) }

// acknowledge sends l's acknowledgement, after which its notifications may flow; a
// client that takes no stream is answered with an error instead.
func (f *listening) acknowledge(l *clientListener) {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return
	}
	err := l.x.Send(l.ack())
	l.acked = err == nil
	l.uris = nil // told; what holds is in the subscriptions
	l.mu.Unlock()
	if err != nil {
		f.end(l, codec.AppendError(nil, l.id, codec.CodeInvalidRequest, "subscriptions/listen needs a stream: accept text/event-stream ("+err.Error()+")", nil))
	}
}

// end ends l: with reply (nil: none, the client left) and without its subscriptions.
func (f *listening) end(l *clientListener, reply []byte) {
	f.streams.remove(l)
	f.subs.dropSession(l.sess)
	f.sessions.unlisten(l) // listen_principal.go
	l.mu.Lock()
	l.endWith(reply)
	l.mu.Unlock()
}

// endAllWith ends each of ls with the error code and msg (sessions.endListeners).
func (f *listening) endAllWith(ls []*clientListener, code int, msg string) {
	for _, l := range ls {
		f.end(l, codec.AppendError(nil, l.id, code, msg, nil))
	}
}

// offers reports whether any backend declares the capability cap (tools, prompts,
// resources): the list changes the router can tell of.
func (f *listening) offers(cap string) bool {
	for _, b := range f.set.all() {
		b.mu.Lock()
		has := hasMember(b.caps, cap)
		b.mu.Unlock()
		if has {
			return true
		}
	}
	return false
}

// EndListeners implements router.StatelessFleet: every listen stream ends with its
// result (a graceful end, which the client tells from a dropped connection), and no
// new one opens.
func (f *Fleet) EndListeners() { f.listening.endAll() }

// endAll is EndListeners.
func (f *listening) endAll() {
	ls := f.streams
	ls.mu.Lock()
	ls.closed = true
	all := make([]*clientListener, 0, len(ls.bySess))
	for _, l := range ls.bySess {
		all = append(all, l)
	}
	clear(ls.bySess)
	ls.mu.Unlock()
	for _, l := range all {
		f.subs.dropSession(l.sess)
		l.mu.Lock()
		l.endWith(codec.AppendResult(nil, l.id, l.completion()))
		l.mu.Unlock()
	}
}

func (ls *clientListeners) add(l *clientListener) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	if ls.bySess == nil {
		ls.bySess = make(map[*router.Session]*clientListener)
	}
	ls.bySess[l.sess] = l
	return true
}

// of returns the listen stream of stateless session s, nil if s has none.
func (ls *clientListeners) of(s *router.Session) *clientListener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.bySess[s]
}

func (ls *clientListeners) remove(l *clientListener) {
	ls.mu.Lock()
	if ls.bySess[l.sess] == l {
		delete(ls.bySess, l.sess)
	}
	ls.mu.Unlock()
}

// all returns the listen streams open now.
func (ls *clientListeners) all() []*clientListener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]*clientListener, 0, len(ls.bySess))
	for _, l := range ls.bySess {
		out = append(out, l)
	}
	return out
}

// changed tells the listen streams that asked for it that a merged list changed
// (method: its list_changed notification).
func (ls *clientListeners) changed(method string) {
	for _, l := range ls.all() { // what a stream wants is fixed when it opens
		if l.wants(method) {
			l.notify(method)
		}
	}
}

func (l *clientListener) wants(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return l.tools
	case "notifications/prompts/list_changed":
		return l.prompts
	case "notifications/resources/list_changed":
		return l.resources
	}
	return false
}

// notify sends a parameterless notification tagged with the subscription id.
func (l *clientListener) notify(method string) {
	l.send(codec.AppendNotification(nil, method, l.appendMeta(nil)))
}

// send delivers msg on the stream once it is acknowledged and while it is open.
func (l *clientListener) send(msg []byte) {
	l.mu.Lock()
	if l.acked && !l.done {
		l.x.Send(msg)
	}
	l.mu.Unlock()
}

// endWith finishes the exchange once: with reply, or without one (the client left).
// Called with l.mu held.
func (l *clientListener) endWith(reply []byte) {
	if l.done {
		return
	}
	l.done = true
	if reply == nil {
		l.x.Done()
		return
	}
	l.x.Reply(reply)
}

// appendMeta appends {"_meta":{subscriptionId}} with the members of params after it
// (members: more members of params, "" for none).
func (l *clientListener) appendMeta(dst []byte, members ...string) []byte {
	dst = append(dst, `{"_meta":{"`+modern.KeySubscriptionID+`":`...)
	dst = append(dst, l.id...)
	dst = append(dst, '}')
	for _, m := range members {
		dst = append(dst, ',')
		dst = append(dst, m...)
	}
	return append(dst, '}')
}

// ack is the acknowledgement: the subset of the filter that is honoured.
func (l *clientListener) ack() []byte {
	notes := []byte(`"notifications":{`)
	first := true
	for _, f := range []struct {
		on   bool
		name string
	}{{l.tools, "toolsListChanged"}, {l.prompts, "promptsListChanged"}, {l.resources, "resourcesListChanged"}} {
		if !f.on {
			continue
		}
		if !first {
			notes = append(notes, ',')
		}
		first = false
		notes = append(notes, '"')
		notes = append(notes, f.name...)
		notes = append(notes, `":true`...)
	}
	if len(l.uris) > 0 {
		if !first {
			notes = append(notes, ',')
		}
		notes = append(notes, `"resourceSubscriptions":[`...)
		for i, u := range l.uris {
			if i > 0 {
				notes = append(notes, ',')
			}
			notes = codec.AppendString(notes, u)
		}
		notes = append(notes, ']')
	}
	notes = append(notes, '}')
	return codec.AppendNotification(nil, "notifications/subscriptions/acknowledged", l.appendMeta(nil, string(notes)))
}

// completion is the result that ends the stream gracefully.
func (l *clientListener) completion() []byte {
	dst := append([]byte(nil), `{"resultType":"complete","_meta":{"`+modern.KeySubscriptionID+`":`...)
	dst = append(dst, l.id...)
	return append(dst, '}', '}')
}

// Resource subscriptions on a listen stream go through the subscriber like a session's
// resources/subscribe (one upstream subscription per (backend, URI), shared across the
// cluster over NATS), with the listen stream's own Session as the subscriber: its
// updates reach notices.fanOut, which hands a stateless session's to the listeners
// (clientListeners.updated), and the stream's end drops its subscriptions
// (subscriber.dropSession).

// joinSession subscribes sess to key: the upstream subscription is made when sess is
// the first subscriber. It blocks on the backend; an error leaves nothing behind.
func (s *localSubs) joinSession(sess *router.Session, key subKey) error {
	s.mu.Lock()
	if s.up.limitReached(s.bySess[sess], key) {
		s.mu.Unlock()
		return errSubscriptionLimit
	}
	first := s.addLocked(sess, key)
	s.mu.Unlock()
	if !first {
		return nil
	}
	if err := s.up.subscribe(key, "resources/subscribe", nil); err != nil {
		s.mu.Lock()
		s.removeLocked(sess, key)
		s.mu.Unlock()
		return err
	}
	return nil
}

// joinSession subscribes sess to key across the cluster (clusterSubs.join).
func (s *clusterSubs) joinSession(sess *router.Session, key subKey) error {
	s.mu.Lock()
	if s.up.limitReached(s.bySess[sess], key) {
		s.mu.Unlock()
		return errSubscriptionLimit
	}
	s.addLocked(sess, key)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.up.life.ctx, key.b.cfg.Timeout)
	defer cancel()
	if err := s.join(ctx, key); err != nil {
		s.mu.Lock()
		if cs := s.keys[key]; cs != nil {
			delete(cs.sessions, sess)
		}
		s.bySess.remove(sess, key)
		s.mu.Unlock()
		s.leave(ctx, key)
		return err
	}
	return nil
}

// errSubscriptionLimit: the listen stream asked for more resources than a session may
// subscribe to (Config.MaxSubscriptions); the rest are left out of the acknowledgement.
var errSubscriptionLimit = errors.New("subscription limit reached")

// subscribe subscribes l's session to each URI of uris that a backend serves and lets
// clients subscribe to, and returns those it could: the honoured subset.
func (f *listening) subscribe(l *clientListener, uris []string) []string {
	cat := f.catalog.load()
	var ok []string
	for _, uri := range uris {
		// Its own copy: what sonic decoded points into a copy of the whole params, which
		// the subscription would otherwise pin for the stream's life.
		uri = strings.Clone(uri)
		b := cat.resourceOwner(uri)
		if b != nil && b.perClientLegacy() { // on the principal's session (listen_principal.go)
			if err := f.listenPrincipal(l, b, uri); err != nil {
				f.log.Debug("subscriptions/listen: resource not subscribed", "uri", uri, "backend", b.cfg.Name, "err", err)
				continue
			}
			ok = append(ok, uri)
			continue
		}
		if b == nil || !b.subscribable() {
			continue
		}
		if err := f.subs.joinSession(l.sess, subKey{b: b, uri: uri}); err != nil {
			f.log.Debug("subscriptions/listen: resource not subscribed", "uri", uri, "backend", b.cfg.Name, "err", err)
			continue
		}
		ok = append(ok, uri)
	}
	return ok
}

// subscribable reports whether clients may subscribe to b's resources through the
// shared subscriptions: it declares resources.subscribe, and is not a 2025 backend
// with per-client sessions (whose subscriptions belong to each client's own session).
func (b *backend) subscribable() bool {
	b.mu.Lock()
	caps := b.caps
	b.mu.Unlock()
	sub, err := sonicGetBool(caps, "resources", "subscribe")
	return err == nil && sub && (!b.cfg.PerClient || b.modern())
}

// updated delivers a resource update the subscriber fanned out to stateless session
// sess: on its listen stream, tagged with the subscription id.
func (ls *clientListeners) updated(sess *router.Session, msg []byte) {
	ls.mu.Lock()
	l := ls.bySess[sess]
	ls.mu.Unlock()
	if l == nil {
		return
	}
	var m codec.Message
	if codec.Scan(msg, &m) != nil || m.URI == nil {
		return
	}
	uri := m.URI
	if m.Flags&codec.URIEscaped != 0 {
		if u, err := codec.Unquote(nil, m.URI); err == nil {
			uri = u
		}
	}
	l.send(codec.AppendNotification(nil, "notifications/resources/updated", l.appendMeta(nil, `"uri":`+string(codec.AppendString(nil, string(uri))))))
}
