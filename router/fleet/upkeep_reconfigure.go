package fleet

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Live reconfiguration: the set of backends changes while clients keep their sessions,
// streams and calls in flight. Reconfigure swaps in the new set at once (so that no new
// call is routed to a removed backend), starts the added backends' maintainers, tells
// clients of the lists that changed, and drains each removed backend in the background:
// its clients' calls in flight get their answers (bounded by its timeout), then its
// maintainers stop and its upstream sessions, shared and per client, close, failing
// the router's own requests still on them. A changed backend is a removal and an
// addition under one name.

// backendSet is the fleet's current backends, in configuration order: one immutable
// slice swapped whole by Reconfigure and read without a lock by every part (the
// catalog builds from it, health and metrics walk it).
type backendSet struct{ p atomic.Pointer[[]*backend] }

// all returns the current backends; the slice is never modified.
func (s *backendSet) all() []*backend {
	if p := s.p.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *backendSet) store(bs []*backend) { s.p.Store(&bs) }

// byToken finds the current backend whose name is tok as a subject token (bus.go).
func (s *backendSet) byToken(tok string) *backend {
	for _, b := range s.all() {
		if backendToken(b.cfg.Name) == tok {
			return b
		}
	}
	return nil
}

// reconfigurer is the part that changes the set of backends. It owns the backends'
// making (newBackend: each gets the Observer's index of its name, kept across
// removals, so that a backend replaced or added again under a known name is counted
// where it was), their start (start: one maintainer per instance), the swap of the set
// (reconfigure) and the retirement of what the swap removed (retire: drain, close,
// forget). It holds what those touch and nothing else: the set it swaps, the
// maintainers' upkeep, the catalog it rebuilds and announces, and for a retirement the
// table it drains, the forwarder that fails what is left, the sessions and
// subscriptions that let go of the backend.
//
// Who calls it: the Fleet alone. New makes the first backends before anything runs,
// Start starts them, Reconfigure delegates to reconfigure on the app's reload
// goroutine (a SIGHUP or a watched file), one at a time (mu), and BackendName may ask
// from any goroutine, without a lock (names): the metrics' scrape and the audit
// observer (on every call) ask while a Reconfigure may hold mu for seconds, waiting
// for a replacement to list its tools. The retirements run on goroutines of the
// fleet's lifecycle, one per retired backend, so Close ends and waits for them.
type reconfigurer struct {
	set      *backendSet
	keep     *upkeep // what every backend's maintainers share
	life     *lifecycle
	log      *slog.Logger
	table    *table
	catalog  *catalogBuilder
	fwd      *forwarder
	sessions *sessions
	subs     subscriber

	mu sync.Mutex // one reconfiguration at a time
	// names is every backend name seen, at the Observer's index it was given: read
	// without a lock, written only by newBackend (under mu, or before anything runs),
	// which stores a new slice and never changes one it stored.
	names atomic.Pointer[[]string]
}

// newBackend builds b from its configuration, not yet started. New calls it before
// anything runs, reconfigure under mu.
func (rc *reconfigurer) newBackend(bc BackendConfig) *backend {
	b := &backend{keep: rc.keep, cfg: bc, index: rc.indexOf(bc.Name), sem: make(chan struct{}, bc.MaxConcurrency), listed: make(chan struct{})}
	b.ctx, b.stop = context.WithCancel(rc.life.ctx)
	for n, d := range bc.Dialers {
		b.instances = append(b.instances, &instance{b: b, n: n, dialer: d})
	}
	return b
}

// BackendName names the backend an Observer's index stands for, whether the router
// started with it or a Reconfigure added it (and even once removed: its figures keep
// their name); "" for an index never given.
func (f *Fleet) BackendName(i int) string { return f.reconf.backendName(i) }

func (rc *reconfigurer) backendName(i int) string {
	if names := rc.seen(); i >= 0 && i < len(names) {
		return names[i]
	}
	return ""
}

// seen returns every backend name seen, by Observer index; the slice is never modified.
func (rc *reconfigurer) seen() []string {
	if p := rc.names.Load(); p != nil {
		return *p
	}
	return nil
}

// indexOf returns the Observer's index of the backend called name, giving it the next
// one if the name is new (copy on write: a reader keeps the slice it loaded). It is
// newBackend's: the one writer at a time.
func (rc *reconfigurer) indexOf(name string) int {
	names := rc.seen()
	if i := slices.Index(names, name); i >= 0 {
		return i
	}
	next := append(slices.Clip(names), name)
	rc.names.Store(&next)
	return len(names)
}

// start starts the maintainer of each of b's instances: they connect it and keep it
// connected and checked until b stops or the fleet closes.
func (rc *reconfigurer) start(b *backend) {
	for _, in := range b.instances {
		b.running.Add(1)
		rc.life.spawn(func() {
			defer b.running.Done()
			in.maintain(b.ctx)
		})
	}
}

