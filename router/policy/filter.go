package policy

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// ItemKind is the kind of a catalog item.
type ItemKind uint8

const (
	ItemTool ItemKind = iota + 1
	ItemPrompt
	ItemResource
	ItemTemplate // a resource template: Name is the URI template
)

// Item is one entry of a merged list, as the client sees it.
type Item struct {
	Kind    ItemKind
	Name    string // the exposed tool or prompt name, the resource URI or the URI template
	Backend string
}

// input makes the Input of a call to it: tools/call, prompts/get, or resources/read.
// The arguments are unknown (and a template's URI: the client fills it in).
func (it *Item) input(in *Input) {
	*in = Input{Backend: it.Backend, unknown: useArgs}
	switch it.Kind {
	case ItemTool:
		in.Method, in.Tool = MethodToolsCall, it.Name
	case ItemPrompt:
		in.Method, in.Prompt = MethodPromptsGet, it.Name
	case ItemResource:
		in.Method, in.URI = MethodRead, it.Name
	default:
		in.Method, in.unknown = MethodRead, useArgs|useURI
	}
}

// Visible reports whether s sees it in a list: exactly when some call to it would be
// allowed. The arguments of that call are not known (nor the URI a template expands
// to), so the rules are evaluated partially (CEL's unknowns):
//
//   - a deny rule hides the item only when it matches whatever the arguments are
//     (mcp.tool == "x" hides x; mcp.tool == "x" && mcp.arguments.force does not: a
//     call without force may go through, and a call with it is denied when made);
//   - an allow rule shows it when it matches for some arguments (a rule whose result
//     depends on the arguments counts as matching).
//
// Hiding a tool that some call may use would make it unusable (clients call what they
// see); showing one no call may use is what the lists exist to avoid. So an item is
// hidden exactly when no call to it can be allowed as far as the rules' terms go (the
// one gap: an allow and a deny over the arguments that exclude each other, which CEL
// cannot see, show the item). An evaluation error hides the item (fail closed).
//
// Results are cached per principal view (Subject) and item; the cache lives as long as
// the Engine, so a policy reload starts afresh and a catalog change needs nothing (an
// item's visibility depends on the item alone).
func (e *Engine) Visible(s *Subject, it Item) bool {
	return e.View(s).Visible(it)
}

// View is a principal's list view, resolved once for a whole list (or digest): its
// Visible skips finding the principal's cache for each item. Valid as long as the
// Engine; use it on one goroutine.
type View struct {
	e *Engine
	s *Subject
	v *view // nil without rules
}

// View returns s's view.
func (e *Engine) View(s *Subject) View {
	if len(e.c.rules) == 0 && e.scope == nil {
		return View{e: e, s: s}
	}
	return View{e: e, s: s, v: e.views.get(s.view(e.c.uses))}
}

// Visible is Engine.Visible for the view's principal.
func (w View) Visible(it Item) bool {
	if w.v == nil {
		return true
	}
	e := w.e
	if vis, ok := w.v.lookup(it); ok {
		e.stats.viewHits.Add(1)
		return vis
	}
	e.stats.viewMisses.Add(1)
	var in Input
	it.input(&in)
	in.subj = w.s
	vis := e.visible(&in)
	e.views.store(w.v, it, vis)
	return vis
}

// Mask returns the visibility of items as a bitset (bit i%64 of word i/64: items[i]
// is visible), cached in the view under gen. The router passes, as gen, a number that
// names this very list of items (its catalog's version of the list, distinct for each
// kind of list): a warm list call then costs one lookup, not one per item. The mask is
// shared: do not modify it.
func (w View) Mask(gen uint64, items []Item) []uint64 {
	n := (len(items) + 63) / 64
	if w.v == nil {
		m := make([]uint64, n)
		for i := range items {
			m[i/64] |= 1 << (i % 64)
		}
		return m
	}
	if m := w.v.mask(gen); m != nil && len(m) == n {
		return m
	}
	m := make([]uint64, n)
	for i, it := range items {
		if w.Visible(it) {
			m[i/64] |= 1 << (i % 64)
		}
	}
	w.e.views.storeMask(w.v, gen, m)
	return m
}

