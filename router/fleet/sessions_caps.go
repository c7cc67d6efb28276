package fleet

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// Upstream sessions by declared capabilities: a 2026-07-28 client in front of a shared
// 2025 backend. The revision has the client declare its capabilities in every
// request's _meta, and a server "MUST NOT rely on capabilities the client has not
// declared": when handling a request needs one the client did not declare, the answer
// is -32021 with data.requiredCapabilities (basic/index, per-request protocol fields).
// Whether handling needs one is the backend's judgement, made in its own code: a tool
// may check the capabilities and refuse (the conformance server's
// test_missing_capability never sends a request, it refuses with -32021 itself), or
// fall back to something else when one is missing. A 2025 backend learns a client's
// capabilities once, from initialize, and judges every request of the session by them
// (2025-11-25 lifecycle: capability negotiation). On the shared session the router
// declared its own (routerCaps, everything it can carry), so the backend would rely on
// capabilities the 2026 client never declared.
//
// So such a request goes on an upstream session initialized with the capabilities its
// client declared (those a 2025 server can ask for: elicitation, roots, sampling),
// one per instance and distinct set, and the backend judges it as it judges any 2025
// client of its own. A request whose client declared what the router declares
// (routerCaps) keeps the shared session. The other way, refusing a backend's
// server-to-client request for an undeclared capability and answering the client
// -32021 in its stead, would take the judgement from the backend: it cannot catch a
// backend that relies on a capability without asking (the tool above), and it turns a
// backend's graceful fall-back into an error. A backend that asks anyway is still
// answered as a 2025 client answers it (-32601, serverreq.go clientCan). A per-client
// backend's 2026 clients get the same from their principal's sessions, which are kept
// per principal and set (principalID, sessions_principal.go).
//
// Bounds: at most maxCapsSessions sets per instance (clients of one kind declare the
// same, so a handful is the rule), each session taking a slot of the cap every
// per-client session shares (Config.MaxUpstreamSessions). Past maxCapsSessions the set
// used least recently with nothing in flight, and unused for evictAfter, is closed for
// the new one (LRU); with none idle the request is refused as overloaded. A set unused
// for its backend's SessionIdle is closed by the reaper (sessions_principal.go);
// removing the backend (dropScoped) and the fleet's close close them all.
//
// Across replicas: such a session belongs to one instance of the backend, and a request
// that leaves it for another replica never goes on that replica's shared session, which
// would have the backend judge the client by the router's capabilities. Every way out
// lands on a session of the other replica declaring the same capabilities (for a
// principal's, that principal's session there), opened on demand under the bounds
// above, or fails saying why none could be had:
//   - a request lost or refused on it (a replica killed, its connections dropped, an
//     HTTP 5xx): sent again where forward_retry.go allows (sessionLike), after the
//     session there is opened within the request's deadline; when the replica's
//     answers come apart from sends (stdio, legacy SSE), failover holds the requests
//     on a stand-in while its goroutine opens it (forward_failover.go);
//   - an instance down before its health check saw it, found when opening the session:
//     the request goes to another replica and opens its session there (upstreamFor);
//   - an instance ejected by health checks, or a session found dead: the next request
//     is routed to a usable instance and opens its session there, as the first did;
//   - a replica that restarted and forgot the session: the connection renews it by
//     replaying its initialize, which declares the same capabilities;
//   - a backend removed by Reconfigure: its calls in flight drain, then its sessions
//     close with it (dropScoped); there is no other replica to go to;
//   - a set evicted for another (LRU): only a set with nothing in flight and unused for
//     evictAfter, so that no request handed its session is left without it.
//
// Who calls it: forwarding (sessions.upstreamFor) on dispatcher workers, the reaper,
// the fleet's close. Its lock guards the registry; no I/O under it.

// maxCapsSessions bounds the capability sets held per instance.
const maxCapsSessions = 8

