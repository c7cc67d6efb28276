package fleet

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
)

// Error codes of errors the router makes about backends: names for the entries of the
// one table in codec (codec/errors.go), kept here because the fleet's code reads better
// with them.
const (
	CodeBackendUnavailable = codec.CodeBackendUnavailable
	CodeBackendTimeout     = codec.CodeBackendTimeout
	CodeBackendBusy        = codec.CodeBackendBusy
	CodeClientTimeout      = codec.CodeClientTimeout
	CodeClientGone         = codec.CodeClientGone
	CodeSessionLimit       = codec.CodeSessionLimit
	CodeResourceNotFound   = codec.CodeResourceNotFound
)

// Fleet implements router.Fleet over the configured backends.
type Fleet struct {
	cfg      Config
	log      *slog.Logger
	backends []*backend
	table    *table
	srv      serverRequests
	subs     subscriber
	held     holders // where each upstream subscription lives (subs.go)

	cat    atomic.Pointer[catalog]
	gen    atomic.Uint64
	buildM sync.Mutex

	collisions sync.Map // collisions already logged

	sessMu   sync.Mutex
	sessions map[*router.Session]*sessionState
	// upSlots holds one token per per-client upstream session open (upslots.go).
	upSlots chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// obs receives finished requests (SetObserver, observe.go); nil takes no timestamps.
	obs router.Observer

	Stats Stats
}

// Stats counts what the fleet did.
type Stats struct {
	Forwarded atomic.Uint64
	Failed    atomic.Uint64
	TimedOut  atomic.Uint64
	Cancelled atomic.Uint64
	Refreshes atomic.Uint64
	// Failovers counts requests an instance refused that another replica took.
	Failovers atomic.Uint64
	// FanOut counts resource updates delivered to client sessions.
	FanOut atomic.Uint64
	// UpstreamQueued is the number of requests waiting for a per-client upstream
	// session slot now; UpstreamRefused counts those that waited in vain.
	UpstreamQueued  atomic.Int64
	UpstreamRefused atomic.Uint64
	// ServerRequestsExpired counts backends' requests to clients that got no answer in
	// time; ServerRequestsDropped those whose client session ended first.
	ServerRequestsExpired, ServerRequestsDropped atomic.Uint64
}

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

// New builds a fleet; Start connects it.
func New(cfg Config) *Fleet {
	cfg.defaults()
	f := &Fleet{cfg: cfg, log: cfg.Logger, table: newTable(), sessions: map[*router.Session]*sessionState{},
		upSlots: make(chan struct{}, cfg.MaxUpstreamSessions)}
	f.srv.m = map[uint64]*serverRequest{}
	f.srv.bySess = map[*router.Session]map[uint64]*serverRequest{}
	f.srv.byBackend = map[backendKey]*serverRequest{}
	if cfg.Bus != nil && cfg.Bus.JS != nil {
		cs, err := newClusterSubs(f, cfg.Bus)
		if err != nil {
			f.log.Warn("cluster subscriptions unavailable, keeping them per instance", "err", err)
			f.subs = newLocalSubs(f)
		} else {
			f.subs = cs
		}
	} else {
		f.subs = newLocalSubs(f)
	}
	for i, bc := range cfg.Backends {
		b := &backend{f: f, cfg: bc, index: i, sem: make(chan struct{}, bc.MaxConcurrency), listed: make(chan struct{})}
		for n, d := range bc.Dialers {
			b.instances = append(b.instances, &instance{b: b, n: n, dialer: d})
		}
		f.backends = append(f.backends, b)
	}
	f.cat.Store(f.build(0))
	return f
}

// Start connects every instance in the background and keeps them connected and checked
// until Close. It waits up to wait for the first catalog of every backend, so that a
// router that starts answering knows its tools.
func (f *Fleet) Start(wait time.Duration) {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for _, b := range f.backends {
		for _, in := range b.instances {
			f.wg.Add(1)
			go func() { defer f.wg.Done(); in.maintain(f.ctx) }()
		}
	}
	f.wg.Add(1)
	go func() { defer f.wg.Done(); f.sweep() }()
	f.listenChanges()
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for _, b := range f.backends {
		select {
		case <-b.listed:
		case <-timeout.C:
			return
		}
	}
}