func (e *Engine) visible(in *Input) bool {
	if e.scope != nil && !e.scope.admits(in) {
		return false
	}
	allowed := !e.c.hasAllow
	for i := range e.c.rules {
		r := &e.c.rules[i]
		o, _ := r.eval(in)
		switch {
		case o == isError:
			e.stats.listErrors.Add(1)
			return false
		case r.deny:
			if o == isTrue {
				return false
			}
		case o != isFalse: // an allow rule that matches, or may
			return true // the deny rules come first: none hides it
		}
	}
	return allowed
}

// Digest summarises what s sees of items: equal digests, equal views (up to a 64-bit
// collision). The router keeps each session's digest per list kind and sends
// list_changed after a catalog or policy change only to the sessions whose digest
// changed. It does not depend on the order of items.
func (e *Engine) Digest(s *Subject, items []Item) uint64 {
	var sum, n uint64
	w := e.View(s)
	for _, it := range items {
		if w.Visible(it) {
			sum += itemHash(it)
			n++
		}
	}
	return sum ^ n*0x9e3779b97f4a7c15
}

var itemSeed = maphash.MakeSeed()

func itemHash(it Item) uint64 {
	var h maphash.Hash
	h.SetSeed(itemSeed)
	h.WriteByte(byte(it.Kind))
	h.WriteString(it.Backend)
	h.WriteByte(0)
	h.WriteString(it.Name)
	// Mixed again so that sums of hashes of similar items do not cancel out.
	x := h.Sum64()
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>29
}

// viewCache keeps, per principal view, the visibility of the items asked about and the
// decisions of the calls made (see Decide). It holds at most max entries in all: when
// full, the least recently used views go whole.
type viewCache struct {
	mu      sync.RWMutex
	views   map[fingerprint]*view
	max     int
	entries atomic.Int64
	// epoch orders the views by last use: it moves on when a view is made, and a view
	// records the epoch of its last use (a load and rarely a store: no shared counter
	// bumped on every lookup).
	epoch atomic.Uint64
}

type view struct {
	fp       fingerprint
	mu       sync.RWMutex
	seen     map[Item]bool
	plans    *planMap          // read without mu (plans.go)
	masks    [maxMasks]genMask // the latest lists' masks (Mask), oldest replaced first
	nextMask int
	used     atomic.Uint64
	gone     atomic.Bool // evicted: stores are dropped (set under mu)
}

// genMask is one list's mask; a view keeps a few (one per kind of list, and the
// previous version during a catalog change).
type genMask struct {
	gen  uint64
	mask []uint64
}

const maxMasks = 8

// callKey is what a decision depends on besides the principal's view and the
// arguments.
type callKey struct {
	method, tool, prompt, uri, backend string
}

// clone is k with strings of its own, in one allocation (one cache line to compare).
func (k *callKey) clone() callKey {
	var sb strings.Builder // a copy even where a concatenation would return one of its parts
	sb.Grow(len(k.method) + len(k.tool) + len(k.prompt) + len(k.uri) + len(k.backend))
	for _, f := range [...]string{k.method, k.tool, k.prompt, k.uri, k.backend} {
		sb.WriteString(f)
	}
	all := sb.String()
	var c callKey
	for _, f := range [...]struct {
		dst *string
		n   int
	}{{&c.method, len(k.method)}, {&c.tool, len(k.tool)}, {&c.prompt, len(k.prompt)}, {&c.uri, len(k.uri)}, {&c.backend, len(k.backend)}} {
		*f.dst, all = all[:f.n], all[f.n:]
	}
	return c
}

func newViewCache(max int) *viewCache {
	return &viewCache{views: map[fingerprint]*view{}, max: max}
}

func (c *viewCache) get(fp fingerprint) *view {
	c.mu.RLock()
	v := c.views[fp]
	c.mu.RUnlock()
	if v == nil {
		c.mu.Lock()
		if v = c.views[fp]; v == nil {
			v = &view{fp: fp, seen: map[Item]bool{}, plans: newPlanMap()}
			c.views[fp] = v
			c.epoch.Add(1)
		}
		c.mu.Unlock()
	}
	c.touch(v)
	return v
}

