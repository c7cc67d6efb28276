package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/router"
)

// Per-principal upstream sessions: the 2026-07-28 clients' side of per-client backends
// (BackendConfig.PerClient). Such a client has no session to own an upstream one, so
// the fleet keeps one per principal instead (the authenticated principal's ID, which
// names its virtual-server endpoint too, and the capabilities its client declared:
// principalID), initialized with those capabilities: opened by the principal's first
// request, reused by its next ones, each closed once the principal has been idle for
// its backend's SessionIdle, and all when the fleet closes. Every anonymous client is
// the one principal "": they share an upstream session per set of capabilities, which
// the router opens with no client token. A backend whose
// credentials are the client's own (token exchange) does not meet one, since that needs
// authenticated clients; should it, its dialer refuses the session as unauthorized (the
// client presented no token), which the client is told (CodeBackendAuth).
//
// Bounds: each principal's upstream sessions take slots of the cap every per-client
// session shares (Config.MaxUpstreamSessions), and the principals held are at most that
// many. When the cap is reached, the principal idle the longest (nothing in flight on
// its sessions for at least evictAfter) is closed to make room; when none is idle, a
// new principal is refused at once as overloaded (errUpstreamFull), and a request
// waiting for a slot waits as a 2025 client's does (sessions.acquire).
//
// Who calls it: forwarding (sessions.upstreamFor) on dispatcher workers, the reaper on
// its own goroutine (started with the first principal, ended with the fleet). Its lock
// guards the registry; the states' own locks guard their connections; no I/O under
// either (closing happens in the background, as a client session's).

// reapTick is the longest the reaper waits between two rounds; it goes round every half
// of the shortest SessionIdle (BackendConfig) of the backends it has seen, when that is
// shorter.
const reapTick = 30 * time.Second

// evictAfter is how long a principal's upstream sessions must have been unused before
// another principal may take their place when the cap is reached: the window between
// a request finding its upstream session and sending on it is far shorter.
const evictAfter = time.Second

// errShuttingDown: the fleet is closing, and opens nothing more.
var errShuttingDown = errors.New("the router is shutting down")

// principals is the registry of per-principal states.
type principals struct {
	tick time.Duration // reapTick; tests shorten it
	// minIdle is the shortest SessionIdle of the backends sessions were opened with
	// here (principals' and by declared capabilities), in nanoseconds; 0: none yet.
	minIdle atomic.Int64

	mu sync.Mutex
	m  map[string]*principalState
}

// principalState is one principal's upstream sessions: a sessionState (whose sess,
// the principal's first request, is the client the upstream sessions speak for, with
// the capabilities it declared: sessions.openConn) and when it was last used.
type principalState struct {
	id   string
	st   *sessionState
	last atomic.Int64 // unix nanoseconds of the last request that asked for it

	mu sync.Mutex
	// listens are the principal's listen streams by the resource of a per-client 2025
	// backend they listen to (listen_principal.go).
	listens map[subKey]map[*clientListener]struct{}
}

// principalID is the key of the principal a stateless request s belongs to, and of the
// capabilities it declared (appendDeclared): a principal's clients that declare
// different ones get upstream sessions of their own, each initialized with them, so
// that the backend judges each request by what its client declared (sessions_caps.go
// says why).
func principalID(s *router.Session) string {
	return s.Principal().ID() + "\x00" + string(appendDeclared(nil, s.ClientCapabilities()))
}

// principalConn returns the upstream session with instance in of the principal id,
// opening it on first use for owner (the request asking). A state being closed by the
// reaper or an eviction as the request found it is replaced once.
func (ss *sessions) principalConn(ctx context.Context, id string, owner *router.Session, in *instance) (*upConn, error) {
	ss.startReaper(in.b)
	for try := 0; ; try++ {
		ps, err := ss.principal(id, owner)
		if err != nil {
			return nil, err
		}
		c, err := ss.clientConn(ctx, ps.st, in)
		if errors.Is(err, errSessionEnded) && try == 0 {
			continue
		}
		return c, err
	}
}

