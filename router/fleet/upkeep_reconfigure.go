package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Live reconfiguration: the set of backends changes while clients keep their sessions,
// streams and calls in flight. Reconfigure swaps in the new set at once (so that no new
// call is routed to a removed backend), starts the added backends' maintainers, tells
// clients of the lists that changed, and drains each removed backend in the background:
// its calls in flight get their answers (bounded by its timeout), then its maintainers
// stop and its upstream sessions, shared and per client, close. A changed backend is a
// removal and an addition under one name.

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

// reconfigurer is Reconfigure's state: one reconfiguration at a time, and the
// Observer's index of every backend name seen, so that a backend replaced or added
// again under a known name is counted where it was. Who calls it: Reconfigure, on the
// app's reload goroutine (a SIGHUP or a watched file); the backends it retires drain on
// goroutines of the fleet's lifecycle.
type reconfigurer struct {
	mu      sync.Mutex
	indexes map[string]int
}

// newBackend builds b from its configuration, not yet started. New calls it before
// anything runs, Reconfigure under reconf.mu.
func (f *Fleet) newBackend(bc BackendConfig) *backend {
	if f.reconf.indexes == nil {
		f.reconf.indexes = map[string]int{}
	}
	idx, ok := f.reconf.indexes[bc.Name]
	if !ok {
		idx = len(f.reconf.indexes)
		f.reconf.indexes[bc.Name] = idx
	}
	b := &backend{keep: f.keep, cfg: bc, index: idx, sem: make(chan struct{}, bc.MaxConcurrency), listed: make(chan struct{})}
	b.ctx, b.stop = context.WithCancel(f.life.ctx)
	for n, d := range bc.Dialers {
		b.instances = append(b.instances, &instance{b: b, n: n, dialer: d})
	}
	return b
}

// BackendName names the backend an Observer's index stands for, whether the router
// started with it or a Reconfigure added it (and even once removed: its figures keep
// their name); "" for an index never given.
func (f *Fleet) BackendName(i int) string {
	f.reconf.mu.Lock()
	defer f.reconf.mu.Unlock()
	for name, idx := range f.reconf.indexes {
		if idx == i {
			return name
		}
	}
	return ""
}

// startBackend starts the maintainer of each of b's instances: they connect it and keep
// it connected and checked until b stops or the fleet closes.
func (f *Fleet) startBackend(b *backend) {
	for _, in := range b.instances {
		b.running.Add(1)
		f.life.spawn(func() {
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
func (f *Fleet) Reconfigure(cfgs []BackendConfig) Reconfiguration {
	f.reconf.mu.Lock()
	defer f.reconf.mu.Unlock()
	var r Reconfiguration
	current := map[string]*backend{}
	for _, b := range f.set.all() {
		current[b.cfg.Name] = b
	}
	var next, added, gone, olds, news []*backend
	for _, bc := range cfgs {
		old := current[bc.Name]
		if old != nil && old.cfg.Digest == bc.Digest && bc.Digest != "" {
			delete(current, bc.Name)
			next = append(next, old)
			r.Kept = append(r.Kept, bc.Name)
			continue
		}
		bc.defaults()
		b := f.newBackend(bc)
		next = append(next, b)
		if old != nil {
			delete(current, bc.Name)
			olds, news = append(olds, old), append(news, b)
			r.Replaced = append(r.Replaced, bc.Name)
		} else {
			b.late.Store(true)
			added = append(added, b)
			r.Added = append(r.Added, bc.Name)
		}
	}
	for _, b := range f.set.all() {
		if current[b.cfg.Name] == b {
			gone = append(gone, b)
			r.Removed = append(r.Removed, b.cfg.Name)
		}
	}
	// Replacements connect and list their tools while the old ones still serve.
	for _, b := range news {
		f.startBackend(b)
	}
	for _, b := range news {
		f.awaitListed(b)
		// Its lists are told below if it has them by then, else when it gets them.
		b.late.Store(true)
	}
	var told [numKinds]bool
	for _, b := range gone {
		told = b.listsDiffer(nil, told)
	}
	for i, old := range olds {
		told = old.listsDiffer(news[i], told)
	}
	gone = append(gone, olds...)
	for _, b := range gone {
		b.retired.Store(true)
	}
	f.set.store(next)
	f.catalog.rebuild()
	f.catalog.announce(told)
	for _, b := range added {
		f.startBackend(b)
	}
	drained := make(chan struct{})
	r.Drained = drained
	f.life.spawn(func() {
		var wg sync.WaitGroup
		for _, b := range gone {
			wg.Add(1)
			f.life.spawn(func() { defer wg.Done(); f.retire(b) })
		}
		wg.Wait()
		close(drained)
	})
	return r
}

// awaitListed waits until b listed its items, for at most replaceWait (or its timeout
// if shorter).
func (f *Fleet) awaitListed(b *backend) {
	wait := time.NewTimer(min(replaceWait, b.cfg.Timeout))
	defer wait.Stop()
	select {
	case <-b.listed:
	case <-wait.C:
	case <-f.life.ctx.Done():
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

// drainPoll is how often a removed backend's remaining calls are counted.
const drainPoll = 10 * time.Millisecond

// retire drains a removed backend and closes it: it waits (up to its timeout, the
// longest any of its calls may run) for its calls in flight to finish, stops its
// maintainers, closes its shared and per-client upstream sessions and fails whatever
// was still in flight on them, and hands its clients' resource subscriptions on to its
// replacement where it serves their URIs (or drops them).
func (f *Fleet) retire(b *backend) {
	deadline := time.Now().Add(b.cfg.Timeout + time.Second)
	t := time.NewTicker(drainPoll)
	for f.table.onBackend(b) > 0 && time.Now().Before(deadline) {
		select {
		case <-t.C:
		case <-f.life.ctx.Done():
		}
		if f.life.ended() {
			break
		}
	}
	t.Stop()
	b.stop()
	b.running.Wait()
	for _, in := range b.instances {
		in.healthy.Store(false)
		if c := in.conn.Swap(nil); c != nil {
			c.killed.Store(true)
			c.conn.Close()
			f.fwd.connLost(c, errRemoved)
		}
	}
	for _, c := range f.sessions.dropBackend(b) {
		c.closeUpstream()
		f.fwd.connLost(c, errRemoved)
	}
	f.subs.moveBackend(b, func(uri string) *backend { return f.subsOwner(b, uri) })
	f.catalog.forget(b)
	f.log.Info("backend removed: drained and closed", "backend", b.cfg.Name)
}

// onBackend counts the entries in flight (routed or sent) to b.
func (t *table) onBackend(b *backend) int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			if e.backend == b {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
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
