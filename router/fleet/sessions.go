package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// sessions is the part that owns the fleet's state of each client session
// (sessionState) and the per-client upstream sessions opened for them: the upstream
// session a per-client backend opens for a client on first use (one request opens it
// while the session's others wait), and the cap on how many are open at once (slots).
//
// Per-client upstream sessions (BackendConfig.PerClient) cost the backend a session
// each, and a stdio backend a child process each: the fleet holds at most
// Config.MaxUpstreamSessions of them at once. A client session that needs one beyond
// that waits its turn (first come, first served) for at most
// Config.UpstreamSessionWait, then gets an overload error. A slot is given back once
// the upstream session is closed (its child has exited), when its client session ends
// or when it is found dead. A 2026-07-28 client has no session: its principal holds its
// per-client upstream sessions instead (sessions_principal.go), under the same cap.
//
// Who calls it: open and end from the router (SessionOpened/SessionClosed), upstreamFor
// from forwarding on dispatcher workers, the lookups from anywhere. Its lock guards the
// registry only; each sessionState has its own, and no I/O happens under either:
// opening runs on the requesting worker, closing in the background.
type sessions struct {
	life  *lifecycle
	conns *connector // opens per-client upstream sessions, as their client
	stats *Stats
	max   int           // Config.MaxUpstreamSessions
	wait  time.Duration // Config.UpstreamSessionWait
	// slots holds one token per per-client upstream session open (or opening).
	slots chan struct{}
	// principals holds the 2026-07-28 clients' upstream sessions, by principal
	// (sessions_principal.go).
	principals principals
	// caps holds the 2026-07-28 clients' sessions with shared 2025 backends, by the
	// capabilities they declared (sessions_caps.go).
	caps capsSessions
	// reaper starts the goroutine that closes idle sessions (principals and caps),
	// with the first of them.
	reaper sync.Once
	// endListeners ends listen streams with an error reply (the fleet's
	// endListener): relisten's last resort, so that their clients learn that the
	// streams went quiet and can listen again.
	endListeners func(ls []*clientListener, code int, msg string)

	mu sync.Mutex
	// m holds every open client session; its state is made on first need (stateFor):
	// most sessions never open an upstream session of their own, and an idle session
	// kept a sessionState for nothing.
	m map[*router.Session]*sessionState
}

func newSessions(life *lifecycle, conns *connector, stats *Stats, max int, wait time.Duration) *sessions {
	return &sessions{life: life, conns: conns, stats: stats, max: max, wait: wait,
		slots: make(chan struct{}, max), m: map[*router.Session]*sessionState{}, principals: principals{tick: reapTick}}
}

// sessionState is the fleet's state of one client session. sess is the one place the
// per-client upstream sessions learn who their client is (connector.open's owner): what
// the backend is shown of the client is read from it there.
type sessionState struct {
	sess  *router.Session
	mu    sync.Mutex
	conns map[*instance]*upConn // per-client upstream sessions
	// opening is closed once the upstream session with an instance being opened by
	// one of the session's requests is open, or failed.
	opening map[*instance]chan struct{}
	// closed is set and done closed when the session ended: a request waiting for an
	// upstream session gives up, and one that finishes opening is closed at once
	// instead of kept. done is made by the first request that waits on it (gone):
	// most sessions never open an upstream session of their own, and an idle session
	// kept a channel for nothing.
	closed bool
	done   chan struct{}
	// opened, when set, is told of each upstream session opened for the state (a
	// principal's watches it: listen_principal.go); called on the opener's goroutine.
	opened func(in *instance, c *upConn)
}

// dropBackend takes st's upstream sessions with b's instances out of st, marks them
// dead and appends them to out, for the caller to close.
func (st *sessionState) dropBackend(b *backend, out []*upConn) []*upConn {
	st.mu.Lock()
	defer st.mu.Unlock()
	for in, c := range st.conns {
		if in.b == b {
			delete(st.conns, in)
			c.killed.Store(true)
			out = append(out, c)
		}
	}
	return out
}

func newSessionState(s *router.Session) *sessionState {
	return &sessionState{sess: s}
}

// gone is closed once the session has ended (see done).
func (st *sessionState) gone() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done == nil {
		st.done = make(chan struct{})
		if st.closed {
			close(st.done)
		}
	}
	return st.done
}

// open records a new client session (its state comes later, see m).
func (ss *sessions) open(s *router.Session) {
	ss.mu.Lock()
	if _, ok := ss.m[s]; !ok {
		ss.m[s] = nil
	}
	ss.mu.Unlock()
}

// end forgets an ended client session and closes its upstream sessions in the
// background.
func (ss *sessions) end(s *router.Session) {
	ss.mu.Lock()
	st := ss.m[s]
	delete(ss.m, s)
	ss.mu.Unlock()
	if st != nil {
		st.closeAll(nil)
	}
}