// capsSessions is the registry of sessions by declared capabilities.
type capsSessions struct {
	mu     sync.Mutex
	m      map[*instance]map[string]*capsConn
	closed bool
	// keys are the session keys of the capabilities objects met lately, by a hash of
	// their bytes: clients of one kind send the same object with every request, which
	// then costs a hash and a comparison instead of appendDeclared's walk (declaredKey).
	// Two kinds in one slot take turns, each keyed anew.
	keys [8]atomic.Pointer[capsKey]
}

// capsKeySeed seeds the hash of capsSessions.keys.
var capsKeySeed = maphash.MakeSeed()

// capsKey is the session key (appendDeclared) of one capabilities object, raw (a copy).
type capsKey struct {
	raw []byte
	key string
}

// declaredKey returns the session key of the capabilities object caps: appendDeclared
// of it, from keys when caps was met lately.
func (cs *capsSessions) declaredKey(caps []byte) string {
	slot := &cs.keys[maphash.Bytes(capsKeySeed, caps)%uint64(len(cs.keys))]
	if k := slot.Load(); k != nil && string(k.raw) == string(caps) {
		return k.key
	}
	k := &capsKey{raw: append([]byte(nil), caps...), key: string(appendDeclared(nil, caps))}
	slot.Store(k)
	return k.key
}

// capsConn is one instance's session for one set of declared capabilities (key), or
// the promise of it while it is being opened.
type capsConn struct {
	key     string
	c       *upConn       // nil while opening
	opening chan struct{} // closed once opened or failed; nil after
	last    atomic.Int64  // unix nanoseconds of the last request sent on it
}

// declaredCaps are the capability members a 2025 backend can ask a client for: what a
// session initialized for some 2026 client declares, in this order.
var declaredCaps = [...]string{"elicitation", "roots", "sampling"}