// principalOpen returns principal id's open upstream session with instance in, nil if
// it has none (or the principal is not held), marking the principal used: a lookup
// that never opens (sessions_caps.go, sessionLike).
func (ss *sessions) principalOpen(id string, in *instance) *upConn {
	p := &ss.principals
	p.mu.Lock()
	ps := p.m[id]
	if ps != nil {
		ps.last.Store(time.Now().UnixNano())
	}
	p.mu.Unlock()
	if ps == nil {
		return nil
	}
	return ps.st.conn(in)
}

// principal finds or makes the state of principal id, marking it used now. A new one
// past the cap takes the place of the principal idle the longest, or is refused.
func (ss *sessions) principal(id string, owner *router.Session) (*principalState, error) {
	if ss.life.ended() {
		return nil, errShuttingDown
	}
	now := time.Now().UnixNano()
	p := &ss.principals
	p.mu.Lock()
	if ps := p.m[id]; ps != nil {
		ps.last.Store(now)
		p.mu.Unlock()
		return ps, nil
	}
	var evicted *principalState
	if len(p.m) >= ss.max {
		if evicted = ss.idlest(now-int64(evictAfter), false); evicted == nil {
			p.mu.Unlock()
			ss.stats.UpstreamRefused.Add(1)
			return nil, errUpstreamFull
		}
		delete(p.m, evicted.id)
	}
	if p.m == nil {
		p.m = map[string]*principalState{}
	}
	// The owner stands for the principal as long as the state lives: a stateless
	// request's Session, which is the next request's once this one is answered unless
	// kept (router.Session.Keep).
	ps := &principalState{id: id, st: newSessionState(owner.Keep())}
	ps.st.opened = func(in *instance, c *upConn) { ss.life.spawn(func() { ss.watchPrincipal(ps, in, c) }) }
	ps.last.Store(now)
	p.m[id] = ps
	p.mu.Unlock()
	if evicted != nil {
		evicted.st.closeAll(nil)
	}
	return ps, nil
}

// idlest returns the least recently used principal unused since before, with nothing
// in flight on its upstream sessions (and, when holding, at least one open: one whose
// closing frees a slot); nil if none. Called with the registry locked.
func (ss *sessions) idlest(before int64, holding bool) *principalState {
	busy := ss.conns.table.busyConns()
	var found *principalState
	for _, ps := range ss.principals.m {
		last := ps.last.Load()
		if last >= before || (found != nil && last >= found.last.Load()) || ps.busy(busy) || (holding && ps.open() == 0) {
			continue
		}
		found = ps
	}
	return found
}

// open is the number of the principal's upstream sessions open.
func (ps *principalState) open() int {
	ps.st.mu.Lock()
	defer ps.st.mu.Unlock()
	return len(ps.st.conns)
}

// evictIdle closes the principal idle the longest that holds upstream sessions, so
// that their slots come free for a request waiting for one.
func (ss *sessions) evictIdle() {
	p := &ss.principals
	p.mu.Lock()
	ps := ss.idlest(time.Now().Add(-evictAfter).UnixNano(), true)
	if ps != nil {
		delete(p.m, ps.id)
	}
	p.mu.Unlock()
	if ps != nil {
		ps.st.closeAll(nil)
	}
}

// busy reports whether one of the principal's upstream sessions is in busy, or is
// being opened, or a listen stream of the principal's waits for its updates.
func (ps *principalState) busy(busy map[*upConn]bool) bool {
	ps.mu.Lock()
	listened := len(ps.listens) > 0
	ps.mu.Unlock()
	if listened {
		return true
	}
	ps.st.mu.Lock()
	defer ps.st.mu.Unlock()
	if len(ps.st.opening) > 0 {
		return true
	}
	for _, c := range ps.st.conns {
		if busy[c] {
			return true
		}
	}
	return false
}

