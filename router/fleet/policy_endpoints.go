package fleet

import (
	"log/slog"
	"maps"
	"sync"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/router/policy"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// The engines in force, and their replacement at run time. The router's main endpoint
// has one engine, each virtual server one of its own (its rules, limits and selection,
// policy.Scope); a request is decided by the engine of its principal's endpoint
// (auth.Principal.Endpoint). The set is swapped whole, atomically: a request decides
// with the set it loaded, and a policy reload (SetPolicy, SetEndpointPolicy) then tells
// each session whose view of a list changed, and no other, that the list changed.

// engines is one immutable set of engines.
type engines struct {
	main *policy.Engine            // nil: everything allowed
	by   map[string]*policy.Engine // by endpoint name
}

// engineFor returns the engine that decides for pr: its endpoint's, or for an endpoint
// no longer configured, one that denies everything (its sessions may outlive it).
func (es *engines) engineFor(pr *auth.Principal) *policy.Engine {
	if pr == nil || pr.Endpoint == "" {
		return es.main
	}
	if e, ok := es.by[pr.Endpoint]; ok {
		return e
	}
	return closedEngine()
}

// filtering reports whether some engine filters lists.
func (es *engines) filtering() bool {
	if es.main != nil && es.main.Filtering() {
		return true
	}
	for _, e := range es.by {
		if e.Filtering() {
			return true
		}
	}
	return false
}

// quiet is the logger of the fleet's own engines, which log nothing worth reading.
var quiet = slog.New(slog.DiscardHandler)

// closedEngine denies every decided request: the engine of an endpoint that is gone.
var closedEngine = sync.OnceValue(func() *policy.Engine {
	e, err := policy.New(policy.Config{Rules: []policy.Rule{{Name: "endpoint-removed", Deny: "true"}}}, policy.Options{Logger: quiet})
	if err != nil {
		panic(err) // a constant policy
	}
	return e
})

// openEngine allows everything: the view of a list without a policy.
var openEngine = sync.OnceValue(func() *policy.Engine {
	e, err := policy.New(policy.Config{}, policy.Options{Logger: quiet})
	if err != nil {
		panic(err)
	}
	return e
})

// SetEndpointPolicy makes the fleet decide and filter with e the requests of the
// virtual server name (principals whose Endpoint is name). Like SetPolicy, the first
// call must come before Start; later ones swap the engine at run time.
func (f *Fleet) SetEndpointPolicy(name string, e *policy.Engine) {
	f.setEngines(func(es *engines) {
		es.by = maps.Clone(es.by)
		if es.by == nil {
			es.by = map[string]*policy.Engine{}
		}
		if e == nil {
			delete(es.by, name)
		} else {
			es.by[name] = e
		}
	})
}

// PolicyFor returns the engine that decides pr's requests (nil: none).
func (f *Fleet) PolicyFor(pr *auth.Principal) *policy.Engine {
	if f.routes.pol == nil {
		return nil
	}
	es := f.routes.pol.eng.Load()
	if es == nil {
		return nil
	}
	return es.engineFor(pr)
}

// setEngines installs a copy of the current set changed by edit, then sends each
// session whose view changed the list_changed of the lists that changed for it.
func (f *Fleet) setEngines(edit func(*engines)) {
	if f.routes.pol == nil {
		f.routes.pol = &policer{}
		f.notices.pol = f.routes.pol
	}
	p := f.routes.pol
	p.mu.Lock() // one reload at a time: each compares with the set before it
	defer p.mu.Unlock()
	var next engines
	prev := p.eng.Load()
	if prev != nil {
		next = *prev
	} else {
		prev = &engines{}
	}
	edit(&next)
	p.eng.Store(&next)
	p.notifyViews(f.catalog.load(), f.sessions.all(), f.catalog.listeners.all(), prev, &next)
}

// notifyViews sends, to each session and each listen stream whose view of cat's lists
// differs between the engine sets prev and next, the list_changed of each list that
// differs (once for resources and templates, which share one); a listen stream gets
// only those it asked for.
func (p *policer) notifyViews(cat *catalog, all []*sessionState, listens []*clientListener, prev, next *engines) {
	if cat == nil {
		return
	}
	pi := p.itemsOf(cat)
	type key struct {
		sub       *policy.Subject
		old, next *policy.Engine
	}
	verdicts := map[key][numKinds]bool{}
	// each calls send with the list_changed of each list whose view by principal pr
	// changed, once per notification method.
	each := func(pr *auth.Principal, send func(method string)) {
		k := key{p.subjectOf(pr), prev.engineFor(pr), next.engineFor(pr)}
		if k.old == k.next {
			return
		}
		changed, ok := verdicts[k]
		if !ok {
			for kd := kind(0); kd < numKinds; kd++ {
				changed[kd] = digest(k.old, k.sub, pi.items[kd]) != digest(k.next, k.sub, pi.items[kd])
			}
			verdicts[k] = changed
		}
		sent := map[string]bool{}
		for kd := kind(0); kd < numKinds; kd++ {
			if m := kindInfo[kd].changed; changed[kd] && !sent[m] {
				sent[m] = true
				send(m)
			}
		}
	}
	for _, st := range all {
		if t := st.sess.TransportSession(); t != nil {
			each(st.sess.Principal(), func(m string) { t.SendNotice(codec.AppendNotification(nil, m, nil)) })
		}
	}
	for _, l := range listens {
		each(l.sess.Principal(), func(m string) {
			if l.wants(m) {
				l.notify(m)
			}
		})
	}
}

// digest is e's digest of what sub sees of items; a nil e shows everything.
func digest(e *policy.Engine, sub *policy.Subject, items []policy.Item) uint64 {
	if e == nil {
		e = openEngine()
	}
	return e.Digest(sub, items)
}

// privateCache makes c private when a policy filters lists: a filtered result is one
// principal's view and must not be shared across authorization contexts (2026-07-28
// caching: cacheScope private).
func (p *policer) privateCache(c modern.Cache) modern.Cache {
	if p == nil {
		return c
	}
	if es := p.eng.Load(); es != nil && es.filtering() {
		c.Scope = modern.ScopePrivate
	}
	return c
}

// Policies returns the engines in force, the main endpoint's first (when it has one),
// then the virtual servers' in no particular order: for the counters an exporter sums.
func (f *Fleet) Policies() []*policy.Engine {
	if f.routes.pol == nil {
		return nil
	}
	es := f.routes.pol.eng.Load()
	if es == nil {
		return nil
	}
	var out []*policy.Engine
	if es.main != nil {
		out = append(out, es.main)
	}
	for _, e := range es.by {
		out = append(out, e)
	}
	return out
}
