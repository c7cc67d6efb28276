package fleet

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
)

// The facade: Fleet implements router.Fleet, builds the parts and wires them (New),
// starts the goroutines that keep them running (one maintainer per instance, the
// sweeper, the bus listener) and stops them (Close). It owns no state of its own beyond
// the parts; the router calls it from its dispatcher's workers (Prepare in a session's
// order, Run on any worker), backends' events reach it on their connections' goroutines
// (connEvents), and it hands each to the part that owns what it concerns.

// Fleet implements router.Fleet over the configured backends.
type Fleet struct {
	log  *slog.Logger
	life *lifecycle // the context and goroutines Close ends

	set       *backendSet     // the backends, each with its instances and their shared sessions
	reconf    *reconfigurer   // adds, replaces and retires backends (upkeep_reconfigure.go)
	conns     *connector      // opens upstream sessions
	table     *table          // the in-flight table
	catalog   *catalogBuilder // the merged lists
	routes    *routing        // Prepare: answers from the catalog, routes
	listening *listening      // subscriptions/listen streams (listen_client.go)
	fwd       *forwarder      // Run: sends, completes forwarded requests
	sessions  *sessions       // client sessions and their own upstream sessions
	srv       *serverRequests // backends' requests to clients
	notices   *notices        // notifications both ways
	bus       *changeBus      // list changes across router instances
	subs      subscriber      // resources/subscribe
	rep       reporter        // finished requests to the Observer (SetObserver)

	Stats Stats
}

// Stats counts what the fleet did.
type Stats struct {
	Forwarded atomic.Uint64
	Failed    atomic.Uint64
	TimedOut  atomic.Uint64
	Cancelled atomic.Uint64
	Refreshes atomic.Uint64
	// Failovers counts requests sent again to another replica: ones an instance refused,
	// and safe-to-repeat ones whose connection closed before any answer (forward_retry.go).
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
	// Unmatched counts responses from backends that matched no request in flight (an
	// id never sent, a second answer, an answer after its request timed out or was
	// cancelled): dropped, nobody is answered twice.
	Unmatched atomic.Uint64
}

