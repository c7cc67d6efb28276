package fleet

import (
	"context"
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// subscriptions keeps resources/subscribe reference-counted per (backend, URI): the
// first subscriber makes the one upstream subscription, the last one to leave (by
// unsubscribe or by ending its session) releases it, and every update the backend sends
// reaches each subscribed session once.
type subscriptions struct {
	mu     sync.Mutex
	byKey  map[subKey]map[*router.Session]struct{}
	bySess map[*router.Session]map[subKey]struct{}
}

type subKey struct {
	b   *backend
	uri string
}

func (s *subscriptions) init() {
	s.byKey = map[subKey]map[*router.Session]struct{}{}
	s.bySess = map[*router.Session]map[subKey]struct{}{}
}

// subscription handles resources/subscribe and unsubscribe for shared upstream sessions.
func (f *Fleet) subscription(sess *router.Session, x *transport.Exchange, b *backend) bool {
	key := subKey{b: b, uri: string(x.Msg.URI)}
	s := &f.subs
	s.mu.Lock()
	set := s.byKey[key]
	if string(x.Msg.Method) == "resources/subscribe" {
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
		if first {
			f.track(sess, x, b, 0)
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
	if last {
		f.track(sess, x, b, 0)
		return true
	}
	return f.reply(x, []byte("{}"))
}

// deliver sends a backend's resources/updated to every session subscribed to it.
func (s *subscriptions) deliver(b *backend, uri string, msg []byte) {
	s.mu.Lock()
	set := s.byKey[subKey{b: b, uri: uri}]
	list := make([]*router.Session, 0, len(set))
	for sess := range set {
		list = append(list, sess)
	}
	s.mu.Unlock()
	for _, sess := range list {
		if t := sess.Transport(); t != nil {
			t.Send(msg)
		}
	}
}

// dropSession releases a closed session's subscriptions, unsubscribing upstream where it
// was the last subscriber.
func (s *subscriptions) dropSession(f *Fleet, sess *router.Session) {
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

// restore re-subscribes a backend's URIs on a new upstream session.
func (s *subscriptions) restore(f *Fleet, b *backend, c *upConn) {
	s.mu.Lock()
	var keys []subKey
	for key := range s.byKey {
		if key.b == b {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	for _, key := range keys {
		f.upstreamSubscribe(key, "resources/subscribe", c)
	}
}

// count is the number of (backend, URI) pairs subscribed upstream.
func (s *subscriptions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

func (f *Fleet) upstreamSubscribe(key subKey, method string, c *upConn) {
	if c == nil {
		in := key.b.pick()
		if in == nil {
			return
		}
		if c = in.conn.Load(); c == nil {
			return
		}
	}
	params := append([]byte(`{"uri":`), codec.AppendString(nil, key.uri)...)
	params = append(params, '}')
	ctx, cancel := context.WithTimeout(f.ctx, key.b.cfg.Timeout)
	defer cancel()
	if _, err := f.call(ctx, c, method, params); err != nil {
		f.log.Warn("upstream "+method+" failed", "backend", key.b.cfg.Name, "uri", key.uri, "err", err)
	}
}