// state returns the fleet's state of a session, nil when it has none (it never needed
// one, or it ended): for lookups.
func (ss *sessions) state(s *router.Session) *sessionState {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.m[s]
}

// stateFor returns the fleet's state of an open session, made on first need; nil once
// the session ended: nothing may be opened for a session that is gone.
func (ss *sessions) stateFor(s *router.Session) *sessionState {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	st, open := ss.m[s]
	if open && st == nil {
		st = newSessionState(s)
		ss.m[s] = st
	}
	return st
}

// all returns the states of the open client sessions, for work done on each outside
// the registry's lock. A session without a state of its own gets a blank one for the
// call, not kept: it has no upstream sessions, only its Session.
func (ss *sessions) all() []*sessionState {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	list := make([]*sessionState, 0, len(ss.m))
	for s, st := range ss.m {
		if st == nil {
			st = &sessionState{sess: s}
		}
		list = append(list, st)
	}
	return list
}

// closeAll closes every open session's upstream sessions and returns once they are
// closed (their children stopped), each within the upstream's own bounded timeouts:
// the fleet's shutdown.
func (ss *sessions) closeAll() {
	var closing sync.WaitGroup
	for _, st := range ss.all() {
		st.closeAll(&closing)
	}
	ss.closePrincipals(&closing)
	ss.closeCaps(&closing)
	closing.Wait()
}

// closeAll closes the session's upstream sessions (in the background: a child takes a
// moment to stop), each giving its slot back once closed; closing, when not nil,
// counts them until they are.
func (st *sessionState) closeAll(closing *sync.WaitGroup) {
	st.mu.Lock()
	conns := st.conns
	st.conns = nil
	if !st.closed {
		st.closed = true
		if st.done != nil {
			close(st.done)
		}
	}
	st.mu.Unlock()
	for _, c := range conns {
		c.killed.Store(true)
		if closing != nil {
			closing.Add(1)
		}
		go func() {
			c.closeUpstream()
			if closing != nil {
				closing.Done()
			}
		}()
	}
}

// conn returns the session's open upstream session with instance in, if any.
func (st *sessionState) conn(in *instance) *upConn {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.conns[in]
}

// errUpstreamFull is returned by acquire when no slot freed up in time.
var errUpstreamFull = errors.New("too many upstream sessions")

// errSessionEnded is returned by upstreamFor for a client session that ended meanwhile.
var errSessionEnded = errors.New("the client session ended")

// acquire takes a slot for one per-client upstream session, waiting at most wait,
// until ctx ends or the client session ends (gone). With none free, the principal idle
// the longest is closed to free one (sessions_principal.go).
func (ss *sessions) acquire(ctx context.Context, gone <-chan struct{}) error {
	select {
	case ss.slots <- struct{}{}:
		return nil
	default:
	}
	ss.evictIdle()
	ss.stats.UpstreamQueued.Add(1)
	defer ss.stats.UpstreamQueued.Add(-1)
	t := time.NewTimer(ss.wait)
	defer t.Stop()
	select {
	case ss.slots <- struct{}{}:
		return nil
	case <-t.C:
		ss.stats.UpstreamRefused.Add(1)
		return errUpstreamFull
	case <-ctx.Done():
		return ctx.Err()
	case <-gone:
		return errSessionEnded
	}
}

// inUse is the number of per-client upstream sessions open (or opening).
func (ss *sessions) inUse() int { return len(ss.slots) }

// fullMessage explains an errUpstreamFull to the client.
func (ss *sessions) fullMessage(b *backend) string {
	return "mcprouter: overloaded: backend " + b.cfg.Name + " needs a session of its own for this client, and all " +
		strconv.Itoa(ss.max) + " per-client upstream sessions are in use (a request waits at most " + ss.wait.String() +
		" for one, a new 2026-07-28 principal only the place of an idle one)"
}

// closeUpstream closes a per-client upstream session and then gives its slot back
// (once, whoever calls it first).
func (c *upConn) closeUpstream() {
	c.conn.Close()
	if c.slot.CompareAndSwap(true, false) {
		<-c.slots
	}
}

// openConn opens the client's own upstream session with instance in, within a slot of
// the cap: it waits for one, then dials and performs the handshake as the client.
func (ss *sessions) openConn(ctx context.Context, in *instance, st *sessionState) (*upConn, error) {
	if st.sess.Stateless() {
		// A 2026-07-28 principal's: it declares what the client did (principalID).
		ctx = context.WithValue(ctx, declaredKey{}, appendDeclared(nil, st.sess.ClientCapabilities()))
	}
	return ss.openSlotted(ctx, in, st.sess, st.gone())
}

