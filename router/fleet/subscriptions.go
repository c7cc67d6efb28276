package fleet

import (
	"context"
	"errors"
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
		for _, b := range f.backends {
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
	f      *Fleet
	mu     sync.Mutex
	byKey  map[subKey]map[*router.Session]struct{}
	bySess map[*router.Session]map[subKey]struct{}
}

type subKey struct {
	b   *backend
	uri string
}

func newLocalSubs(f *Fleet) *localSubs {
	s := &localSubs{f: f}
	s.byKey = map[subKey]map[*router.Session]struct{}{}
	s.bySess = map[*router.Session]map[subKey]struct{}{}
	return s
}

func (s *localSubs) close() {}

func (s *localSubs) upstreamCount() int { return s.count() }

// subscription handles resources/subscribe and unsubscribe for shared upstream sessions.
func (s *localSubs) handle(sess *router.Session, x *transport.Exchange, b *backend) bool {
	f := s.f
	key := subKey{b: b, uri: string(x.Msg.URI)}
	s.mu.Lock()
	set := s.byKey[key]
	if string(x.Msg.Method) == "resources/subscribe" {
		if f.subLimitReached(s.bySess[sess], key) {
			s.mu.Unlock()
			return f.refuseSubscription(x)
		}
		first := len(set) == 0
		if set == nil {
			set = map[*router.Session]struct{}{}
			s.byKey[key] = set
		}
		set[sess] = struct{}{}
		if s.bySess[sess] == nil {
			s.bySess[sess] = map[subKey]struct{}{}
		}
		s.bySess[sess][key] = struct{}{}
		s.mu.Unlock()
		sess.Persist()
		if first {
			x.Tag = &subTask{sess: sess, b: b, key: key, sub: true}
			return true
		}
		return f.reply(x, []byte("{}"))
	}
	_, had := set[sess]
	delete(set, sess)
	delete(s.bySess[sess], key)
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
	return f.reply(x, []byte("{}"))
}

// run makes or drops the upstream subscription for the first subscriber or the last one
// to leave, through upstreamSubscribe (which records where it lives), then answers. A
// refused subscription is not kept for the session, and the backend's error is relayed.
func (s *localSubs) run(x *transport.Exchange, t *subTask) {
	f := s.f
	method := "resources/unsubscribe"
	if t.sub {
		method = "resources/subscribe"
	}
	err := f.upstreamSubscribe(t.key, method, nil)
	x.Tag = nil
	if err == nil || !t.sub {
		f.reply(x, []byte("{}"))
		return
	}
	s.mu.Lock()
	if set := s.byKey[t.key]; set != nil {
		delete(set, t.sess)
		if len(set) == 0 {
			delete(s.byKey, t.key)
		}
	}
	delete(s.bySess[t.sess], t.key)
	s.mu.Unlock()
	var re *router.Error
	if errors.As(err, &re) {
		f.replyErr(x, re.Code, re.Message)
		return
	}
	f.replyErr(x, CodeBackendUnavailable, "backend "+t.b.cfg.Name+": cannot subscribe: "+err.Error())
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
	s.f.notices.fanOut(list, msg, time.Now().UnixNano())
}

// dropSession releases a closed session's subscriptions, unsubscribing upstream where it
// was the last subscriber.
func (s *localSubs) dropSession(sess *router.Session) {
	f := s.f
	s.mu.Lock()
	var released []subKey
	for key := range s.bySess[sess] {
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
		f.upstreamSubscribe(key, "resources/unsubscribe", nil)
	}
}

// restore re-subscribes, on c, the backend's URIs that c should hold (holders.needs).
func (s *localSubs) restore(b *backend, c *upConn) {
	f := s.f
	s.mu.Lock()
	var keys []subKey
	for key := range s.byKey {
		if key.b == b && f.held.needs(key, c) {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	for _, key := range keys {
		f.upstreamSubscribe(key, "resources/subscribe", c)
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

// failover moves the subscriptions held on in, which stopped taking requests, to
// another instance of its backend: restore re-subscribes there every key whose holder
// is unusable. With no usable instance left it waits for the next round.
func (f *Fleet) failover(in *instance) {
	if in.b.cfg.PerClient || !f.held.holdsOn(in) {
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
	f.log.Info("moving resource subscriptions to another instance", "backend", in.b.cfg.Name, "from", in.dialer.Addr, "to", other.dialer.Addr)
	f.subs.restore(in.b, c)
}

// upstreamSubscribe sends resources/subscribe or unsubscribe for key to its backend, on c
// or, by default, a picked instance's shared session for a subscribe and the session
// holding the subscription for an unsubscribe (none: nothing to undo, a session that is
// gone took its subscriptions along).
func (f *Fleet) upstreamSubscribe(key subKey, method string, c *upConn) error {
	sub := method == "resources/subscribe"
	if c == nil && !sub {
		if c = f.held.take(key); c == nil || c.dead() {
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
	params := append([]byte(`{"uri":`), codec.AppendString(nil, key.uri)...)
	params = append(params, '}')
	ctx, cancel := context.WithTimeout(f.life.ctx, key.b.cfg.Timeout)
	defer cancel()
	_, err := f.table.call(ctx, c, method, params)
	if err != nil {
		f.log.Warn("upstream "+method+" failed", "backend", key.b.cfg.Name, "uri", key.uri, "err", err)
	} else if sub {
		f.held.set(key, c)
	}
	return err
}

// subLimitReached reports whether a session holding the subscriptions in held may not
// add key: one client must not make the router hold an unbounded set for it.
func (f *Fleet) subLimitReached(held map[subKey]struct{}, key subKey) bool {
	_, has := held[key]
	return !has && len(held) >= f.cfg.MaxSubscriptions
}

// refuseSubscription answers a resources/subscribe beyond the session's limit.
func (f *Fleet) refuseSubscription(x *transport.Exchange) bool {
	return f.replyErr(x, CodeSessionLimit, "mcprouter: the session already holds "+strconv.Itoa(f.cfg.MaxSubscriptions)+" resource subscriptions, the most allowed; unsubscribe from one first")
}

func listOf(bySess map[*router.Session]map[subKey]struct{}, sess *router.Session) []subKey {
	var out []subKey
	for k := range bySess[sess] {
		out = append(out, k)
	}
	return out
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
		set := s.byKey[key]
		if set == nil {
			set = map[*router.Session]struct{}{}
			s.byKey[key] = set
			first = append(first, key)
		}
		set[sess] = struct{}{}
		if s.bySess[sess] == nil {
			s.bySess[sess] = map[subKey]struct{}{}
		}
		s.bySess[sess][key] = struct{}{}
	}
	s.mu.Unlock()
	for _, key := range first {
		go s.f.upstreamSubscribe(key, "resources/subscribe", nil)
	}
}
