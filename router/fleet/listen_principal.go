package fleet

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// subscriptions/listen of 2026-07-28 clients for the resources of a per-client 2025
// backend: such a backend's subscriptions belong to an upstream session, so the
// router subscribes on the principal's own (sessions_principal.go), and the updates
// arriving there go to that principal's listen streams alone, not to the shared
// fan-out (another principal's session may not hear them, and is not told them).
// A principal with a listen stream open is never idle: its upstream sessions stay.
// One that dies outright (the backend lost it and could not renew it, a child that
// stays down) is opened again and subscribed again to what the streams listen to, tried
// with backoff (watchPrincipal), rather than left silent until the principal's next
// request.
//
// Who calls it: Listen's subscribing goroutine (listenPrincipal), the end of a
// stream (unlisten), the notices part on the connection's reader goroutine
// (principalUpdated), which only looks up and sends, and the renewal of an upstream
// session after a backend restart (restoreListens, on a goroutine of its own).

// perClientLegacy reports whether b's resource subscriptions belong to each client's
// own upstream session: a per-client backend of the 2025 era.
func (b *backend) perClientLegacy() bool { return b.cfg.PerClient && !b.modern() }

// listenPrincipal subscribes listen stream l, within the backend's timeout.
func (f *listening) listenPrincipal(l *clientListener, b *backend, uri string) error {
	ctx, cancel := context.WithTimeout(f.life.ctx, b.cfg.Timeout)
	defer cancel()
	return f.sessions.listenPrincipal(ctx, l, b, uri)
}

// listenPrincipal subscribes listen stream l to uri of b, a per-client 2025 backend,
// on its principal's upstream session. The stream is recorded first, so that an
// update sent just after the backend's answer is not missed.
func (ss *sessions) listenPrincipal(ctx context.Context, l *clientListener, b *backend, uri string) error {
	b.mu.Lock()
	caps := b.caps
	b.mu.Unlock()
	if sub, err := sonicGetBool(caps, "resources", "subscribe"); err != nil || !sub {
		return errors.New("the backend does not offer resource subscriptions")
	}
	in := b.pick()
	if in == nil {
		return errors.New("no healthy instance")
	}
	ss.startReaper(b)
	ps, err := ss.principal(principalID(l.sess), l.sess)
	if err != nil {
		return err
	}
	key := subKey{b: b, uri: uri}
	ps.mu.Lock()
	if ps.listens == nil {
		ps.listens = map[subKey]map[*clientListener]struct{}{}
	}
	if ps.listens[key] == nil {
		ps.listens[key] = map[*clientListener]struct{}{}
	}
	ps.listens[key][l] = struct{}{}
	ps.mu.Unlock()
	c, err := ss.clientConn(ctx, ps.st, in)
	if err == nil {
		_, err = ss.conns.table.call(ctx, c, "resources/subscribe", uriParams(uri))
	}
	if err != nil {
		ss.unlistenKey(ps, l, key)
	}
	return err
}

// unlisten forgets listen stream l in every principal, unsubscribing upstream (in the
// background) from what no other stream of that principal listens to.
func (ss *sessions) unlisten(l *clientListener) {
	p := &ss.principals
	p.mu.Lock()
	ps := p.m[principalID(l.sess)]
	p.mu.Unlock()
	if ps == nil {
		return
	}
	ps.mu.Lock()
	var keys []subKey
	for key, set := range ps.listens {
		if _, ok := set[l]; ok {
			keys = append(keys, key)
		}
	}
	ps.mu.Unlock()
	for _, key := range keys {
		ss.unlistenKey(ps, l, key)
	}
}

// unlistenKey forgets l's listening to key in ps; the last one out unsubscribes on the
// principal's upstream sessions with key's backend.
func (ss *sessions) unlistenKey(ps *principalState, l *clientListener, key subKey) {
	ps.mu.Lock()
	set := ps.listens[key]
	delete(set, l)
	last := set != nil && len(set) == 0
	if last {
		delete(ps.listens, key)
	}
	ps.mu.Unlock()
	if !last {
		return
	}
	ps.st.mu.Lock()
	var conns []*upConn
	for _, c := range ps.st.conns {
		if c.b == key.b && !c.dead() {
			conns = append(conns, c)
		}
	}
	ps.st.mu.Unlock()
	for _, c := range conns {
		ss.life.spawn(func() {
			ctx, cancel := context.WithTimeout(ss.life.ctx, key.b.cfg.Timeout)
			defer cancel()
			ss.conns.table.call(ctx, c, "resources/unsubscribe", uriParams(key.uri))
		})
	}
}

// principalUpdated sends a resource update that arrived on c, a principal's upstream
// session, on each listen stream (of ls) of that principal subscribed to it. It
// reports whether c is a principal's: its updates go nowhere else.
func (ss *sessions) principalUpdated(c *upConn, uri string, msg []byte, ls *clientListeners) bool {
	if c.owner == nil || !c.owner.Stateless() {
		return false
	}
	ps := ss.principalOf(c)
	if ps == nil {
		return true // a principal's session being closed
	}
	ps.mu.Lock()
	set := ps.listens[subKey{b: c.b, uri: uri}]
	list := make([]*clientListener, 0, len(set))
	for l := range set {
		list = append(list, l)
	}
	ps.mu.Unlock()
	for _, l := range list {
		ls.updated(l.sess, msg)
	}
	return true
}

