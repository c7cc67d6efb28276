package transport

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/budget"
)

// Session is the transport side of one client session: its id, its revision, its streams,
// its last activity. The handler's MCP state rides along in State.
//
// Its fields are ordered so that it fits the 128-byte size class (TestSessionSize): one
// is held per session, 100,000 of them on a busy router. Its revision and flags share
// one word (calls) and its state is held in place, where a {revision, state} pair of
// its own took 32 bytes more of every session.
type Session struct {
	id string
	// state is the handler's state (a SessionState), stored once: at open, or by
	// setState for a session created before its initialize (legacy SSE, stdio); empty
	// until then.
	state atomic.Value
	reg   *Registry
	out   sessionOutput

	client netip.Addr      // the client's address key (see clientKey); zero: none
	acct   *budget.Account // the session's share of the memory budget; nil: no budget
	born   int64           // unix nanoseconds

	principal  atomic.Pointer[auth.Principal] // the owner as last authenticated (its newest token)
	lastActive atomic.Int64                   // unix nanoseconds
	// done is made by the first Done (most sessions never have theirs asked for: an idle
	// session kept one more allocation for nothing), and closedDone once the session
	// has ended.
	done atomic.Pointer[chan struct{}]

	// calls counts the client calls not yet answered (callsMask), and holds the
	// session's flags (readyBit, closedBit, handedOverBit) and its revision's number in
	// the registry's versions (versionShift): one word for all.
	calls   atomic.Int32
	carrier Carrier
}

// The parts of Session.calls. readyBit is set once the client sent
// notifications/initialized (MarkReady); closedBit once the session has ended;
// handedOverBit when this process's shutdown ended it (HandedOver). The bits under
// callsMask count calls (a session has far fewer in flight: the dispatcher's queues
// bound them), those under versionMask number the revision.
const (
	callsMask     = 1<<24 - 1
	versionShift  = 24
	versionMask   = maxVersions - 1
	handedOverBit = 1 << 28
	closedBit     = 1 << 29
	readyBit      = 1 << 30
)

// closedDone is the done channel of every session that ended before anyone asked.
var closedDone = func() *chan struct{} {
	c := make(chan struct{})
	close(c)
	return &c
}()

// maxVersions bounds the revisions a registry numbers (versionMask's bits): a handler
// binds sessions to the few revisions it negotiates.
const maxVersions = 16

// versions numbers the protocol revisions of a registry's sessions, so that a session
// keeps its revision in 4 bits of a word it has anyway: number 0 is "" (a session not
// bound yet), the others are added as sessions bring them and never removed. Reads
// take no lock (names is replaced, never written, when a revision is added).
type versions struct {
	mu    sync.Mutex
	names atomic.Pointer[[]string]
}

