package fleet

import (
	"context"
	"errors"
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
)

// subscriber is how resources/subscribe is kept: per process (localSubs) or across a
// cluster of router instances over NATS (clusterSubs).
type subscriber interface {
	// handle takes resources/subscribe or unsubscribe in Prepare; true sends the exchange
	// to Run (runSub).
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

func (s *localSubs) run(*transport.Exchange, *subTask) {}

func (s *localSubs) upstreamCount() int { return s.count() }

// subscription handles resources/subscribe and unsubscribe for shared upstream sessions.
func (s *localSubs) handle(sess *router.Session, x *transport.Exchange, b *backend) bool {
	f := s.f
	key := subKey{b: b, uri: string(x.Msg.URI)}
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
		sess.Persist()
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
	sess.Persist()
	if last {
		f.track(sess, x, b, 0)
		return true
	}
	return f.reply(x, []byte("{}"))
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
	for _, sess := range list {
		if t := sess.Transport(); t != nil {
			t.Send(msg)
		}
	}
	s.f.Stats.FanOut.Add(uint64(len(list)))
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

// restore re-subscribes a backend's URIs on a new upstream session.
func (s *localSubs) restore(b *backend, c *upConn) {
	f := s.f
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
func (s *localSubs) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// upstreamSubscribe sends resources/subscribe or unsubscribe for key to its backend, on c
// or a picked instance's shared session.
func (f *Fleet) upstreamSubscribe(key subKey, method string, c *upConn) error {
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
	ctx, cancel := context.WithTimeout(f.ctx, key.b.cfg.Timeout)
	defer cancel()
	_, err := f.call(ctx, c, method, params)
	if err != nil {
		f.log.Warn("upstream "+method+" failed", "backend", key.b.cfg.Name, "uri", key.uri, "err", err)
	}
	return err
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