// principalOf returns the principal whose upstream session c is (opened for its
// owner), nil when c is no principal's or its principal has been closed.
func (ss *sessions) principalOf(c *upConn) *principalState {
	if c.owner == nil {
		return nil
	}
	p := &ss.principals
	p.mu.Lock()
	ps := p.m[principalID(c.owner)]
	p.mu.Unlock()
	if ps == nil || ps.st.sess != c.owner {
		return nil
	}
	return ps
}

// restoreListens subscribes c, a principal's upstream session that the backend renewed
// (it restarted and forgot its subscriptions), again to what the principal's listen
// streams listen to on c's backend; nothing for other sessions.
func (ss *sessions) restoreListens(c *upConn) {
	ps := ss.principalOf(c)
	if ps == nil {
		return
	}
	for _, uri := range ps.listened(c.b) {
		ctx, cancel := context.WithTimeout(ss.life.ctx, c.b.cfg.Timeout)
		if _, err := ss.conns.table.call(ctx, c, "resources/subscribe", uriParams(uri)); err != nil {
			ss.conns.log.Warn("a principal's subscription not restored after the backend restarted", "backend", c.b.cfg.Name, "uri", uri, "err", err)
		}
		cancel()
	}
}

// relistenTries bounds the attempts at replacing a principal's dead upstream session
// for its listen streams; the waits between them double from relistenMin up to
// relistenMax (a minute and a half in all): a backend being restarted is back by then;
// when it is not, the listen streams end with codec.CodeBackendUnavailable, and their clients
// may listen again. Variables, so that a test can make them short.
var (
	relistenTries = 12
	relistenMin   = 100 * time.Millisecond
	relistenMax   = 10 * time.Second
)

// watchPrincipal waits for c, principal ps's upstream session with instance in, to end.
// When it died while ps is held (not closed with the principal: an eviction, the
// reaper, the fleet's close) and listen streams of ps listen to c's backend, a new
// session is opened and subscribed to what they listen to (relisten). A session the
// reaper closed had no listener (ps was not busy), so it is not replaced.
func (ss *sessions) watchPrincipal(ps *principalState, in *instance, c *upConn) {
	select {
	case <-c.conn.Done():
	case <-ss.life.ctx.Done():
		return
	}
	if !ss.held(ps) || len(ps.listened(c.b)) == 0 {
		return
	}
	ss.conns.log.Warn("a principal's upstream session died with listen streams on it: opening it again", "backend", c.b.cfg.Name, "instance", in.dialer.Addr)
	ss.relisten(ps, c.b)
}

// held reports whether ps is still the registry's, and open.
func (ss *sessions) held(ps *principalState) bool {
	p := &ss.principals
	p.mu.Lock()
	held := p.m[ps.id] == ps
	p.mu.Unlock()
	ps.st.mu.Lock()
	defer ps.st.mu.Unlock()
	return held && !ps.st.closed
}

// listened returns the URIs of b that ps's listen streams listen to.
func (ps *principalState) listened(b *backend) []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var uris []string
	for key := range ps.listens {
		if key.b == b {
			uris = append(uris, key.uri)
		}
	}
	return uris
}

// relisten gives ps an upstream session with b again (its dead one is dropped) and
// subscribes it to what ps's listen streams listen to on b, trying relistenTries times
// with backoff; it stops as soon as nothing listens, ps is let go, b is removed or the
// fleet closes, and after the last try ends the listen streams (endListeners).
func (ss *sessions) relisten(ps *principalState, b *backend) {
	wait := relistenMin
	var err error
	for try := 0; try < relistenTries; try++ {
		uris := ps.listened(b)
		if len(uris) == 0 || !ss.held(ps) || b.retired.Load() {
			return
		}
		if err = ss.resubscribe(ps, b, uris); err == nil {
			ss.conns.log.Info("a principal's listen streams subscribed again on a new upstream session", "backend", b.cfg.Name, "uris", len(uris))
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ss.life.ctx.Done():
			t.Stop()
			return
		}
		wait = min(2*wait, relistenMax)
	}
	ss.conns.log.Warn("a principal's listen streams end: no new upstream session", "backend", b.cfg.Name, "tries", relistenTries, "err", err)
	if ss.endListeners != nil {
		ss.endListeners(ps.listenersOf(b), codec.CodeBackendUnavailable,
			"backend "+b.cfg.Name+" unreachable: its updates cannot be listened to (listen again later)")
	}
}

// listenersOf returns ps's listen streams that listen to b.
func (ps *principalState) listenersOf(b *backend) []*clientListener {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var ls []*clientListener
	for key, set := range ps.listens {
		if key.b != b {
			continue
		}
		for l := range set {
			if !slices.Contains(ls, l) {
				ls = append(ls, l)
			}
		}
	}
	return ls
}

// resubscribe opens (or finds) ps's upstream session with a healthy instance of b and
// subscribes it to uris, within the backend's timeout.
func (ss *sessions) resubscribe(ps *principalState, b *backend, uris []string) error {
	in := b.pick()
	if in == nil {
		return errors.New("no healthy instance")
	}
	ctx, cancel := context.WithTimeout(ss.life.ctx, b.cfg.Timeout)
	defer cancel()
	c, err := ss.clientConn(ctx, ps.st, in)
	if err != nil {
		return err
	}
	for _, uri := range uris {
		if _, err := ss.conns.table.call(ctx, c, "resources/subscribe", uriParams(uri)); err != nil {
			return err
		}
	}
	return nil
}