// New builds a fleet and wires its parts; Start connects it. Each part gets the
// others it needs as fields of their own types; the Fleet keeps them all to start,
// stop and answer for them.
func New(cfg Config) *Fleet {
	cfg.defaults()
	f := &Fleet{log: cfg.Logger, life: newLifecycle(), table: newTable(), set: new(backendSet)}
	f.table.signalDrains(&f.life.drained)
	keep := &upkeep{table: f.table, log: f.log, interval: cfg.HealthInterval, timeout: cfg.HealthTimeout}
	f.reconf = &reconfigurer{set: f.set, keep: keep, life: f.life, log: f.log, table: f.table}
	var bs []*backend
	for _, bc := range cfg.Backends {
		bs = append(bs, f.reconf.newBackend(bc))
	}
	f.set.store(bs)
	f.conns = &connector{table: f.table, events: f, log: f.log, name: cfg.ClientName, version: cfg.ClientVersion,
		info: modern.AppendImplementation(nil, cfg.ClientName, cfg.ClientVersion), probe: 2 * cfg.HealthTimeout}
	keep.conns = f.conns
	f.sessions = newSessions(f.life, f.conns, &f.Stats, cfg.MaxUpstreamSessions, cfg.UpstreamSessionWait)
	f.fwd = &forwarder{life: f.life, table: f.table, sessions: f.sessions, rep: &f.rep, stats: &f.Stats}
	keep.lost, keep.up = f.fwd.connLost, f.instanceUp
	f.srv = newServerRequests(f.life, f.table, f.log, &f.Stats, cfg.MaxServerRequests, cfg.ServerRequestTimeout)
	n := &notices{life: f.life, table: f.table, sessions: f.sessions, srv: f.srv, fwd: f.fwd, rep: &f.rep, stats: &f.Stats}
	f.notices = n
	f.catalog = newCatalogBuilder(f.life, f.table, f.log, &f.Stats, f.set, n.broadcast)
	f.fwd.catalog = f.catalog // whether a tool may run twice (forward_retry.go)
	f.bus = &changeBus{bus: cfg.Bus, life: f.life, log: f.log, set: f.set, catalog: f.catalog}
	n.catalog, n.bus = f.catalog, f.bus
	up := &subsUpstream{life: f.life, table: f.table, log: f.log, rep: &f.rep, max: cfg.MaxSubscriptions, fanOut: n.fanOut}
	keep.failover = up.failover
	if cfg.Bus != nil && cfg.Bus.JS != nil {
		cs, err := newClusterSubs(up, cfg.Bus)
		if err != nil {
			f.log.Warn("cluster subscriptions unavailable, keeping them per instance", "err", err)
			f.subs = newLocalSubs(up)
		} else {
			f.subs = cs
		}
	} else {
		f.subs = newLocalSubs(up)
	}
	n.subs, up.restore = f.subs, f.subs.restore
	f.reconf.catalog, f.reconf.fwd, f.reconf.sessions, f.reconf.subs = f.catalog, f.fwd, f.sessions, f.subs
	f.srv.park = newParking(f.srv, f.fwd, cfg.StateKey)
	f.fwd.park = f.srv.park
	f.srv.park.relay = newOwnerRelay(cfg.Bus, f.srv.park.instance, f.life, f.log, &f.rep, f.longestTimeout)
	f.fwd.rev = newReversals(f.fwd, f.srv)
	f.routes = &routing{catalog: f.catalog, fwd: f.fwd, subs: f.subs, rep: &f.rep, pageSize: cfg.PageSize, park: f.srv.park}
	f.listening = &listening{streams: &f.catalog.listeners, catalog: f.catalog, set: f.set, subs: f.subs, sessions: f.sessions,
		routes: f.routes, rep: &f.rep, life: f.life, log: f.log}
	f.sessions.endListeners = f.listening.endAllWith
	return f
}

// Start connects every instance in the background and keeps them connected and checked
// until Close. It waits up to wait for the first catalog of every backend, so that a
// router that starts answering knows its tools.
func (f *Fleet) Start(wait time.Duration) {
	for _, b := range f.set.all() {
		f.reconf.start(b)
	}
	f.life.spawn(f.fwd.sweep)
	f.bus.listen()
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for _, b := range f.set.all() {
		select {
		case <-b.listed:
		case <-timeout.C:
			return
		}
	}
}

// Close stops the maintainers and closes every upstream session.
func (f *Fleet) Close() {
	f.life.stop()
	f.subs.close()
	for _, b := range f.set.all() {
		for _, in := range b.instances {
			if c := in.conn.Load(); c != nil {
				c.conn.Close()
			}
		}
	}
	// Per-client upstream sessions close together; Close returns once they are closed.
	f.sessions.closeAll()
	// Whatever was sent and is still in flight gets an answer (a routed request's
	// forward fails its send on the closed context and answers it).
	for _, e := range f.table.takeAll(nil) {
		f.fwd.completeErrTaken(e, codec.CodeBackendUnavailable, "router shutting down")
	}
}