// touch records that v is in use (for evict's order).
func (c *viewCache) touch(v *view) {
	if ep := c.epoch.Load(); v.used.Load() != ep {
		v.used.Store(ep)
	}
}

// viewOf is get(s.view(u)) that remembers the answer in s: a decision then finds the
// principal's view with one atomic load instead of a locked lookup by fingerprint.
func (c *viewCache) viewOf(s *Subject, u uses) *view {
	if m := s.views.Load(); m != nil && m.c == c && !m.v.gone.Load() {
		c.touch(m.v)
		return m.v
	}
	v := c.get(s.view(u))
	s.views.Store(&viewMemo{c, v})
	return v
}

// viewMemo is the view a Subject last had in a viewCache (Subject.views).
type viewMemo struct {
	c *viewCache
	v *view
}

func (v *view) lookup(it Item) (vis, ok bool) {
	v.mu.RLock()
	vis, ok = v.seen[it]
	v.mu.RUnlock()
	return vis, ok
}

// plan returns k's plan, nil when there is none yet.
func (v *view) plan(k *callKey) *planned {
	if p := v.plans.load(k); p != nil {
		return p
	}
	v.mu.Lock()
	p := v.plans.lookupLocked(k)
	v.mu.Unlock()
	return p
}

func (v *view) mask(gen uint64) []uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, m := range v.masks {
		if m.mask != nil && m.gen == gen {
			return m.mask
		}
	}
	return nil
}

// storeMask keeps m; a mask counts as one entry per 64 items.
func (c *viewCache) storeMask(v *view, gen uint64, m []uint64) {
	v.mu.Lock()
	if v.gone.Load() {
		v.mu.Unlock()
		return
	}
	old := &v.masks[v.nextMask]
	v.nextMask = (v.nextMask + 1) % maxMasks
	n := c.entries.Add(int64(len(m) - len(old.mask)))
	*old = genMask{gen, m}
	v.mu.Unlock()
	c.over(v, n)
}

func (c *viewCache) store(v *view, it Item, vis bool) {
	v.mu.Lock()
	n := int64(0)
	if _, ok := v.seen[it]; !ok && !v.gone.Load() {
		v.seen[it] = vis
		n = c.entries.Add(1)
	}
	v.mu.Unlock()
	c.over(v, n)
}

// storePlan keeps p as k's plan. k's strings may point into a request's bytes: the
// key kept is a copy.
func (c *viewCache) storePlan(v *view, k *callKey, p *planned) {
	v.mu.Lock()
	n := int64(0)
	if v.plans.lookupLocked(k) == nil && !v.gone.Load() {
		p.key = k.clone()
		v.plans.store(p)
		n = c.entries.Add(1)
	}
	v.mu.Unlock()
	c.over(v, n)
}

// over evicts when n, the count of entries after an addition, is beyond the bound.
// Entries are counted under their view's lock, as evict uncounts them, so that the
// count never drifts.
func (c *viewCache) over(v *view, n int64) {
	if n > int64(c.max) {
		c.evict(v)
	}
}

// evict drops the least recently used views until the cache is under its bound again,
// never keep (the view being filled), unless it is the only one left.
func (c *viewCache) evict(keep *view) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.entries.Load() > int64(c.max) && len(c.views) > 0 {
		var old *view
		for _, v := range c.views {
			if (v != keep || len(c.views) == 1) && (old == nil || v.used.Load() < old.used.Load()) {
				old = v
			}
		}
		delete(c.views, old.fp)
		old.mu.Lock()
		old.gone.Store(true)
		n := len(old.seen) + old.plans.len()
		for _, m := range old.masks {
			n += len(m.mask)
		}
		c.entries.Add(-int64(n))
		old.seen, old.masks = nil, [maxMasks]genMask{}
		old.plans.clear()
		old.mu.Unlock()
	}
}