// appendDeclared appends the members of caps (a client's capabilities object) that a
// 2025 backend can ask for (declaredCaps), as an object in a fixed order: the session
// key of clients who declared the same, and what their session declares.
func appendDeclared(dst, caps []byte) []byte {
	var vals [len(declaredCaps)][]byte
	var w codec.Walker
	if w.Object(caps) {
		for key, _, val, ok := w.Next(); ok; key, _, val, ok = w.Next() {
			for i, name := range declaredCaps {
				if string(key) == name {
					vals[i] = val
				}
			}
		}
	}
	dst = append(dst, '{')
	n := 0
	for i, v := range vals {
		if v == nil {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = codec.AppendString(dst, declaredCaps[i])
		dst = append(dst, ':')
		dst = append(dst, v...)
	}
	return append(dst, '}')
}

// routerDeclared is routerCaps as appendDeclared orders it: a client that declares
// that much is served on the shared session.
var routerDeclared = string(appendDeclared(nil, []byte(routerCaps)))

// scoped reports whether c speaks for some clients only (a client's own session, or
// one set of declared capabilities) rather than for the router: its instance's era is
// known when it opens, and it is outdated when that changes.
func (c *upConn) scoped() bool { return c.owner != nil || c.caps != nil }

// declaredKey carries, in the context of connector.open, the capabilities the session
// being opened declares (connector.start sets upConn.caps from it).
type declaredKey struct{}

// declaredIn returns the capabilities ctx asks a session to declare, nil if none.
func declaredIn(ctx context.Context) []byte {
	caps, _ := ctx.Value(declaredKey{}).([]byte)
	return caps
}

// capsConn returns the upstream session for stateless request e on instance in, whose
// shared session is shared: that one when e's client declared what the router does,
// else the session of e's declared capabilities, opened on first use.
func (ss *sessions) capsConn(e *entry, in *instance, shared *upConn) (*upConn, error) {
	cs := &ss.caps
	key := cs.declaredKey(e.sess.ClientCapabilities())
	if key == routerDeclared {
		return shared, nil
	}
	cs.mu.Lock()
	if cc := cs.m[in][key]; cc != nil && cc.c != nil && !cc.c.dead() {
		cc.last.Store(time.Now().UnixNano())
		cs.mu.Unlock()
		return cc.c, nil
	}
	cs.mu.Unlock()
	ctx, cancel := context.WithDeadline(ss.life.ctx, time.Unix(0, e.deadline))
	defer cancel()
	return ss.openCaps(ctx, in, key)
}

// openCaps returns instance in's session for the capabilities key, opening it when
// none is open: one request opens it while the others for the same set wait.
func (ss *sessions) openCaps(ctx context.Context, in *instance, key string) (*upConn, error) {
	cs := &ss.caps
	for {
		cs.mu.Lock()
		if cs.closed || ss.life.ended() {
			cs.mu.Unlock()
			return nil, errShuttingDown
		}
		set := cs.m[in]
		cc := set[key]
		if cc != nil && cc.opening != nil {
			wait := cc.opening
			cs.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if cc != nil && !cc.c.dead() {
			cc.last.Store(time.Now().UnixNano())
			cs.mu.Unlock()
			return cc.c, nil
		}
		var gone *upConn
		if cc != nil {
			delete(set, key)
			gone = cc.c
		}
		if len(set) >= maxCapsSessions {
			lru := cs.lruLocked(set, ss.conns.table.busyConns())
			if lru == nil {
				cs.mu.Unlock()
				ss.stats.UpstreamRefused.Add(1)
				return nil, errUpstreamFull
			}
			delete(set, lru.key)
			gone = lru.c // at most one of the two: a dead one left room
		}
		if set == nil {
			set = map[string]*capsConn{}
			if cs.m == nil {
				cs.m = map[*instance]map[string]*capsConn{}
			}
			cs.m[in] = set
		}
		cc = &capsConn{key: key, opening: make(chan struct{})}
		set[key] = cc
		cs.mu.Unlock()
		ss.startReaper(in.b)
		if gone != nil {
			go gone.closeUpstream()
		}

		caps := []byte(key)
		c, err := ss.openSlotted(context.WithValue(ctx, declaredKey{}, caps), in, nil, nil)
		cs.mu.Lock()
		close(cc.opening)
		cc.opening = nil
		dropped := cs.m[in][key] != cc // the fleet closed, or Reconfigure removed the backend
		switch {
		case err != nil:
			if !dropped {
				delete(set, key)
			}
		case dropped:
			go c.closeUpstream()
			c, err = nil, errShuttingDown
			if !cs.closed {
				err = errRemoved
			}
		default:
			cc.c = c
			cc.last.Store(time.Now().UnixNano())
		}
		cs.mu.Unlock()
		return c, err
	}
}

// sessionLike returns instance in's upstream session that speaks for the clients c
// speaks for: where a request that failed on c goes on another replica
// (forward_retry.go). That is in's shared session for a shared c; for a session by
// declared capabilities, in's session declaring the same; for a principal's, that
// principal's session with in (sessions_principal.go). Never in's shared session for
// a 2026-07-28 client's: it declares the router's capabilities. A 2026 instance
// (modern) has no such sessions: its shared one, which carries each request's own
// capabilities, is returned, for the caller to judge. nil for a 2025 client's own
// session, which has no like elsewhere. With open, one not open yet is opened within
// ctx as their own requests would open it (with its bounds); without, nil is returned
// for it at once (failover, on a connection's reader, must not block).
func (ss *sessions) sessionLike(ctx context.Context, c *upConn, in *instance, open bool) (*upConn, error) {
	shared := in.conn.Load()
	var c2 *upConn
	switch {
	case !c.scoped() || shared != nil && shared.modern:
		return shared, nil
	case c.owner == nil && open:
		return ss.openCaps(ctx, in, string(c.caps))
	case c.owner == nil:
		c2 = ss.capsOpen(in, string(c.caps))
	case !c.owner.Stateless():
		return nil, nil
	case open:
		return ss.principalConn(ctx, principalID(c.owner), c.owner, in)
	default:
		c2 = ss.principalOpen(principalID(c.owner), in)
	}
	if c2 != nil && c2.dead() {
		return nil, nil
	}
	return c2, nil
}

// capsOpen returns instance in's open session for the capabilities key, marking it
// used, nil if none is open: a lookup that never opens.
func (ss *sessions) capsOpen(in *instance, key string) *upConn {
	cs := &ss.caps
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cc := cs.m[in][key]
	if cc == nil || cc.c == nil {
		return nil
	}
	cc.last.Store(time.Now().UnixNano())
	return cc.c
}

// lruLocked returns the open session of set used least recently with nothing in busy
// and unused for evictAfter, nil if every one is busy, opening or in use lately; the
// caller holds the registry's lock. A session handed to a request (capsConn) is not in
// busy until the request is sent on it, which may wait up to a second for a slot of
// the backend's: closed then, it would fail a request that never left (as a
// principal's, sessions_principal.go).
func (cs *capsSessions) lruLocked(set map[string]*capsConn, busy map[*upConn]bool) *capsConn {
	var found *capsConn
	before := time.Now().Add(-evictAfter).UnixNano()
	for _, cc := range set {
		last := cc.last.Load()
		if cc.c == nil || busy[cc.c] || last >= before || (found != nil && last >= found.last.Load()) {
			continue
		}
		found = cc
	}
	return found
}

// reapCaps closes the sessions unused for their backend's SessionIdle (before now)
// with nothing in flight.
func (ss *sessions) reapCaps(now time.Time) {
	cs := &ss.caps
	ss.reapIdle(&cs.mu, func() int { return len(cs.m) }, func(busy map[*upConn]bool) (gone []*upConn) {
		for in, set := range cs.m {
			before := now.Add(-in.b.cfg.SessionIdle).UnixNano()
			for key, cc := range set {
				if cc.c != nil && (cc.c.dead() || (cc.last.Load() < before && !busy[cc.c])) {
					delete(set, key)
					gone = append(gone, cc.c)
				}
			}
			if len(set) == 0 {
				delete(cs.m, in)
			}
		}
		return gone
	})
}

// closeCaps closes every session by declared capabilities, counting them in closing
// until they are: the fleet's shutdown.
func (ss *sessions) closeCaps(closing *sync.WaitGroup) {
	cs := &ss.caps
	cs.mu.Lock()
	all := cs.m
	cs.m, cs.closed = nil, true
	cs.mu.Unlock()
	for _, set := range all {
		for _, cc := range set {
			if cc.c == nil {
				continue // being opened: its opener closes it
			}
			cc.c.killed.Store(true)
			closing.Add(1)
			go func() {
				cc.c.closeUpstream()
				closing.Done()
			}()
		}
	}
}

// dropScoped removes from the registries, marks dead and appends to out the upstream
// sessions with b that 2026-07-28 clients use: by declared capabilities, and the
// principals'. Reconfigure closes them with b's own when it removes b.
func (ss *sessions) dropScoped(b *backend, out []*upConn) []*upConn {
	cs := &ss.caps
	cs.mu.Lock()
	for in, set := range cs.m {
		if in.b != b {
			continue
		}
		for _, cc := range set {
			if cc.c != nil {
				cc.c.killed.Store(true)
				out = append(out, cc.c)
			}
		}
		delete(cs.m, in) // one being opened is closed by its opener's next lookup (dead)
	}
	cs.mu.Unlock()
	p := &ss.principals
	p.mu.Lock()
	states := make([]*sessionState, 0, len(p.m))
	for _, ps := range p.m {
		states = append(states, ps.st)
	}
	p.mu.Unlock()
	for _, st := range states {
		out = st.dropBackend(b, out)
	}
	return out
}

// capsCount is the number of sessions by declared capabilities open or opening.
func (ss *sessions) capsCount() int {
	ss.caps.mu.Lock()
	defer ss.caps.mu.Unlock()
	n := 0
	for _, set := range ss.caps.m {
		n += len(set)
	}
	return n
}