// Reconfiguration says what Reconfigure did, by backend name.
type Reconfiguration struct {
	Added, Removed, Replaced, Kept []string
	// Drained is closed once every removed or replaced backend has drained its calls
	// and closed its upstream sessions.
	Drained <-chan struct{}
}

// Changed reports whether the set of backends changed at all.
func (r Reconfiguration) Changed() bool {
	return len(r.Added)+len(r.Removed)+len(r.Replaced) > 0
}

// errRemoved fails what a removed backend still had in flight past its drain.
var errRemoved = errors.New("backend removed from the configuration")

// replaceWait bounds how long Reconfigure waits for a changed backend's replacement to
// list its tools before it takes the old one's place anyway.
const replaceWait = 10 * time.Second

// Reconfigure makes the fleet serve cfgs (validated, defaults applied, names unique)
// instead of its current backends; call it after Start. A backend whose name and Digest
// are unchanged is kept as it is (sessions, subscriptions, calls untouched), at its new
// position; a new name is added; a name gone is removed; a name whose Digest changed
// is replaced: its replacement is started first and takes its place once it listed its
// tools (or after replaceWait, or its timeout if shorter), so that its names never stop
// being served; then the old one drains like a removed one. Clients hear list_changed
// for the lists that removed backends had items in and that replacements changed, and
// for those of added backends once their first lists are read (sessions whose view a
// policy filters hear only of changes they can see: notices.broadcast). Reconfigure
// waits for replacements, not for drains: the result's Drained says when those are
// over.
func (f *Fleet) Reconfigure(cfgs []BackendConfig) Reconfiguration { return f.reconf.reconfigure(cfgs) }

// change is one reconfiguration's plan: the next set in configuration order, and the
// backends it adds, removes and replaces (olds[i] by news[i]).
type change struct {
	r                 Reconfiguration
	next, added, gone []*backend
	olds, news        []*backend
}

// retiring is what ch takes out of service: the removed backends and the replaced ones.
func (ch *change) retiring() []*backend { return append(slices.Clip(ch.gone), ch.olds...) }

// reconfigure implements Fleet.Reconfigure.
func (rc *reconfigurer) reconfigure(cfgs []BackendConfig) Reconfiguration {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ch := rc.plan(cfgs)
	rc.swap(ch)
	ch.r.Drained = rc.retireAll(ch.retiring())
	return ch.r
}

// plan sorts cfgs against the current set: kept backends as they are, new ones built
// (not started; an added one marked late).
func (rc *reconfigurer) plan(cfgs []BackendConfig) *change {
	ch := &change{}
	current := map[string]*backend{}
	for _, b := range rc.set.all() {
		current[b.cfg.Name] = b
	}
	for _, bc := range cfgs {
		old := current[bc.Name]
		if old != nil && old.cfg.Digest == bc.Digest && bc.Digest != "" {
			delete(current, bc.Name)
			ch.next = append(ch.next, old)
			ch.r.Kept = append(ch.r.Kept, bc.Name)
			continue
		}
		bc.defaults()
		b := rc.newBackend(bc)
		ch.next = append(ch.next, b)
		if old != nil {
			delete(current, bc.Name)
			ch.olds, ch.news = append(ch.olds, old), append(ch.news, b)
			ch.r.Replaced = append(ch.r.Replaced, bc.Name)
		} else {
			b.late.Store(true)
			ch.added = append(ch.added, b)
			ch.r.Added = append(ch.r.Added, bc.Name)
		}
	}
	for _, b := range rc.set.all() {
		if current[b.cfg.Name] == b {
			ch.gone = append(ch.gone, b)
			ch.r.Removed = append(ch.r.Removed, b.cfg.Name)
		}
	}
	return ch
}

// swap puts ch's next set in place: replacements connect and list their tools while
// the old ones still serve, then the removed and replaced backends are marked retired,
// the set and the catalog swapped, clients told of the lists that changed, and the
// added backends started.
func (rc *reconfigurer) swap(ch *change) {
	for _, b := range ch.news {
		rc.start(b)
	}
	for _, b := range ch.news {
		rc.awaitListed(b)
		// Its lists are told below if it has them by then, else when it gets them.
		b.late.Store(true)
	}
	var told [numKinds]bool
	for _, b := range ch.gone {
		told = b.listsDiffer(nil, told)
	}
	for i, old := range ch.olds {
		told = old.listsDiffer(ch.news[i], told)
	}
	for _, b := range ch.retiring() {
		b.retired.Store(true)
	}
	rc.set.store(ch.next)
	rc.catalog.rebuild()
	rc.catalog.announce(told)
	for _, b := range ch.added {
		rc.start(b)
	}
}

// retireAll retires each of gone on a goroutine of its own and returns a channel
// closed once all are retired.
func (rc *reconfigurer) retireAll(gone []*backend) <-chan struct{} {
	drained := make(chan struct{})
	rc.life.spawn(func() {
		var wg sync.WaitGroup
		for _, b := range gone {
			wg.Add(1)
			rc.life.spawn(func() { defer wg.Done(); rc.retire(b) })
		}
		wg.Wait()
		close(drained)
	})
	return drained
}

