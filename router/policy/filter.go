package policy

import (
	"hash/maphash"
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
	if len(e.c.rules) == 0 {
		return true
	}
	v := e.views.get(s.view(e.c.uses))
	if vis, ok := v.lookup(it); ok {
		e.stats.viewHits.Add(1)
		return vis
	}
	e.stats.viewMisses.Add(1)
	var in Input
	it.input(&in)
	in.subj = s
	vis := e.visible(&in)
	e.views.store(v, it, vis)
	return vis
}

func (e *Engine) visible(in *Input) bool {
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
	for _, it := range items {
		if e.Visible(s, it) {
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

// viewCache keeps, per principal view, the visibility of the items asked about. It
// holds at most max entries in all: when full, the least recently used views go whole.
type viewCache struct {
	mu      sync.Mutex
	views   map[fingerprint]*view
	max     int
	entries atomic.Int64
	clock   atomic.Uint64 // ticks of use, for the LRU order
}

type view struct {
	fp   fingerprint
	mu   sync.RWMutex
	seen map[Item]bool
	used atomic.Uint64
	gone bool // evicted: stores are dropped (under mu)
}

func newViewCache(max int) *viewCache {
	return &viewCache{views: map[fingerprint]*view{}, max: max}
}

func (c *viewCache) get(fp fingerprint) *view {
	c.mu.Lock()
	v := c.views[fp]
	if v == nil {
		v = &view{fp: fp, seen: map[Item]bool{}}
		c.views[fp] = v
	}
	c.mu.Unlock()
	v.used.Store(c.clock.Add(1))
	return v
}

func (v *view) lookup(it Item) (vis, ok bool) {
	v.mu.RLock()
	vis, ok = v.seen[it]
	v.mu.RUnlock()
	return vis, ok
}

func (c *viewCache) store(v *view, it Item, vis bool) {
	v.mu.Lock()
	added := false
	if _, ok := v.seen[it]; !ok && !v.gone {
		v.seen[it] = vis
		added = true
	}
	v.mu.Unlock()
	if added && c.entries.Add(1) > int64(c.max) {
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
		old.gone = true
		c.entries.Add(-int64(len(old.seen)))
		old.seen = nil
		old.mu.Unlock()
	}
}
