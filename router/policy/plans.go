package policy

import (
	"maps"
	"sync/atomic"
)

// The plans of a view are read on every decided request and written once per call
// key (the first call of a principal view to a tool on a backend, a URI...): a plain
// map under the view's RWMutex made every decision pay two atomic read-modify-writes
// for the lock. planMap is read without any: a read-only snapshot behind an atomic
// pointer, and the newer entries in a map under the view's lock, promoted to a new
// snapshot once they have cost as many lookups as the snapshot would copy (sync.Map's
// scheme before Go 1.24: amortised O(1) per store, however many keys).

// planned is a call's plan and, when its outcomes decide the call whatever the
// arguments (no rule up to the deciding one depends on them), the decision itself.
type planned struct {
	key   callKey // with strings of its own
	p     plan
	fixed bool
	d     Decision
}

// planOf plans in's call (see Engine.plan) and settles its decision when it can.
func (e *Engine) planOf(in *Input) *planned {
	pl := &planned{p: e.plan(in)}
	pl.d, pl.fixed = e.settle(pl.p)
	return pl
}

// settle is decide for a plan without unknown outcomes: false when some rule up to
// the deciding one must be evaluated at each call.
func (e *Engine) settle(p plan) (Decision, bool) {
	for i, o := range p {
		if o == isUnknown {
			return Decision{}, false
		}
		r := &e.c.rules[i]
		switch {
		case o != isTrue:
		case r.deny:
			return Decision{Reason: ReasonDeny, Rule: r.index, Name: r.name}, true
		default:
			return Decision{Allowed: true, Reason: ReasonAllow, Rule: r.index, Name: r.name}, true
		}
	}
	if e.c.hasAllow {
		return Decision{Reason: ReasonNoAllow, Rule: -1}, true
	}
	return Decision{Allowed: true, Reason: ReasonNoRules, Rule: -1}, true
}

// planMap is a view's plans by call key: load runs without a lock, the other methods
// under the view's write lock. The maps are keyed by the call's target alone (its tool,
// prompt or URI: one string to hash, not five), each holding the few plans of that
// target (by method and backend), told apart by their whole key.
type planMap struct {
	ro     atomic.Pointer[plansByTarget] // never modified once stored
	dirty  plansByTarget                 // ro's entries and newer ones; nil when ro has all
	misses int                           // lookups that ro failed since dirty was made
	n      int                           // plans in all
}

type plansByTarget map[string][]*planned

var noPlans = plansByTarget{}

func newPlanMap() *planMap {
	m := &planMap{}
	m.ro.Store(&noPlans)
	return m
}

// target is what the maps are keyed by.
func (k *callKey) target() string {
	switch {
	case k.tool != "":
		return k.tool
	case k.prompt != "":
		return k.prompt
	}
	return k.uri
}

// find is k's plan in m, nil if none.
func (m plansByTarget) find(k *callKey) *planned {
	for _, p := range m[k.target()] {
		if p.key == *k {
			return p
		}
	}
	return nil
}

// load finds k without a lock.
func (m *planMap) load(k *callKey) *planned {
	return m.ro.Load().find(k)
}

// lookupLocked finds k among the newer entries, counting the miss of the snapshot;
// enough misses promote the newer entries to the snapshot.
func (m *planMap) lookupLocked(k *callKey) *planned {
	if m.dirty == nil {
		return m.ro.Load().find(k)
	}
	p := m.dirty.find(k)
	if m.misses++; m.misses >= len(m.dirty) {
		d := m.dirty
		m.ro.Store(&d)
		m.dirty, m.misses = nil, 0
	}
	return p
}

// store adds p (absent) under its key. A target's list is copied, never appended to in
// place: the snapshot readers may hold it.
func (m *planMap) store(p *planned) {
	if m.dirty == nil {
		m.dirty = maps.Clone(*m.ro.Load())
	}
	t := p.key.target()
	list := m.dirty[t]
	m.dirty[t] = append(list[:len(list):len(list)], p)
	m.n++
}

// len is how many plans there are.
func (m *planMap) len() int { return m.n }

// clear drops every plan (an evicted view).
func (m *planMap) clear() {
	m.ro.Store(&noPlans)
	m.dirty, m.misses, m.n = nil, 0, 0
}
