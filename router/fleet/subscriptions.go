package fleet

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// Subscriptions on one router instance: resources/subscribe counted per (backend, URI),
// one upstream subscription serving every subscriber, restored when a session is renewed
// and moved when its instance fails (failover). handle runs in Prepare; the upstream
// subscribe runs in Run (subTask); updated runs on the connection's reader goroutine.

// SessionSubscriptions implements router.Fleet.
func (f *Fleet) SessionSubscriptions(s *router.Session) [][2]string {
	keys := f.subs.list(s)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, [2]string{k.b.cfg.Name, k.uri})
	}
	return out
}

// Resubscribe implements router.Fleet.
func (f *Fleet) Resubscribe(s *router.Session, subs [][2]string) {
	var keys []subKey
	for _, sub := range subs {
		for _, b := range f.set.all() {
			if b.cfg.Name == sub[0] {
				keys = append(keys, subKey{b: b, uri: sub[1]})
			}
		}
	}
	f.subs.resubscribe(s, keys)
}

// subscriber is how resources/subscribe is kept: per process (localSubs) or across a
// cluster of router instances over NATS (clusterSubs).
type subscriber interface {
	// handle takes resources/subscribe or unsubscribe in Prepare; true sends the exchange
	// to Run (subscriber.run).
	handle(sess *router.Session, x *transport.Exchange, b *backend) bool
	// run does the blocking part of handle.
	run(x *transport.Exchange, t *subTask)
	// joinSession subscribes a listen stream's session (listen_client.go); it blocks.
	joinSession(sess *router.Session, key subKey) error
	// updated delivers a backend's notifications/resources/updated.
	updated(b *backend, uri string, msg []byte)
	dropSession(sess *router.Session)
	// restore re-subscribes what this instance holds upstream on a new session of b.
	restore(b *backend, c *upConn)
	// list returns the session's subscriptions.
	list(sess *router.Session) []subKey
	// resubscribe restores a session's subscriptions (a session that moved here).
	resubscribe(sess *router.Session, keys []subKey)
	// upstreamCount is the number of (backend, URI) pairs this instance subscribed upstream.
	upstreamCount() int
	// moveBackend hands the subscriptions on retired backend from to the backend
	// owner names for each URI (nil: dropped), and forgets from's upstream state
	// (upkeep_reconfigure_subs.go). It blocks on the new owners.
	moveBackend(from *backend, owner func(uri string) *backend)
	close()
}

// subTask is the work a subscription handed from Prepare to Run.
type subTask struct {
	sess *router.Session
	b    *backend
	key  subKey
	sub  bool // subscribe (else unsubscribe)
}

// localSubs keeps resources/subscribe reference-counted per (backend, URI): the
// first subscriber makes the one upstream subscription, the last one to leave (by
// unsubscribe or by ending its session) releases it, and every update the backend sends
// reaches each subscribed session once.
type localSubs struct {
	up     *subsUpstream
	mu     sync.Mutex
	byKey  map[subKey]map[*router.Session]struct{}
	bySess sessionKeys
}

type subKey struct {
	b   *backend
	uri string
}

func newLocalSubs(up *subsUpstream) *localSubs {
	s := &localSubs{up: up}
	s.byKey = map[subKey]map[*router.Session]struct{}{}
	s.bySess = sessionKeys{}
	return s
}

func (s *localSubs) close() {}

func (s *localSubs) upstreamCount() int { return s.count() }

// subscription handles resources/subscribe and unsubscribe for shared upstream sessions.
func (s *localSubs) handle(sess *router.Session, x *transport.Exchange, b *backend) bool {
	up := s.up
	key := subKey{b: b, uri: string(x.Msg.URI)}
	s.mu.Lock()
	set := s.byKey[key]
	if string(x.Msg.Method) == "resources/subscribe" {
		if up.limitReached(s.bySess[sess], key) {
			s.mu.Unlock()
			return up.refuse(x)
		}
		first := s.addLocked(sess, key)
		s.mu.Unlock()
		sess.Persist()
		if first {
			x.Tag = &subTask{sess: sess, b: b, key: key, sub: true}
			return true
		}
		return up.rep.reply(x, []byte("{}"))
	}
	_, had := set[sess]
	delete(set, sess)
	s.bySess.remove(sess, key)
	last := had && len(set) == 0
	if last {
		delete(s.byKey, key)
	}
	s.mu.Unlock()
	sess.Persist()
	if last {
		x.Tag = &subTask{sess: sess, b: b, key: key}
		return true
	}
	return up.rep.reply(x, []byte("{}"))
}

