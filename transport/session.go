package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"
)

// Session is the transport side of one client session: its id, its revision, its streams,
// its last activity. The handler's MCP state rides along in State.
type Session struct {
	id   string
	kind Kind
	info atomic.Pointer[sessionInfo]
	reg  *Registry
	out  sessionOutput

	lastActive atomic.Int64 // unix nanoseconds
	closed     atomic.Bool
	handedOver atomic.Bool
	done       chan struct{}
}

// sessionInfo is what Bind sets: immutable once stored.
type sessionInfo struct {
	version string
	state   SessionState
}

// sessionOutput is how a transport delivers server-initiated messages of a session and
// tears its streams down.
type sessionOutput interface {
	send(msg []byte) error
	// close ends the session's streams; retryMs > 0 asks clients to come back (shutdown).
	close(retryMs int)
}

// ID is the session id (the Mcp-Session-Id header value on Streamable HTTP).
func (s *Session) ID() string { return s.id }

// Transport is the client transport the session lives on.
func (s *Session) Transport() Kind { return s.kind }

// Version is the protocol revision negotiated at initialize.
func (s *Session) Version() string { return s.info.Load().version }

// State is the handler's state given to Bind.
func (s *Session) State() SessionState { return s.info.Load().state }

// setState binds the handler's state to a session created before initialize (legacy SSE,
// stdio); it fails if the session was bound already.
func (s *Session) setState(version string, state SessionState) error {
	cur := s.info.Load()
	if cur.state != nil || !s.info.CompareAndSwap(cur, &sessionInfo{version: version, state: state}) {
		return ErrAlreadyBound
	}
	return nil
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// HandedOver reports whether the session was closed by this process's shutdown, with
// its clients told to come back (to another instance): it did not end for the client.
func (s *Session) HandedOver() bool { return s.handedOver.Load() }

// Closed reports whether the session has ended.
func (s *Session) Closed() bool { return s.closed.Load() }

// Send delivers a server-initiated message (a notification or a server-to-client request
// not tied to a client request) on the session's standalone stream: the GET stream on
// Streamable HTTP, the event stream on legacy SSE, stdout on stdio. The message is copied.
// Messages sent while no stream is attached are kept (bounded) and delivered when the
// client attaches.
func (s *Session) Send(msg []byte) error {
	if s.closed.Load() {
		return ErrSessionClosed
	}
	return s.out.send(msg)
}

// SendNotice delivers a change notice (resources/updated, */list_changed) like Send, but
// does not keep it in the session's event log: a notice is idempotent, and the handler
// sends fresh notices when the session moves to another instance, which spares a
// fan-out of one update to thousands of sessions as many log writes.
func (s *Session) SendNotice(msg []byte) error {
	if s.closed.Load() {
		return ErrSessionClosed
	}
	if n, ok := s.out.(interface{ notice([]byte) error }); ok {
		return n.notice(msg)
	}
	return s.out.send(msg)
}

// Close ends the session: its streams end, the registry forgets it and the handler is
// told. Safe to call more than once and from any goroutine.
func (s *Session) Close() { s.closeWith(0) }

func (s *Session) closeWith(retryMs int) {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	s.handedOver.Store(retryMs > 0)
	close(s.done)
	if s.reg != nil {
		s.reg.remove(s)
	}
	s.out.close(retryMs)
	if s.reg != nil && s.reg.handler != nil {
		s.reg.handler.SessionClosed(s)
	}
}

func (s *Session) touch() { s.lastActive.Store(time.Now().UnixNano()) }

// RegistryConfig bounds the sessions a process keeps. Zero values take the defaults.
type RegistryConfig struct {
	// MaxSessions caps concurrent sessions; initialize beyond it is refused. Default 10000.
	MaxSessions int
	// IdleTimeout ends a session with no client activity (no message, no open stream) for
	// this long. Default 30 minutes; negative disables expiry.
	IdleTimeout time.Duration
}

func (c *RegistryConfig) defaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = 10000
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Minute
	}
}

// Registry holds the live sessions of every client transport of one process.
type Registry struct {
	cfg     RegistryConfig
	handler Handler

	mu       sync.RWMutex
	sessions map[string]*Session

	stop chan struct{}
	wg   sync.WaitGroup
	// Expired counts sessions ended by idle expiry.
	Expired atomic.Uint64
}

// NewRegistry starts a registry; Close stops its expiry sweeper.
func NewRegistry(cfg RegistryConfig, h Handler) *Registry {
	cfg.defaults()
	r := &Registry{cfg: cfg, handler: h, sessions: make(map[string]*Session), stop: make(chan struct{})}
	if cfg.IdleTimeout > 0 {
		r.wg.Add(1)
		go r.sweep()
	}
	return r
}

// Get returns the live session with the given id.
func (r *Registry) Get(id []byte) (*Session, bool) {
	r.mu.RLock()
	s, ok := r.sessions[string(id)] // no allocation: the compiler special-cases map[string(b)]
	r.mu.RUnlock()
	return s, ok
}

// Len is the number of live sessions.
func (r *Registry) Len() int {
	r.mu.RLock()
	n := len(r.sessions)
	r.mu.RUnlock()
	return n
}

// Each calls fn for every live session (a snapshot; fn may close sessions).
func (r *Registry) Each(fn func(*Session)) {
	r.mu.RLock()
	list := make([]*Session, 0, len(r.sessions))
	for _, s := range r.sessions {
		list = append(list, s)
	}
	r.mu.RUnlock()
	for _, s := range list {
		fn(s)
	}
}

func (r *Registry) create(kind Kind, version string, state SessionState, out sessionOutput) (*Session, error) {
	s := &Session{kind: kind, reg: r, out: out, done: make(chan struct{})}
	s.info.Store(&sessionInfo{version: version, state: state})
	s.touch()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sessions) >= r.cfg.MaxSessions {
		return nil, ErrTooManySessions
	}
	for {
		s.id = newSessionID()
		if _, dup := r.sessions[s.id]; !dup {
			break
		}
	}
	r.sessions[s.id] = s
	return s, nil
}

func (r *Registry) remove(s *Session) {
	r.mu.Lock()
	if r.sessions[s.id] == s {
		delete(r.sessions, s.id)
	}
	r.mu.Unlock()
}

// CloseAll ends every session, asking clients to reconnect after retryMs (shutdown).
func (r *Registry) CloseAll(retryMs int) {
	r.Each(func(s *Session) { s.closeWith(retryMs) })
}

// Close stops the expiry sweeper. Sessions stay; use CloseAll to end them.
func (r *Registry) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.wg.Wait()
}

func (r *Registry) sweep() {
	defer r.wg.Done()
	period := r.cfg.IdleTimeout / 4
	if period > time.Minute {
		period = time.Minute
	}
	if period < 10*time.Millisecond {
		period = 10 * time.Millisecond
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			cutoff := now.Add(-r.cfg.IdleTimeout).UnixNano()
			r.Each(func(s *Session) {
				if s.lastActive.Load() < cutoff && !s.busy() {
					r.Expired.Add(1)
					s.Close()
				}
			})
		}
	}
}

// busy reports whether the client holds a stream open on the session, which counts as
// activity.
func (s *Session) busy() bool {
	if b, ok := s.out.(interface{ attached() bool }); ok {
		return b.attached()
	}
	return false
}

// newSessionID returns 128 random bits as 32 lowercase hex characters: visible ASCII as
// the specification asks, and unguessable.
func newSessionID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("transport: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// waitCtx waits for ch or ctx, whichever comes first.
func waitCtx(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