// Ready reports whether every backend has at least one healthy instance.
func (f *Fleet) Ready() bool {
	for _, b := range f.set.all() {
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
	for _, b := range f.set.all() {
		h := 0
		for _, in := range b.instances {
			if in.usable() {
				h++
			}
		}
		fn(b.cfg.Name, h, len(b.instances))
	}
}

// SessionOpened implements router.Fleet.
func (f *Fleet) SessionOpened(s *router.Session) { f.sessions.open(s) }

// SessionClosed implements router.Fleet: each part forgets the session; its calls in
// flight are cancelled upstream and its backends' requests answered before its upstream
// sessions close. A session handed over by a shutdown keeps its calls: the shutdown
// drains them.
func (f *Fleet) SessionClosed(s *router.Session) {
	if t := s.TransportSession(); t == nil || !t.HandedOver() {
		f.fwd.endSession(s)
	}
	f.subs.dropSession(s)
	f.srv.dropSession(s)
	f.sessions.end(s)
	f.conns.forget(s)
}

// SessionAdopted implements router.Fleet: a session that moved here gets what it may
// have missed of its subscriptions.
func (f *Fleet) SessionAdopted(s *router.Session) { f.notices.adopted(s) }

// UpstreamSessions is the number of per-client upstream sessions open (or opening).
func (f *Fleet) UpstreamSessions() int { return f.sessions.inUse() }

// InFlight is the number of requests waiting for a backend. Requests parked for a
// 2026-07-28 client's retry (mrtr.go) are left out: no client waits on them; retries
// sent to the instance that owns their state (mrtr_owner.go) count: their clients do.
func (f *Fleet) InFlight() int {
	return max(f.table.clients()-f.srv.park.count(), 0) + f.srv.park.relay.sent()
}

// WaitIdle waits until InFlight is 0, or ctx ends (false). The app's shutdown calls it
// once the router has stopped taking messages, for the requests whose answers come
// apart from their sends (stdio, legacy SSE backends); it wakes when the table or the
// owner relay says a count went down (drainSignal), never by polling.
func (f *Fleet) WaitIdle(ctx context.Context) bool { return f.life.drained.wait(ctx, f.InFlight) }

// instanceUp is called when an instance's shared session is (re)established:
// subscriptions are restored, then the backend's lists fetched (again). Restoring first
// means a published catalog has its subscriptions in place: a client that subscribes as
// soon as it sees the backend's resources is not subscribed a second time by a restore
// that ran after it (sessionRenewed keeps the same order).
func (f *Fleet) instanceUp(in *instance, c *upConn) {
	if c.listen != nil {
		f.life.spawn(func() { c.listen.run(in.b.ctx, func() { f.catalog.refresh(in.b, c) }) })
	}
	f.life.spawn(func() {
		f.subs.restore(in.b, c)
		f.catalog.refresh(in.b, c)
	})
}

// connLost implements connEvents: the forwarder fails what was in flight on c.
func (f *Fleet) connLost(c *upConn, cause error) { f.fwd.connLost(c, cause) }

// sessionRenewed: the backend restarted and the upstream session was re-established;
// what it kept per session (subscriptions) must be restored.
func (f *Fleet) sessionRenewed(c *upConn) {
	f.life.spawn(func() {
		f.subs.restore(c.b, c)
		f.sessions.restoreListens(c) // a principal's (listen_principal.go)
		f.catalog.refresh(c.b, c)
		// The restart may have brought another era: probe it (era.go).
		ctx, cancel := context.WithTimeout(f.life.ctx, c.b.keep.timeout)
		defer cancel()
		f.conns.recheck(ctx, c)
	})
}

// Prepare implements router.Fleet. It runs in the session's order: notifications go to
// notices, answers to backends' requests to serverRequests, requests to routing; the
// I/O happens in Run.
func (f *Fleet) Prepare(s *router.Session, x *transport.Exchange) bool {
	switch x.Msg.Kind {
	case codec.KindNotification:
		return f.notices.fromClient(s, x)
	case codec.KindResult, codec.KindError:
		return f.srv.fromClient(s, x)
	}
	return f.routes.request(s, x)
}

// Run implements router.Fleet: it sends the request to an instance of its backend.
func (f *Fleet) Run(s *router.Session, x *transport.Exchange) {
	switch t := x.Tag.(type) {
	case *entry:
		f.fwd.forward(t)
	case *serverRequest:
		f.srv.run(x, t)
	case *subTask:
		f.subs.run(x, t)
	}
}
