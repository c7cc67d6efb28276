package fleet

import (
	"context"
	"errors"
)

// subscriptions/listen of 2026-07-28 clients for the resources of a per-client 2025
// backend: such a backend's subscriptions belong to an upstream session, so the
// router subscribes on the principal's own (sessions_principal.go), and the updates
// arriving there go to that principal's listen streams alone, not to the shared
// fan-out (another principal's session may not hear them, and is not told them).
// A principal with a listen stream open is never idle: its upstream sessions stay.
//
// Who calls it: Listen's subscribing goroutine (listenPrincipal), endListener
// (unlisten), the notices part on the connection's reader goroutine
// (principalUpdated), which only looks up and sends, and the renewal of an upstream
// session after a backend restart (restoreListens, on a goroutine of its own).

// perClientLegacy reports whether b's resource subscriptions belong to each client's
// own upstream session: a per-client backend of the 2025 era.
func (b *backend) perClientLegacy() bool { return b.cfg.PerClient && !b.modern() }

// listenPrincipal subscribes listen stream l, within the backend's timeout.
func (f *Fleet) listenPrincipal(l *clientListener, b *backend, uri string) error {
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
	ps.mu.Lock()
	var uris []string
	for key := range ps.listens {
		if key.b == c.b {
			uris = append(uris, key.uri)
		}
	}
	ps.mu.Unlock()
	for _, uri := range uris {
		ctx, cancel := context.WithTimeout(ss.life.ctx, c.b.cfg.Timeout)
		if _, err := ss.conns.table.call(ctx, c, "resources/subscribe", uriParams(uri)); err != nil {
			ss.conns.log.Warn("a principal's subscription not restored after the backend restarted", "backend", c.b.cfg.Name, "uri", uri, "err", err)
		}
		cancel()
	}
}