// openSlotted opens an upstream session with instance in for owner (nil: the one ctx
// names the capabilities of, sessions_caps.go) within a slot of the cap, waiting for
// one until gone is closed (nil: no client session to end).
func (ss *sessions) openSlotted(ctx context.Context, in *instance, owner *router.Session, gone <-chan struct{}) (*upConn, error) {
	if err := ss.acquire(ctx, gone); err != nil {
		return nil, err
	}
	c, err := ss.conns.open(ctx, in, owner)
	if err != nil {
		<-ss.slots
		return nil, err
	}
	c.slots = ss.slots
	c.slot.Store(true)
	return c, nil
}

// upstreamFor returns the upstream session to send e on: a healthy instance's shared
// session, or a session of that instance opened for some clients (the client's own, a
// 2026-07-28 principal's, one declaring a 2026 client's capabilities) on first use.
// When the instance refuses to open it (down, and its health check has not seen it
// yet), nothing has been sent: the request goes to another replica, on the same kind of
// session opened there, never on the shared one in its stead (sessions_caps.go).
func (ss *sessions) upstreamFor(e *entry) (*upConn, error) {
	b := e.backend
	in := b.pick()
	if in == nil {
		return nil, errors.New("no healthy instance")
	}
	c, err := ss.upstreamOn(e, in)
	if err != nil && errors.Is(err, upstream.ErrBackendDown) {
		in.healthy.Store(false)
		if in2 := b.pickOther(in); in2 != nil {
			return ss.upstreamOn(e, in2)
		}
	}
	return c, err
}

// upstreamOn is upstreamFor on instance in.
func (ss *sessions) upstreamOn(e *entry, in *instance) (*upConn, error) {
	b := e.backend
	if !b.cfg.PerClient {
		c := in.conn.Load()
		if c == nil {
			return nil, errors.New("instance " + in.dialer.Addr + " not connected")
		}
		if !c.modern && e.sess != nil && e.sess.Stateless() {
			// A 2026-07-28 client: a session declaring its capabilities (sessions_caps.go).
			return ss.capsConn(e, in, c)
		}
		return c, nil
	}
	if e.sess != nil && e.sess.Stateless() {
		// A 2026-07-28 client: its principal's upstream session (sessions_principal.go).
		ctx, cancel := context.WithDeadline(ss.life.ctx, time.Unix(0, e.deadline))
		defer cancel()
		return ss.principalConn(ctx, principalID(e.sess), e.sess, in)
	}
	st := ss.stateFor(e.sess)
	if st == nil {
		return nil, errSessionEnded
	}
	if c := st.conn(in); c != nil && !c.dead() {
		return c, nil // open already: no wait, so no deadline to set up
	}
	ctx, cancel := context.WithDeadline(ss.life.ctx, time.Unix(0, e.deadline))
	defer cancel()
	return ss.clientConn(ctx, st, in)
}

// clientConn returns the session's own upstream session with instance in, opening it
// on first use. One request of the session opens it while the session's others wait
// for it, so that a client never holds more than one slot of the cap per instance.
func (ss *sessions) clientConn(ctx context.Context, st *sessionState, in *instance) (*upConn, error) {
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return nil, errSessionEnded
		}
		c := st.conns[in]
		if c != nil && c.dead() {
			delete(st.conns, in)
			go c.closeUpstream()
			c = nil
		}
		if c != nil {
			st.mu.Unlock()
			return c, nil
		}
		if opening := st.opening[in]; opening != nil {
			st.mu.Unlock()
			select {
			case <-opening: // opened or failed: look again
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if st.opening == nil {
			st.opening = map[*instance]chan struct{}{}
		}
		opening := make(chan struct{})
		st.opening[in] = opening
		st.mu.Unlock()

		c, err := ss.openConn(ctx, in, st)
		st.mu.Lock()
		delete(st.opening, in)
		close(opening)
		opened := st.opened
		switch {
		case err != nil:
		case st.closed: // the client left while its session was opening
			go c.closeUpstream()
			c, err = nil, errSessionEnded
		default:
			if st.conns == nil {
				st.conns = map[*instance]*upConn{}
			}
			st.conns[in] = c
		}
		st.mu.Unlock()
		if err == nil && opened != nil {
			opened(in, c)
		}
		return c, err
	}
}

// eachConn calls fn (in the background) for each per-client upstream session of s.
func (ss *sessions) eachConn(s *router.Session, fn func(*upConn)) {
	st := ss.state(s)
	if st == nil {
		return
	}
	st.mu.Lock()
	var list []*upConn
	for _, c := range st.conns {
		list = append(list, c)
	}
	st.mu.Unlock()
	for _, c := range list {
		ss.life.spawn(func() { fn(c) })
	}
}