// number is v's number, added when new; false when maxVersions are numbered already.
func (vs *versions) number(v string) (uint32, bool) {
	if v == "" {
		return 0, true
	}
	if n, ok := vs.find(v); ok {
		return n, true
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if n, ok := vs.find(v); ok {
		return n, true
	}
	names := vs.list()
	if len(names)+1 >= maxVersions {
		return 0, false
	}
	grown := append(append(make([]string, 0, len(names)+1), names...), v)
	vs.names.Store(&grown)
	return uint32(len(grown)), true
}

// find is v's number if it has one (v not "").
func (vs *versions) find(v string) (uint32, bool) {
	for i, name := range vs.list() {
		if name == v {
			return uint32(i + 1), true
		}
	}
	return 0, false
}

// list is the revisions numbered 1 and up.
func (vs *versions) list() []string {
	if p := vs.names.Load(); p != nil {
		return *p
	}
	return nil
}

// name is the revision numbered n ("" for 0).
func (vs *versions) name(n uint32) string {
	if n == 0 {
		return ""
	}
	return vs.list()[n-1]
}

// ErrTooManyVersions: a session was to be bound to a revision past the maxVersions a
// registry numbers (a handler negotiates a few).
var ErrTooManyVersions = errors.New("transport: too many protocol revisions in one registry")

// discarded is a session that was resolved but not registered, ended as handed over:
// what the handler is told of, so that it gives back the state it made for it.
func (r *Registry) discarded(id string, carrier Carrier, version string, state SessionState) *Session {
	s := &Session{id: id, carrier: carrier, reg: r}
	_ = s.bind(version, state) // past maxVersions its revision reads "": it has ended anyway
	s.calls.Or(closedBit | handedOverBit)
	return s
}

// bind stores the handler's state (unless nil) and the number of its revision in a
// session that nobody else sees yet.
func (s *Session) bind(version string, state SessionState) error {
	n, ok := s.reg.versions.number(version)
	if !ok {
		return ErrTooManyVersions
	}
	s.calls.Store(int32(n << versionShift))
	if state != nil {
		s.state.Store(state)
	}
	return nil
}

// sessionOutput is how a transport delivers server-initiated messages of a session and
// tears its streams down.
type sessionOutput interface {
	send(msg []byte) error
	// close ends the session's streams; retryMs > 0 asks clients to come back (shutdown).
	close(retryMs int)
}

// noticeOutput is a sessionOutput that delivers notices apart from its other messages,
// outside the session's event log (Streamable HTTP); others send them like any message.
type noticeOutput interface {
	notice(msg []byte) error
}

// streamHolder is a sessionOutput that can tell whether its client holds a stream open
// (legacy SSE, Streamable HTTP's GET stream; stdio always does). A session whose output
// cannot tell (NATS) counts as holding none.
type streamHolder interface {
	attached() bool
}

// ID is the session id (the Mcp-Session-Id header value on Streamable HTTP).
func (s *Session) ID() string { return s.id }

// Carrier is the client transport the session lives on.
func (s *Session) Carrier() Carrier { return s.carrier }

// Version is the protocol revision negotiated at initialize.
func (s *Session) Version() string {
	return s.reg.versions.name(uint32(s.calls.Load()>>versionShift) & versionMask)
}

// State is the handler's state given to Bind.
func (s *Session) State() SessionState { return s.state.Load() }

// setState binds the handler's state to a session created before initialize (legacy SSE,
// stdio); it fails if the session was bound already. The revision follows the state:
// a reader between the two sees the state with the revision the session had before.
func (s *Session) setState(version string, state SessionState) error {
	if state == nil || s.state.Load() != nil {
		return ErrAlreadyBound
	}
	n, ok := s.reg.versions.number(version)
	if !ok {
		return ErrTooManyVersions
	}
	if !s.state.CompareAndSwap(nil, state) {
		return ErrAlreadyBound
	}
	for {
		old := s.calls.Load()
		if s.calls.CompareAndSwap(old, old&^(versionMask<<versionShift)|int32(n<<versionShift)) {
			return nil
		}
	}
}

// Principal is who the session belongs to, as its latest request authenticated (the
// newest token and claims of the same principal); nil without authentication. Every
// request on the session is made by this principal: another one is told the session
// does not exist (see ownedBy).
func (s *Session) Principal() *auth.Principal { return s.principal.Load() }

// ownedBy reports whether p, who authenticated a request naming the session, is the
// principal the session belongs to (both nil without authentication). A session id
// never stands in for authentication: whoever learns it still needs the owner's
// credentials.
//
// The session keeps no owner of its own: its principal is renewed only with one that
// passed this check, so it is always the owner (compared field by field, as ID would
// tell them apart, without building the IDs).
func (s *Session) ownedBy(p *auth.Principal) bool { return s.principal.Load().SameID(p) }

// renew keeps p, the owner as a request just authenticated, as the session's principal:
// later work on the session (token exchange for its backends, policy) sees the newest
// token. Called after ownedBy.
func (s *Session) renew(p *auth.Principal) {
	if p != nil && s.principal.Load() != p {
		s.principal.Store(p)
	}
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} {
	if p := s.done.Load(); p != nil {
		return *p
	}
	if s.Closed() {
		return *closedDone // closeWith is about to store it, or never will (a discarded session)
	}
	c := make(chan struct{})
	if s.done.CompareAndSwap(nil, &c) {
		return c // closeWith closes it
	}
	return *s.done.Load() // another Done's, or closedDone
}

// HandedOver reports whether the session was closed by this process's shutdown, with
// its clients told to come back (to another instance): it did not end for the client.
func (s *Session) HandedOver() bool { return s.calls.Load()&handedOverBit != 0 }

// Closed reports whether the session has ended.
func (s *Session) Closed() bool { return s.calls.Load()&closedBit != 0 }

// Send delivers a server-initiated message (a notification or a server-to-client request
// not tied to a client request) on the session's standalone stream: the GET stream on
// Streamable HTTP, the event stream on legacy SSE, stdout on stdio. The message is copied.
// Messages sent while no stream is attached are kept (bounded) and delivered when the
// client attaches.
func (s *Session) Send(msg []byte) error {
	if s.Closed() {
		return ErrSessionClosed
	}
	return s.out.send(msg)
}

// SendNotice delivers a change notice (resources/updated, */list_changed) like Send, but
// does not keep it in the session's event log: a notice is idempotent, and the handler
// sends fresh notices when the session moves to another instance, which spares a
// fan-out of one update to thousands of sessions as many log writes.
func (s *Session) SendNotice(msg []byte) error {
	if s.Closed() {
		return ErrSessionClosed
	}
	if n, ok := s.out.(noticeOutput); ok {
		return n.notice(msg)
	}
	return s.out.send(msg)
}

// Close ends the session: its streams end, the registry forgets it and the handler is
// told. Safe to call more than once and from any goroutine.
func (s *Session) Close() { s.closeWith(0) }

func (s *Session) closeWith(retryMs int) {
	flags := int32(closedBit)
	if retryMs > 0 {
		flags |= handedOverBit
	}
	// Only the first close sets the flags: a shutdown's close that loses to a client's
	// DELETE (or an expiry) must not mark the ended session as handed over, which would
	// keep its record for another instance to adopt.
	for {
		old := s.calls.Load()
		if old&closedBit != 0 {
			return
		}
		if s.calls.CompareAndSwap(old, old|flags) {
			break
		}
	}
	if p := s.done.Swap(closedDone); p != nil {
		close(*p)
	}
	if s.reg != nil {
		s.reg.remove(s)
	}
	s.out.close(retryMs)
	s.acct.Close()
	if s.reg != nil && s.reg.handler != nil {
		s.reg.handler.SessionClosed(s)
	}
}

func (s *Session) touch() { s.lastActive.Store(time.Now().UnixNano()) }

// MarkReady records that the client finished the handshake (notifications/initialized):
// from now on the session is no longer subject to RegistryConfig.InitTimeout.
func (s *Session) MarkReady() { s.calls.Or(readyBit) }

// Ready reports whether MarkReady was called.
func (s *Session) Ready() bool { return s.calls.Load()&readyBit != 0 }

// Account is the session's share of the memory budget (nil when budgets are off): the
// handler reserves what it keeps for the session (its record) from it.
func (s *Session) Account() *budget.Account { return s.acct }

// beginCall and endCall bracket a client call on the session: a session with calls in
// flight is busy, and is not evicted to make room for another.
func (s *Session) beginCall() { s.calls.Add(1) }
func (s *Session) endCall()   { s.calls.Add(-1) }

// RegistryConfig bounds the sessions a process keeps. Zero values take the defaults.
//
// Fairness between clients: no address may hold more than MaxPerClient sessions (a new
// one past it replaces that address's own longest-idle session), and when the whole
// table is full a new session replaces the longest-idle session of anyone. A session
// that is busy (a call in flight, or the client holding a stream open) is never
// replaced; when every candidate is busy, the new session is refused instead.
type RegistryConfig struct {
	// MaxSessions caps concurrent sessions. Default 10000.
	MaxSessions int
	// MaxPerClient caps the sessions of one client address (an IPv4 address, or an IPv6
	// /64 network). Default 1000; negative: no cap. stdio and NATS sessions have no
	// address and no cap.
	MaxPerClient int
	// IdleTimeout ends a session with no client activity (no message, no open stream) for
	// this long. Default 30 minutes; negative disables expiry.
	IdleTimeout time.Duration
	// InitTimeout ends a session whose client has not finished the handshake
	// (notifications/initialized, see Session.MarkReady) this long after it was created,
	// open stream or not. Default 30s; negative disables it.
	InitTimeout time.Duration
	// Budget, when set, is the memory budget every session draws its share from.
	Budget *budget.Budget
}

// Defaults of RegistryConfig.
const (
	DefaultMaxSessions  = 10000
	DefaultMaxPerClient = 1000
	DefaultInitTimeout  = 30 * time.Second
)

func (c *RegistryConfig) defaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxPerClient == 0 {
		c.MaxPerClient = DefaultMaxPerClient
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Minute
	}
	if c.InitTimeout == 0 {
		c.InitTimeout = DefaultInitTimeout
	}
}