// Close stops the maintainers and closes every upstream session.
func (f *Fleet) Close() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	f.subs.close()
	for _, b := range f.backends {
		for _, in := range b.instances {
			if c := in.conn.Load(); c != nil {
				c.conn.Close()
			}
		}
	}
	f.sessMu.Lock()
	var states []*sessionState
	for _, st := range f.sessions {
		states = append(states, st)
	}
	f.sessMu.Unlock()
	for _, st := range states {
		st.closeAll()
	}
	// Whatever was sent and is still in flight gets an answer (a routed request's
	// forward fails its send on the closed context and answers it).
	for _, e := range f.table.takeAll(nil) {
		f.completeErrTaken(e, CodeBackendUnavailable, "router shutting down")
	}
}

// Ready reports whether every backend has at least one healthy instance.
func (f *Fleet) Ready() bool {
	for _, b := range f.backends {
		ok := false
		for _, in := range b.instances {
			if in.usable() {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// BackendHealth reports, per backend, how many instances are healthy out of how many.
func (f *Fleet) BackendHealth(fn func(name string, healthy, total int)) {
	for _, b := range f.backends {
		h := 0
		for _, in := range b.instances {
			if in.usable() {
				h++
			}
		}
		fn(b.cfg.Name, h, len(b.instances))
	}
}

// InFlight is the number of requests waiting for a backend.
func (f *Fleet) InFlight() int { return f.table.len() }

// sweep fails requests whose backend did not answer in time.
func (f *Fleet) sweep() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var buf []*entry
	for {
		select {
		case <-f.ctx.Done():
			return
		case now := <-t.C:
			buf = f.table.expired(now.UnixNano(), buf[:0])
			for _, e := range buf {
				f.Stats.TimedOut.Add(1)
				f.completeErrTaken(e, CodeBackendTimeout, timeoutMessage(e.backend))
			}
		}
	}
}

// call sends one of the router's own requests on c and waits for its result (raw). A
// JSON-RPC error from the backend comes back as a *router.Error.
func (f *Fleet) call(ctx context.Context, c *upConn, method string, params []byte) ([]byte, error) {
	e := &entry{kind: ownRequest, backend: c.b, conn: c, wait: make(chan []byte, 1)}
	if dl, ok := ctx.Deadline(); ok {
		e.deadline = dl.UnixNano()
	}
	f.table.add(e)
	id := strconv.AppendUint(nil, e.id, 10)
	msg := codec.AppendRequest(nil, id, method, params)
	if err := c.conn.Send(ctx, msg); err != nil {
		f.table.take(e.id, stateFailed)
		return nil, err
	}
	select {
	case resp := <-e.wait:
		if resp == nil {
			return nil, errors.New("connection lost")
		}
		var m codec.Message
		if err := codec.Scan(resp, &m); err != nil {
			return nil, err
		}
		if m.Kind == codec.KindError {
			return nil, rpcErrorOf(m.Error)
		}
		return m.Result, nil
	case <-ctx.Done():
		f.table.take(e.id, stateExpired)
		return nil, ctx.Err()
	}
}

// instanceUp is called when an instance's shared session is (re)established: the
// backend's lists are fetched (again) and subscriptions restored.
func (f *Fleet) instanceUp(in *instance, c *upConn) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.refresh(in.b, c)
		f.subs.restore(in.b, c)
	}()
}

// sessionRenewed: the backend restarted and the upstream session was re-established;
// what it kept per session (subscriptions) must be restored.
func (f *Fleet) sessionRenewed(c *upConn) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.subs.restore(c.b, c)
		f.refresh(c.b, c)
	}()
}

