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
// again under a known name is counted where it was.
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

// Reconfigure makes the fleet serve cfgs (validated, defaults applied, names unique)
// instead of its current backends; call it after Start. A backend whose name and Digest
// are unchanged is kept as it is (sessions, subscriptions, calls untouched), at its new
// position; a new name is added; a name gone is removed; a name whose Digest changed
// is replaced (removed and added). Clients hear list_changed for the lists that the
// removed backends had items in at once, and for those of the added backends once
// their first lists are read (sessions whose view a policy filters hear only of
// changes they can see: notices.broadcast). Reconfigure does not wait for the drain:
// the result's Drained says when it is over.
func (f *Fleet) Reconfigure(cfgs []BackendConfig) Reconfiguration {
	f.reconf.mu.Lock()
	defer f.reconf.mu.Unlock()
	var r Reconfiguration
	current := map[string]*backend{}
	for _, b := range f.set.all() {
		current[b.cfg.Name] = b
	}
	var next, added, gone []*backend
	for _, bc := range cfgs {
		old := current[bc.Name]
		if old != nil && old.cfg.Digest == bc.Digest && bc.Digest != "" {
			delete(current, bc.Name)
			next = append(next, old)
			r.Kept = append(r.Kept, bc.Name)
			continue
		}
		if old != nil {
			delete(current, bc.Name)
			gone = append(gone, old)
			r.Replaced = append(r.Replaced, bc.Name)
		} else {
			r.Added = append(r.Added, bc.Name)
		}
		bc.defaults()
		b := f.newBackend(bc)
		b.late = true
		next = append(next, b)
		added = append(added, b)
	}
	for _, b := range f.set.all() {
		if current[b.cfg.Name] == b {
			gone = append(gone, b)
			r.Removed = append(r.Removed, b.cfg.Name)
		}
	}
	for _, b := range gone {
		b.retired.Store(true)
	}
	f.set.store(next)
	f.catalog.rebuild()
	f.catalog.announceGone(gone)
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

// announceGone tells clients of every list that the removed backends had items in.
func (cb *catalogBuilder) announceGone(gone []*backend) {
	var told [numKinds]bool
	for _, b := range gone {
		lists := b.lists.Load()
		if lists == nil {
			continue
		}
		for k := kind(0); k < numKinds; k++ {
			if len(lists[k]) > 0 {
				told[k] = true
			}
		}
	}
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
// was still in flight on them.
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
		st.mu.Lock()
		for in, c := range st.conns {
			if in.b == b {
				delete(st.conns, in)
				c.killed.Store(true)
				out = append(out, c)
			}
		}
		st.mu.Unlock()
	}
	return out
}

// forget drops what the builder kept of a removed backend.
func (cb *catalogBuilder) forget(b *backend) {
	cb.refreshing.Delete(b)
	for k := kind(0); k < numKinds; k++ {
		cb.caches.Delete(listKey{b, k})
	}
}