// Registry holds the live sessions of every client transport of one process.
type Registry struct {
	cfg     RegistryConfig
	handler Handler

	mu        sync.RWMutex
	sessions  map[string]*Session
	perClient map[netip.Addr]int
	versions  versions // the revisions its sessions are bound to, by number

	stop chan struct{}
	wg   sync.WaitGroup
	// Expired counts sessions ended by idle expiry.
	Expired atomic.Uint64
	// Unready counts sessions ended because the handshake did not finish in InitTimeout.
	Unready atomic.Uint64
	// Evicted counts idle sessions ended to make room for a new one.
	Evicted atomic.Uint64
}

// NewRegistry starts a registry; Close stops its expiry sweeper.
func NewRegistry(cfg RegistryConfig, h Handler) *Registry {
	cfg.defaults()
	r := &Registry{cfg: cfg, handler: h, sessions: make(map[string]*Session),
		perClient: make(map[netip.Addr]int), stop: make(chan struct{})}
	if cfg.IdleTimeout > 0 || cfg.InitTimeout > 0 {
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

// BudgetUsed is the bytes sessions retain against the memory budget (0 without one):
// a gauge for metrics.
func (r *Registry) BudgetUsed() int64 { return r.cfg.Budget.Used() }

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

// newAccount is a new session's share of the budget (nil without one).
func (r *Registry) newAccount() *budget.Account { return r.cfg.Budget.Account() }

// sessionSpec is what opening a session needs.
type sessionSpec struct {
	id      string // "" for a fresh random id
	carrier Carrier
	version string
	state   SessionState
	out     sessionOutput
	acct    *budget.Account
	client  netip.Addr // see clientKey; zero for none
	ready   bool       // the handshake is known done (a session carried on from elsewhere)
	// principal is who opens the session (nil without authentication): the session
	// belongs to it for its whole life.
	principal *auth.Principal
}

func (r *Registry) create(carrier Carrier, version string, state SessionState, out sessionOutput) (*Session, error) {
	return r.open(sessionSpec{carrier: carrier, version: version, state: state, out: out})
}

// maxEvictions bounds the tries of open to make room: each evicts one session, and
// another client may take the room first.
const maxEvictions = 4

// open registers a new session, making room by evicting an idle one when its client is
// at its quota or the table is full (see RegistryConfig). With a spec id already taken,
// it returns the session holding it.
func (r *Registry) open(sp sessionSpec) (*Session, error) {
	s := &Session{id: sp.id, carrier: sp.carrier, reg: r, out: sp.out, acct: sp.acct, client: sp.client}
	if err := s.bind(sp.version, sp.state); err != nil {
		return nil, err
	}
	s.principal.Store(sp.principal)
	if sp.ready {
		s.MarkReady()
	}
	s.touch()
	s.born = s.lastActive.Load()
	for try := 0; ; try++ {
		r.mu.Lock()
		if old, dup := r.sessions[sp.id]; dup && sp.id != "" {
			r.mu.Unlock()
			return old, nil
		}
		victim, err := r.roomLocked(sp.client)
		if victim == nil && err == nil {
			r.addLocked(s)
			r.mu.Unlock()
			return s, nil
		}
		r.mu.Unlock()
		if err != nil || try == maxEvictions {
			if err == nil {
				err = ErrTooManySessions
			}
			return nil, err
		}
		r.Evicted.Add(1)
		victim.Close() // outside the lock: closing takes it, and tells the handler
	}
}

// roomLocked decides whether a session of client fits: (nil, nil) when it does, an idle
// session to evict first, or the error to refuse with when every candidate is busy.
func (r *Registry) roomLocked(client netip.Addr) (*Session, error) {
	if client.IsValid() && r.cfg.MaxPerClient > 0 && r.perClient[client] >= r.cfg.MaxPerClient {
		if v := r.longestIdleLocked(client, true); v != nil {
			return v, nil
		}
		return nil, ErrClientQuota
	}
	if len(r.sessions) >= r.cfg.MaxSessions {
		if v := r.longestIdleLocked(client, false); v != nil {
			return v, nil
		}
		return nil, ErrTooManySessions
	}
	return nil, nil
}

// longestIdleLocked is the session with the oldest activity that is not busy, among
// client's sessions when sameClient is set, among all otherwise; nil when all are busy.
// A linear scan: it runs only when the table or a quota is full.
func (r *Registry) longestIdleLocked(client netip.Addr, sameClient bool) *Session {
	var victim *Session
	oldest := int64(0)
	for _, s := range r.sessions {
		if sameClient && s.client != client {
			continue
		}
		if t := s.lastActive.Load(); (victim == nil || t < oldest) && !s.Closed() && !s.busy() {
			victim, oldest = s, t
		}
	}
	return victim
}

// addLocked registers s, giving it a fresh id when it has none.
func (r *Registry) addLocked(s *Session) {
	for s.id == "" {
		s.id = r.newID()
		if _, dup := r.sessions[s.id]; dup {
			s.id = ""
		}
	}
	r.sessions[s.id] = s
	if s.client.IsValid() {
		r.perClient[s.client]++
	}
}

func (r *Registry) remove(s *Session) {
	r.mu.Lock()
	if r.sessions[s.id] == s {
		delete(r.sessions, s.id)
		if s.client.IsValid() {
			if n := r.perClient[s.client] - 1; n > 0 {
				r.perClient[s.client] = n
			} else {
				delete(r.perClient, s.client)
			}
		}
	}
	r.mu.Unlock()
}

// clientKey is the address a client's sessions are counted under: its IPv4 address, or
// the /64 network of its IPv6 address (one host commonly holds a whole /64). An invalid
// or unspecified address gives the zero Addr: no quota.
func clientKey(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() {
		return netip.Addr{}
	}
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
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
	t := time.NewTicker(r.sweepPeriod())
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.expire(now)
		}
	}
}