// run makes or drops the upstream subscription for the first subscriber or the last one
// to leave, through subsUpstream.subscribe (which records where it lives), then answers. A
// refused subscription is not kept for the session, and the backend's error is relayed.
func (s *localSubs) run(x *transport.Exchange, t *subTask) {
	up := s.up
	method := "resources/unsubscribe"
	if t.sub {
		method = "resources/subscribe"
	}
	err := up.subscribe(t.key, method, nil)
	x.Tag = nil
	if err == nil || !t.sub {
		up.rep.reply(x, []byte("{}"))
		return
	}
	s.mu.Lock()
	s.removeLocked(t.sess, t.key)
	s.mu.Unlock()
	var re *router.Error
	if errors.As(err, &re) {
		up.rep.replyErr(x, re.Code, re.Message)
		return
	}
	up.rep.replyErr(x, codec.CodeBackendUnavailable, "backend "+t.b.cfg.Name+": cannot subscribe: "+err.Error())
}

// deliver sends a backend's resources/updated to every session subscribed to it.
func (s *localSubs) updated(b *backend, uri string, msg []byte) {
	s.mu.Lock()
	set := s.byKey[subKey{b: b, uri: uri}]
	list := make([]*router.Session, 0, len(set))
	for sess := range set {
		list = append(list, sess)
	}
	s.mu.Unlock()
	s.up.fanOut(list, msg, time.Now().UnixNano())
}

// dropSession releases a closed session's subscriptions, unsubscribing upstream where it
// was the last subscriber.
func (s *localSubs) dropSession(sess *router.Session) {
	up := s.up
	s.mu.Lock()
	var released []subKey
	for _, key := range s.bySess[sess] {
		set := s.byKey[key]
		delete(set, sess)
		if len(set) == 0 {
			delete(s.byKey, key)
			released = append(released, key)
		}
	}
	delete(s.bySess, sess)
	s.mu.Unlock()
	for _, key := range released {
		up.subscribe(key, "resources/unsubscribe", nil)
	}
}