// startReaper notes b's SessionIdle (sessions are opened with it) and starts the
// reaper, once.
func (ss *sessions) startReaper(b *backend) {
	idle := int64(b.cfg.SessionIdle)
	for p := &ss.principals; ; {
		cur := p.minIdle.Load()
		if (cur != 0 && cur <= idle) || p.minIdle.CompareAndSwap(cur, idle) {
			break
		}
	}
	ss.reaper.Do(func() { ss.life.spawn(ss.reap) })
}

// reapEvery is how long the reaper waits for its next round.
func (ss *sessions) reapEvery() time.Duration {
	d := ss.principals.tick
	if m := time.Duration(ss.principals.minIdle.Load()); m > 0 && m/2 < d {
		d = m / 2
	}
	return max(d, time.Millisecond)
}

// reap closes, until the fleet closes, the upstream sessions unused for their
// backend's SessionIdle with nothing in flight: the principals' (reapPrincipals) and
// those by declared capabilities (reapCaps).
func (ss *sessions) reap() {
	t := time.NewTimer(ss.reapEvery())
	defer t.Stop()
	for {
		select {
		case <-ss.life.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		ss.reapPrincipals(now)
		ss.reapCaps(now)
		t.Reset(ss.reapEvery())
	}
}

// reapPrincipals closes the upstream sessions of the principals with nothing in flight
// that have not been used for the session's backend's SessionIdle (and the dead ones),
// and forgets a principal left with none once it has been unused for evictAfter.
func (ss *sessions) reapPrincipals(now time.Time) {
	p := &ss.principals
	ss.reapIdle(&p.mu, func() int { return len(p.m) }, func(busy map[*upConn]bool) (gone []*upConn) {
		for id, ps := range p.m {
			if ps.busy(busy) {
				continue
			}
			last := ps.last.Load()
			gone = ps.st.takeIdle(gone, last, now)
			if ps.open() == 0 && last < now.Add(-evictAfter).UnixNano() {
				delete(p.m, id)
				ps.st.closeAll(nil) // nothing left to close: marks it closed
			}
		}
		return gone
	})
}

// reapIdle is the frame of the reapers of a registry guarded by mu: when the registry
// holds anything (size, under mu), take runs under mu with the upstream connections
// that have requests in flight now and returns those it removed from the registry;
// they are closed once mu is released, since closing one may wait on the network.
func (ss *sessions) reapIdle(mu *sync.Mutex, size func() int, take func(busy map[*upConn]bool) []*upConn) {
	var gone []*upConn
	mu.Lock()
	if size() > 0 {
		gone = take(ss.conns.table.busyConns())
	}
	mu.Unlock()
	for _, c := range gone {
		c.closeUpstream()
	}
}

// takeIdle removes from st and appends to gone its upstream sessions that are dead, or
// unused since last for longer than their backend's SessionIdle (before now).
func (st *sessionState) takeIdle(gone []*upConn, last int64, now time.Time) []*upConn {
	st.mu.Lock()
	defer st.mu.Unlock()
	for in, c := range st.conns {
		if c.dead() || last < now.Add(-in.b.cfg.SessionIdle).UnixNano() {
			delete(st.conns, in)
			c.killed.Store(true)
			gone = append(gone, c)
		}
	}
	return gone
}

// closePrincipals forgets every principal and closes their upstream sessions, counting
// them in closing until they are: the fleet's shutdown.
func (ss *sessions) closePrincipals(closing *sync.WaitGroup) {
	p := &ss.principals
	p.mu.Lock()
	all := p.m
	p.m = nil
	p.mu.Unlock()
	for _, ps := range all {
		ps.st.closeAll(closing)
	}
}

// principalCount is the number of principals holding state.
func (ss *sessions) principalCount() int {
	ss.principals.mu.Lock()
	defer ss.principals.mu.Unlock()
	return len(ss.principals.m)
}
