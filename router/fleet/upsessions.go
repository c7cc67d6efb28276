package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/router"
)

// Per-client upstream sessions: the fleet's state of each client session (sessionState),
// the upstream session a per-client backend opens for it on first use (one request opens
// it while the session's others wait), and the cap on how many are open at once
// (upSlots). Called by forwarding on dispatcher workers and by SessionOpened/Closed from
// the router; closing runs in the background.
//
// Per-client upstream sessions (BackendConfig.PerClient) cost the backend a session
// each, and a stdio backend a child process each: the fleet holds at most
// Config.MaxUpstreamSessions of them at once. A client session that needs one beyond
// that waits its turn (first come, first served) for at most
// Config.UpstreamSessionWait, then gets an overload error. A slot is given back once
// the upstream session is closed (its child has exited), when its client session ends
// or when it is found dead.

// sessionState is the fleet's state of one client session.
type sessionState struct {
	sess  *router.Session
	mu    sync.Mutex
	conns map[*instance]*upConn // per-client upstream sessions
	// opening is closed once the upstream session with an instance being opened by
	// one of the session's requests is open, or failed.
	opening map[*instance]chan struct{}
	// closed is set and done closed when the session ended: a request waiting for an
	// upstream session gives up, and one that finishes opening is closed at once
	// instead of kept.
	closed bool
	done   chan struct{}
}

func newSessionState(s *router.Session) *sessionState {
	return &sessionState{sess: s, done: make(chan struct{})}
}

// SessionOpened implements router.Fleet.
func (f *Fleet) SessionOpened(s *router.Session) {
	f.sessMu.Lock()
	if _, ok := f.sessions[s]; !ok {
		f.sessions[s] = newSessionState(s)
	}
	f.sessMu.Unlock()
}

// SessionClosed implements router.Fleet.
func (f *Fleet) SessionClosed(s *router.Session) {
	f.sessMu.Lock()
	st := f.sessions[s]
	delete(f.sessions, s)
	f.sessMu.Unlock()
	f.subs.dropSession(s)
	f.srv.dropSession(s)
	if st != nil {
		st.closeAll(nil)
	}
}

// state returns the fleet's state of an open session (SessionOpened), nil once it ended:
// nothing may be opened for a session that is gone.
func (f *Fleet) state(s *router.Session) *sessionState {
	f.sessMu.Lock()
	defer f.sessMu.Unlock()
	return f.sessions[s]
}

// sessionStates returns the states of the open client sessions, for work done on each
// outside sessMu.
func (f *Fleet) sessionStates() []*sessionState {
	f.sessMu.Lock()
	defer f.sessMu.Unlock()
	list := make([]*sessionState, 0, len(f.sessions))
	for _, st := range f.sessions {
		list = append(list, st)
	}
	return list
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
		close(st.done)
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

func (st *sessionState) conn(in *instance) *upConn {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.conns[in]
}

// errUpstreamFull is returned by acquireUpstream when no slot freed up in time.
var errUpstreamFull = errors.New("too many upstream sessions")

// errSessionEnded is returned by connFor for a client session that ended meanwhile.
var errSessionEnded = errors.New("the client session ended")

// acquireUpstream takes a slot for one per-client upstream session, waiting at most
// Config.UpstreamSessionWait, until ctx ends or the client session ends (gone).
func (f *Fleet) acquireUpstream(ctx context.Context, gone <-chan struct{}) error {
	select {
	case f.upSlots <- struct{}{}:
		return nil
	default:
	}
	f.Stats.UpstreamQueued.Add(1)
	defer f.Stats.UpstreamQueued.Add(-1)
	t := time.NewTimer(f.cfg.UpstreamSessionWait)
	defer t.Stop()
	select {
	case f.upSlots <- struct{}{}:
		return nil
	case <-t.C:
		f.Stats.UpstreamRefused.Add(1)
		return errUpstreamFull
	case <-ctx.Done():
		return ctx.Err()
	case <-gone:
		return errSessionEnded
	}
}

// UpstreamSessions is the number of per-client upstream sessions open (or opening).
func (f *Fleet) UpstreamSessions() int { return len(f.upSlots) }

// upstreamFullMessage explains an errUpstreamFull to the client.
func (f *Fleet) upstreamFullMessage(b *backend) string {
	return "mcprouter: overloaded: backend " + b.cfg.Name + " needs a session of its own for this client, and all " +
		strconv.Itoa(f.cfg.MaxUpstreamSessions) + " per-client upstream sessions stayed busy for " + f.cfg.UpstreamSessionWait.String()
}

// closeUpstream closes a per-client upstream session and then gives its slot back
// (once, whoever calls it first).
func (c *upConn) closeUpstream() {
	c.conn.Close()
	if c.slot.CompareAndSwap(true, false) {
		<-c.slots
	}
}

// openClientConn opens the client's own upstream session with instance in, within a
// slot of the cap: it waits for one, dials and performs the handshake with the
// client's capabilities.
func (f *Fleet) openClientConn(ctx context.Context, in *instance, st *sessionState) (*upConn, error) {
	if err := f.acquireUpstream(ctx, st.done); err != nil {
		return nil, err
	}
	sess := st.sess
	c, err := f.conns.open(ctx, in, sess)
	if err != nil {
		<-f.upSlots
		return nil, err
	}
	c.slots = f.upSlots
	c.slot.Store(true)
	return c, nil
}

// connFor returns the upstream session to send e on: a healthy instance's shared
// session, or the client's own session with that instance (opened on first use).
func (f *Fleet) connFor(e *entry) (*upConn, error) {
	b := e.backend
	in := b.pick()
	if in == nil {
		return nil, errors.New("no healthy instance")
	}
	if !b.cfg.PerClient {
		if c := in.conn.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("instance " + in.dialer.Addr + " not connected")
	}
	st := f.state(e.sess)
	if st == nil {
		return nil, errSessionEnded
	}
	if c := st.conn(in); c != nil && !c.dead() {
		return c, nil // open already: no wait, so no deadline to set up
	}
	ctx, cancel := context.WithDeadline(f.life.ctx, time.Unix(0, e.deadline))
	defer cancel()
	return f.clientConn(ctx, st, in)
}

// clientConn returns the session's own upstream session with instance in, opening it
// on first use. One request of the session opens it while the session's others wait
// for it, so that a client never holds more than one slot of the cap per instance.
func (f *Fleet) clientConn(ctx context.Context, st *sessionState, in *instance) (*upConn, error) {
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

		c, err := f.openClientConn(ctx, in, st)
		st.mu.Lock()
		delete(st.opening, in)
		close(opening)
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
		return c, err
	}
}

// forEachSessionConn calls fn (in the background) for each per-client upstream session
// of s.
func (f *Fleet) forEachSessionConn(s *router.Session, fn func(*upConn)) {
	st := f.state(s)
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
		f.life.spawn(func() { fn(c) })
	}
}