// refresh re-reads a backend's lists and swaps in a new catalog; clients hear of it
// when the exposed lists changed.
func (f *Fleet) refresh(b *backend, c *upConn) {
	ctx, cancel := context.WithTimeout(f.ctx, b.cfg.Timeout)
	defer cancel()
	lists, err := f.fetchLists(ctx, c)
	if err != nil {
		f.log.Warn("cannot read backend catalog", "backend", b.cfg.Name, "err", err)
		if b.lists.Load() != nil {
			return
		}
	}
	f.Stats.Refreshes.Add(1)
	old := b.setLists(&lists)
	f.buildM.Lock()
	f.cat.Store(f.build(f.gen.Add(1)))
	f.buildM.Unlock()
	if old == nil {
		return
	}
	for k := kind(0); k < numKinds; k++ {
		if !sameItems(old[k], lists[k]) {
			f.broadcast(kindInfo[k].changed)
		}
	}
}

func sameItems(a, b []item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || string(a[i].raw) != string(b[i].raw) {
			return false
		}
	}
	return true
}

// broadcast sends a notification to every client session.
func (f *Fleet) broadcast(method string) {
	msg := codec.AppendNotification(nil, method, nil)
	f.sessMu.Lock()
	list := make([]*router.Session, 0, len(f.sessions))
	for s := range f.sessions {
		list = append(list, s)
	}
	f.sessMu.Unlock()
	for _, s := range list {
		if t := s.Transport(); t != nil {
			t.SendNotice(msg)
		}
	}
}

// connLost fails every request in flight on c: their answers will not come.
func (f *Fleet) connLost(c *upConn, cause error) {
	msg := "backend " + c.b.cfg.Name + " connection lost"
	if cause != nil {
		msg += ": " + cause.Error()
	}
	for _, e := range f.table.takeConn(c, nil) {
		f.completeErrTaken(e, CodeBackendUnavailable, msg)
	}
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
	f.dropServerRequests(s)
	if st != nil {
		st.closeAll()
	}
}

// state returns the fleet's state of an open session (SessionOpened), nil once it ended:
// nothing may be opened for a session that is gone.
func (f *Fleet) state(s *router.Session) *sessionState {
	f.sessMu.Lock()
	defer f.sessMu.Unlock()
	return f.sessions[s]
}

// closeAll closes the session's upstream sessions (in the background: a child takes a
// moment to stop), each giving its slot back once closed.
func (st *sessionState) closeAll() {
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
		go c.closeUpstream()
	}
}

// AppendCapabilities implements router.Fleet: the union of what the backends offer.
func (f *Fleet) AppendCapabilities(dst []byte, version string) []byte {
	var tools, prompts, resources, subscribe, completions bool
	for _, b := range f.backends {
		b.mu.Lock()
		caps := b.caps
		b.mu.Unlock()
		tools = tools || hasMember(caps, "tools")
		prompts = prompts || hasMember(caps, "prompts")
		resources = resources || hasMember(caps, "resources")
		completions = completions || hasMember(caps, "completions")
		if hasMember(caps, "resources") {
			if n, err := sonicGetBool(caps, "resources", "subscribe"); err == nil && n {
				subscribe = true
			}
		}
	}
	if tools {
		dst = append(dst, `,"tools":{"listChanged":true}`...)
	}
	if prompts {
		dst = append(dst, `,"prompts":{"listChanged":true}`...)
	}
	if resources {
		dst = append(dst, `,"resources":{"listChanged":true`...)
		if subscribe {
			dst = append(dst, `,"subscribe":true`...)
		}
		dst = append(dst, '}')
	}
	if completions {
		dst = append(dst, `,"completions":{}`...)
	}
	return dst
}