// awaitListed waits until b listed its items, for at most replaceWait (or its timeout
// if shorter).
func (rc *reconfigurer) awaitListed(b *backend) {
	wait := time.NewTimer(min(replaceWait, b.cfg.Timeout))
	defer wait.Stop()
	select {
	case <-b.listed:
	case <-wait.C:
	case <-rc.life.ctx.Done():
	}
}

// listsDiffer marks in told the lists whose items differ between b and its
// replacement (nil: none), and returns it.
func (b *backend) listsDiffer(by *backend, told [numKinds]bool) [numKinds]bool {
	var was, now [numKinds][]item
	if l := b.lists.Load(); l != nil {
		was = *l
	}
	if by != nil {
		if l := by.lists.Load(); l != nil {
			now = *l
		}
	}
	for k := kind(0); k < numKinds; k++ {
		if !sameItems(was[k], now[k]) {
			told[k] = true
		}
	}
	return told
}

// announce tells clients of every list marked in told, once per notification.
func (cb *catalogBuilder) announce(told [numKinds]bool) {
	sent := map[string]bool{}
	for k := kind(0); k < numKinds; k++ {
		if m := kindInfo[k].changed; told[k] && !sent[m] {
			sent[m] = true
			cb.changed(m)
			cb.listeners.changed(m)
		}
	}
}

// drainGrace is how long past its timeout (the longest any of its calls may run) a
// retired backend's drain waits for its clients' calls.
const drainGrace = time.Second

// retire drains a removed backend and closes it: it waits (up to its timeout plus
// drainGrace, or the fleet's close) for its clients' calls in flight to finish, stops
// its maintainers, closes its shared and per-client upstream sessions and fails
// whatever was still in flight on them (the router's own requests among them: its
// listen streams, pings, list fetches), and hands its clients' resource subscriptions
// on to its replacement where it serves their URIs (or drops them).
func (rc *reconfigurer) retire(b *backend) {
	rc.drain(b)
	b.stop()
	b.running.Wait()
	for _, in := range b.instances {
		in.healthy.Store(false)
		if c := in.conn.Swap(nil); c != nil {
			c.killed.Store(true)
			c.conn.Close()
			rc.fwd.connLost(c, errRemoved)
		}
	}
	for _, c := range rc.sessions.dropBackend(b) {
		c.closeUpstream()
		rc.fwd.connLost(c, errRemoved)
	}
	rc.subs.moveBackend(b, func(uri string) *backend { return rc.subsOwner(b, uri) })
	rc.catalog.forget(b)
	rc.log.Info("backend removed: drained and closed", "backend", b.cfg.Name)
}

// drain waits until no client's request to b is in the in-flight table (clientsOn),
// its timeout plus drainGrace passed, or the fleet closes. It wakes when one of them
// leaves the table (the table pokes b.drained), never by polling. The router's own
// requests are not waited for: nobody waits for their answers once b is gone, and a
// 2026-07-28 backend's listen stream never ends by itself, so waiting for it would
// hold every such removal for the whole deadline.
func (rc *reconfigurer) drain(b *backend) {
	ctx, cancel := context.WithTimeout(rc.life.ctx, b.cfg.Timeout+drainGrace)
	defer cancel()
	b.drained.wait(ctx, func() int { return rc.table.clientsOn(b) })
}

// clientsOn counts the clients' requests to b in the table: routed (forward is sending
// them), sent, and parked for a 2026-07-28 client's retry (mrtr.go). A parked call is
// waited for, unlike a shutdown's WaitIdle (Fleet.InFlight): the router still takes
// messages while it reconfigures, so its client's retry may come, and it finishes the
// call on the connection of b that the drain keeps open; closing that connection
// would lose the call. Its wait is bounded like the others' (its TTL, and the drain's
// deadline). It walks the table: a drain's count, made once per wake-up, never on a
// call's path.
func (t *table) clientsOn(b *backend) int {
	return t.count(func(e *entry) bool { return e.backend == b && e.kind == clientRequest })
}

// dropBackend takes every client session's per-client upstream sessions with b's
// instances out of their sessions and returns them for closing: those sessions lose
// only these, and open new ones with whatever replaced b on their next call.
func (ss *sessions) dropBackend(b *backend) []*upConn {
	var out []*upConn
	for _, st := range ss.all() {
		out = st.dropBackend(b, out)
	}
	return ss.dropScoped(b, out) // 2026 clients' (sessions_caps.go)
}

// forget drops what the builder kept of a removed backend.
func (cb *catalogBuilder) forget(b *backend) {
	cb.refreshing.Delete(b)
	for k := kind(0); k < numKinds; k++ {
		cb.caches.Delete(listKey{b, k})
	}
}