// sweepPeriod is how often the sweeper looks: a quarter of the shortest timeout, within
// 10ms..1m.
func (r *Registry) sweepPeriod() time.Duration {
	period := time.Minute
	for _, d := range []time.Duration{r.cfg.IdleTimeout, r.cfg.InitTimeout} {
		if d > 0 {
			period = min(period, d/4)
		}
	}
	return max(period, 10*time.Millisecond)
}

// expire ends the sessions idle past IdleTimeout (unless busy) and those whose handshake
// did not finish within InitTimeout (busy or not: a legacy stream opened and never
// used holds its stream open).
func (r *Registry) expire(now time.Time) {
	idleCutoff := now.Add(-r.cfg.IdleTimeout).UnixNano()
	initCutoff := now.Add(-r.cfg.InitTimeout).UnixNano()
	r.Each(func(s *Session) {
		switch {
		case r.cfg.InitTimeout > 0 && !s.Ready() && s.born < initCutoff:
			r.Unready.Add(1)
			s.Close()
		case r.cfg.IdleTimeout > 0 && s.lastActive.Load() < idleCutoff && !s.busy():
			r.Expired.Add(1)
			s.Close()
		}
	})
}

// busy reports whether the client has calls in flight on the session or holds a stream
// open on it, which counts as activity.
func (s *Session) busy() bool {
	if s.calls.Load()&callsMask > 0 {
		return true
	}
	if b, ok := s.out.(streamHolder); ok {
		return b.attached()
	}
	return false
}

// SessionNamer is a Handler that names the sessions it is given: the router's session
// store finds a session's record from its id. An empty name leaves it to newSessionID.
type SessionNamer interface{ NewSessionID() string }

// newID names a new session: the handler's name for it, or newSessionID's.
func (r *Registry) newID() string {
	if n, ok := r.handler.(SessionNamer); ok {
		if id := n.NewSessionID(); id != "" {
			return id
		}
	}
	return newSessionID()
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