// SetLogLevel implements router.Fleet: the level goes to every backend the session uses.
// On shared upstream sessions it applies to every client of that session: the last
// setLevel wins, which is what a shared session can offer.
func (f *Fleet) SetLogLevel(s *router.Session, level string) {
	params := append([]byte(`{"level":`), '"')
	params = append(params, level...)
	params = append(params, `"}`...)
	for _, b := range f.backends {
		b.mu.Lock()
		logging := hasMember(b.caps, "logging")
		b.mu.Unlock()
		if !logging {
			continue
		}
		for _, in := range b.instances {
			c := in.conn.Load()
			if b.cfg.PerClient {
				c = f.state(s).conn(in)
			}
			if c == nil || c.dead() {
				continue
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				ctx, cancel := context.WithTimeout(f.ctx, b.cfg.Timeout)
				defer cancel()
				if _, err := f.call(ctx, c, "logging/setLevel", params); err != nil {
					f.log.Debug("logging/setLevel not accepted", "backend", b.cfg.Name, "err", err)
				}
			}()
		}
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

// announceChange tells the other router instances that a backend's lists changed, so
// that instances without their own session to it (or that missed the notification)
// refresh too. Each instance tells its clients once: a refresh that finds nothing new
// says nothing.
func (f *Fleet) announceChange(b *backend) {
	if bus := f.cfg.Bus; bus != nil {
		bus.NC.Publish(bus.Subject("changed", backendToken(b.cfg.Name)), nil)
	}
}

// listenChanges refreshes a backend's catalog when another instance announces a change.
func (f *Fleet) listenChanges() {
	bus := f.cfg.Bus
	if bus == nil {
		return
	}
	byToken := map[string]*backend{}
	for _, b := range f.backends {
		byToken[backendToken(b.cfg.Name)] = b
	}
	sub, err := bus.NC.Subscribe(bus.Subject("changed", "*"), func(m *nats.Msg) {
		tok := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		b := byToken[tok]
		if b == nil {
			return
		}
		in := b.pick()
		if in == nil {
			return
		}
		c := in.conn.Load()
		if c == nil {
			return
		}
		f.wg.Add(1)
		go func() { defer f.wg.Done(); f.refresh(b, c) }()
	})
	if err != nil {
		f.log.Warn("cannot listen for catalog changes on NATS", "err", err)
		return
	}
	go func() { <-f.ctx.Done(); sub.Unsubscribe() }()
}

// backendToken is a backend name as one subject token.
func backendToken(name string) string { return hex.EncodeToString([]byte(name)) }

// SessionSubscriptions implements router.Fleet.
func (f *Fleet) SessionSubscriptions(s *router.Session) [][2]string {
	keys := f.subs.list(s)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, [2]string{k.b.cfg.Name, k.uri})
	}
	return out
}

// Resubscribe implements router.Fleet.
func (f *Fleet) Resubscribe(s *router.Session, subs [][2]string) {
	var keys []subKey
	for _, sub := range subs {
		for _, b := range f.backends {
			if b.cfg.Name == sub[0] {
				keys = append(keys, subKey{b: b, uri: sub[1]})
			}
		}
	}
	f.subs.resubscribe(s, keys)
}

// fanOut hands a resource update to each subscribed session's stream and records the
// delivery latency from received (when the router got it from the backend, unix ns).
func (f *Fleet) fanOut(list []*router.Session, msg []byte, received int64) {
	var obs interface{ FanOutDelivered(ns int64) }
	if o, ok := f.obs.(interface{ FanOutDelivered(ns int64) }); ok && received > 0 {
		obs = o
	}
	for _, sess := range list {
		if t := sess.Transport(); t != nil {
			t.SendNotice(msg)
			if obs != nil {
				obs.FanOutDelivered(time.Now().UnixNano() - received)
			}
		}
	}
	f.Stats.FanOut.Add(uint64(len(list)))
}

// SessionAdopted implements router.Fleet: a session that moved here gets a fresh
// notifications/resources/updated for each of its subscriptions, since an update may
// have been emitted while no instance held it.
func (f *Fleet) SessionAdopted(s *router.Session) {
	t := s.Transport()
	if t == nil {
		return
	}
	for _, k := range f.subs.list(s) {
		params := append([]byte(`{"uri":`), codec.AppendString(nil, k.uri)...)
		params = append(params, '}')
		t.SendNotice(codec.AppendNotification(nil, "notifications/resources/updated", params))
	}
}