// restore re-subscribes, on c, the backend's URIs that c should hold (holders.needs).
func (s *localSubs) restore(b *backend, c *upConn) {
	up := s.up
	s.mu.Lock()
	var keys []subKey
	for key := range s.byKey {
		if key.b == b && up.held.needs(key, c) {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	for _, key := range keys {
		up.subscribe(key, "resources/subscribe", c)
	}
}

// count is the number of (backend, URI) pairs subscribed upstream.
func (s *localSubs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// holders records, for each (backend, URI) this process subscribed upstream, the
// upstream session that holds the subscription. A backend with several instances
// (replicas, child processes) keeps the subscription on one of them; knowing which lets
// an unsubscribe reach that one, lets a session that comes back re-subscribe only what it
// held, and lets the subscriptions of an instance that went down move to another one
// (failover), instead of being lost until it returns.
type holders struct {
	mu sync.Mutex
	m  map[subKey]*upConn
}

func (h *holders) set(key subKey, c *upConn) {
	h.mu.Lock()
	if h.m == nil {
		h.m = map[subKey]*upConn{}
	}
	h.m[key] = c
	h.mu.Unlock()
}

func (h *holders) take(key subKey) *upConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.m[key]
	delete(h.m, key)
	return c
}

// needs reports whether key must be subscribed on c: nobody holds it, or c's own
// instance does (its backend lost the session, or this is its new one), or the holder
// stopped taking requests.
func (h *holders) needs(key subKey, c *upConn) bool {
	h.mu.Lock()
	cur := h.m[key]
	h.mu.Unlock()
	return cur == nil || cur.inst == c.inst || cur.dead() || !cur.inst.usable()
}

// holdsOn reports whether a subscription is held on one of in's sessions.
func (h *holders) holdsOn(in *instance) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.m {
		if c.inst == in {
			return true
		}
	}
	return false
}

// subsUpstream is the upstream side of subscriptions, shared by both subscribers
// (localSubs, clusterSubs): it makes and drops upstream subscriptions (subscribe),
// records which upstream session holds each (held), moves them off an instance that
// failed (failover), enforces the per-session limit and fans updates out. subscribe
// blocks on the backend: it runs on a dispatcher worker (Run), on a background
// goroutine or on an instance's maintainer (failover), never in Prepare.
type subsUpstream struct {
	life  *lifecycle
	table *table // the router's own subscribe requests
	log   *slog.Logger
	rep   *reporter // answers to clients' subscribe requests
	max   int       // Config.MaxSubscriptions
	held  holders
	// fanOut delivers an update to subscribed sessions (notices.fanOut).
	fanOut func(list []*router.Session, msg []byte, received int64)
	// restore re-subscribes on c what the subscriber holds upstream of b (the
	// subscriber's restore), for failover.
	restore func(b *backend, c *upConn)
}

// failover moves the subscriptions held on in, which stopped taking requests, to
// another instance of its backend: restore re-subscribes there every key whose holder
// is unusable. With no usable instance left it waits for the next round.
func (u *subsUpstream) failover(in *instance) {
	if in.b.cfg.PerClient || !u.held.holdsOn(in) {
		return
	}
	other := in.b.pick()
	if other == nil || other == in {
		return
	}
	c := other.conn.Load()
	if c == nil || c.dead() {
		return
	}
	u.log.Info("moving resource subscriptions to another instance", "backend", in.b.cfg.Name, "from", in.dialer.Addr, "to", other.dialer.Addr)
	u.restore(in.b, c)
}

// subscribe sends resources/subscribe or unsubscribe for key to its backend, on c
// or, by default, a picked instance's shared session for a subscribe and the session
// holding the subscription for an unsubscribe (none: nothing to undo, a session that is
// gone took its subscriptions along).
func (u *subsUpstream) subscribe(key subKey, method string, c *upConn) error {
	sub := method == "resources/subscribe"
	if c == nil && !sub {
		if c = u.held.take(key); c == nil || c.dead() {
			return nil
		}
	}
	if c == nil {
		in := key.b.pick()
		if in == nil {
			return errors.New("no healthy instance")
		}
		if c = in.conn.Load(); c == nil {
			return errors.New("instance not connected")
		}
	}
	ctx, cancel := context.WithTimeout(u.life.ctx, key.b.cfg.Timeout)
	defer cancel()
	var err error
	if c.modern {
		err = u.listen(ctx, c, key, sub)
	} else {
		_, err = u.table.call(ctx, c, method, uriParams(key.uri))
	}
	if err != nil {
		u.log.Warn("upstream "+method+" failed", "backend", key.b.cfg.Name, "uri", key.uri, "err", err)
	} else if sub {
		u.held.set(key, c)
	}
	return err
}

// listen makes or drops key's subscription on the subscriptions/listen stream of c, a
// 2026-07-28 instance's shared connection (listener).
func (u *subsUpstream) listen(ctx context.Context, c *upConn, key subKey, sub bool) error {
	if c.listen == nil {
		return errors.New("no subscriptions/listen stream on this connection")
	}
	if !sub {
		c.listen.remove(key.uri)
		return nil
	}
	return c.listen.add(ctx, key.uri)
}

// limitReached reports whether a session holding the subscriptions in held may not
// add key: one client must not make the router hold an unbounded set for it.
func (u *subsUpstream) limitReached(held keySet, key subKey) bool {
	return !held.has(key) && len(held) >= u.max
}

// refuse answers a resources/subscribe beyond the session's limit.
func (u *subsUpstream) refuse(x *transport.Exchange) bool {
	return u.rep.replyErr(x, codec.CodeSessionLimit, "mcprouter: the session already holds "+strconv.Itoa(u.max)+" resource subscriptions, the most allowed; unsubscribe from one first")
}

func listOf(bySess sessionKeys, sess *router.Session) []subKey {
	return slices.Clone(bySess[sess])
}

// addLocked records sess as a subscriber of key and reports whether it is the first one
// (the upstream subscription is then to be made); the caller holds s.mu.
func (s *localSubs) addLocked(sess *router.Session, key subKey) (first bool) {
	set := s.byKey[key]
	if set == nil {
		set = map[*router.Session]struct{}{}
		s.byKey[key] = set
	}
	first = len(set) == 0
	set[sess] = struct{}{}
	s.bySess.add(sess, key, nil)
	return first
}

// removeLocked forgets sess as a subscriber of key (the upstream subscription it asked
// for was refused); the caller holds s.mu.
func (s *localSubs) removeLocked(sess *router.Session, key subKey) {
	if set := s.byKey[key]; set != nil {
		delete(set, sess)
		if len(set) == 0 {
			delete(s.byKey, key)
		}
	}
	s.bySess.remove(sess, key)
}

func (s *localSubs) list(sess *router.Session) []subKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return listOf(s.bySess, sess)
}

func (s *localSubs) resubscribe(sess *router.Session, keys []subKey) {
	s.mu.Lock()
	var first []subKey
	for _, key := range keys {
		if s.addLocked(sess, key) {
			first = append(first, key)
		}
	}
	s.mu.Unlock()
	for _, key := range first {
		go s.up.subscribe(key, "resources/subscribe", nil)
	}
}

// uriParams is the params object {"uri": uri} of resources/subscribe, unsubscribe and
// notifications/resources/updated.
func uriParams(uri string) []byte {
	p := append([]byte(`{"uri":`), codec.AppendString(nil, uri)...)
	return append(p, '}')
}
