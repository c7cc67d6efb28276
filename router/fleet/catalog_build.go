package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/router/modern"
)

// catalogBuilder is the part that keeps the merged catalog: it fetches a backend's lists
// through one of its upstream sessions (refresh), merges every backend's last lists
// into a new immutable snapshot, resolving name collisions, and swaps it in. It owns the
// current snapshot, its generation and the collisions already logged; each backend
// keeps its own last lists (backend.lists), written only here.
//
// Who calls it: refresh runs on a background goroutine of the fleet's lifecycle per
// instance event or change notice (builds are serialized by mu, and each build reads
// every backend's latest lists); one backend's refreshes are coalesced (refreshing), so
// that a backend flooding list_changed costs one fetch at a time, not one per notice;
// load is called by routing on dispatcher workers and never blocks. A change to the
// exposed lists is told to clients through changed.
type catalogBuilder struct {
	life  *lifecycle
	table *table // the router's own list requests
	log   *slog.Logger
	stats *Stats
	set   *backendSet // the backends, in configuration order
	// changed tells every client session that a list changed (its list_changed method).
	changed func(method string)

	cur        atomic.Pointer[catalog]
	gen        atomic.Uint64
	mu         sync.Mutex      // serializes builds
	collisions sync.Map        // collisions already logged
	refreshing sync.Map        // *backend → *refreshRun
	caches     sync.Map        // listKey → modern.Cache of a backend's last list (modern_client.go)
	listeners  clientListeners // stateless clients' listen streams (listen_client.go)
}

// refreshRun coalesces one backend's refreshes: while one runs, the calls that come
// meanwhile leave the connection to read through in again and return, and the running
// one reads the lists once more when it ends, through the latest connection asked for.
type refreshRun struct {
	mu      sync.Mutex
	running bool
	again   *upConn
	// partial: the backend's lists in the catalog are what a failed read got (written
	// by the running refresh only).
	partial bool
}

func newCatalogBuilder(life *lifecycle, table *table, log *slog.Logger, stats *Stats, set *backendSet, changed func(string)) *catalogBuilder {
	cb := &catalogBuilder{life: life, table: table, log: log, stats: stats, set: set, changed: changed}
	cb.cur.Store(cb.build(0))
	return cb
}

// load returns the current snapshot.
func (cb *catalogBuilder) load() *catalog { return cb.cur.Load() }

// rebuild merges every backend's latest lists into a new snapshot and swaps it in.
func (cb *catalogBuilder) rebuild() {
	cb.mu.Lock()
	cb.cur.Store(cb.build(cb.gen.Add(1)))
	cb.mu.Unlock()
}

// Generation implements router.GenerationalFleet: the catalog's rebuilds count every
// change to the backends (Reconfigure) and to what they offer (lists and capabilities
// read after a backend connected or announced a change).
func (f *Fleet) Generation() uint64 { return f.catalog.gen.Load() }

// refresh re-reads a backend's lists and swaps in a new catalog; clients hear of it
// when the exposed lists changed. When a refresh of b is already running it returns at
// once: that one reads the lists again after it ends, which covers this call's change.
func (cb *catalogBuilder) refresh(b *backend, c *upConn) {
	if c == nil {
		return
	}
	v, ok := cb.refreshing.Load(b)
	if !ok {
		v, _ = cb.refreshing.LoadOrStore(b, new(refreshRun))
	}
	run := v.(*refreshRun)
	run.mu.Lock()
	if run.running {
		run.again = c
		run.mu.Unlock()
		return
	}
	run.running = true
	run.mu.Unlock()
	for c != nil {
		run.partial = cb.refreshOnce(b, c, run.partial)
		run.mu.Lock()
		c, run.again = run.again, nil
		run.running = c != nil
		run.mu.Unlock()
	}
}

// refreshOnce reads b's lists through c and swaps in a new catalog; it reports whether
// what it swapped in is partial. A failed read keeps complete lists read before; with
// none (the first read, or only partial ones), what it read serves meanwhile and the
// read is tried again later (retryLater): a backend slow to answer one list at start
// would otherwise lack the lists after it (and what they route: a resource falling to
// another backend's hidden one) until it announced a change.
func (cb *catalogBuilder) refreshOnce(b *backend, c *upConn, partial bool) bool {
	if b.retired.Load() {
		return partial // removed by Reconfigure: its lists are no longer anyone's
	}
	ctx, cancel := context.WithTimeout(cb.life.ctx, b.cfg.Timeout)
	defer cancel()
	lists, err := cb.fetchLists(ctx, c)
	if err != nil {
		cb.log.Warn("cannot read backend catalog", "backend", b.cfg.Name, "err", err)
		if b.lists.Load() != nil && !partial {
			return false
		}
		cb.retryLater(b, c)
	}
	partial = err != nil
	cb.stats.Refreshes.Add(1)
	old := b.lists.Swap(&lists)
	cb.rebuild()
	b.markListed()
	if old == nil {
		if !b.late.Load() {
			return partial // the first lists of a backend the router started with: no news
		}
		old = new([numKinds][]item) // a backend added at run time: its lists are news
	}
	var told [numKinds]bool
	for k := range told {
		told[k] = !sameItems(old[k], lists[k])
	}
	cb.announce(told) // once per notification: resources and templates share one
	return partial
}

// retryLater reads b's lists through c again after a while (the backend's timeout, at
// least a second), unless c is gone or b removed by then.
func (cb *catalogBuilder) retryLater(b *backend, c *upConn) {
	cb.life.spawn(func() {
		if !ctxtime.Sleep(cb.life.ctx, max(b.cfg.Timeout, time.Second)) || c.dead() || b.retired.Load() {
			return
		}
		cb.refresh(b, c)
	})
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

// fetchLists reads every page of every list the backend offers, through c.
func (cb *catalogBuilder) fetchLists(ctx context.Context, c *upConn) ([numKinds][]item, error) {
	var out [numKinds][]item
	b := c.b
	b.mu.Lock()
	caps := b.caps
	b.mu.Unlock()
	for k := kind(0); k < numKinds; k++ {
		info := kindInfo[k]
		if !hasMember(caps, info.cap) {
			continue
		}
		items, err := cb.fetchList(ctx, c, k)
		if err != nil {
			return out, fmt.Errorf("%s: %w", info.method, err)
		}
		out[k] = items
	}
	return out, nil
}

// maxPages bounds one list fetch against a backend whose cursors never end.
const maxPages = 10000

func (cb *catalogBuilder) fetchList(ctx context.Context, c *upConn, k kind) ([]item, error) {
	info := kindInfo[k]
	prefix := ""
	if info.prefixed && c.b.cfg.Prefix != "" {
		prefix = c.b.cfg.Prefix + Separator
	}
	var items []item
	cursor := ""
	for page := 0; page < maxPages; page++ {
		var params []byte
		if cursor != "" {
			params = append(params, `{"cursor":`...)
			params = codec.AppendString(params, cursor)
			params = append(params, '}')
		}
		res, err := cb.table.call(ctx, c, info.method, params)
		if err != nil {
			return nil, err
		}
		cb.noteCache(c.b, k, page, res)
		if prefix != "" {
			if res, err = codec.AppendPrefixListNames(nil, res, info.list, info.field, prefix); err != nil {
				return nil, err
			}
		}
		var pg map[string]json.RawMessage
		if err := sonic.Unmarshal(res, &pg); err != nil {
			return nil, err
		}
		var raws []json.RawMessage
		if l := pg[info.list]; len(l) > 0 {
			if err := sonic.Unmarshal(l, &raws); err != nil {
				return nil, err
			}
		}
		for _, raw := range raws {
			node, err := sonic.Get(raw, info.field)
			if err != nil {
				return nil, fmt.Errorf("item without %s", info.field)
			}
			key, err := node.String()
			if err != nil {
				return nil, fmt.Errorf("item %s is not a string", info.field)
			}
			it := item{key: key, raw: append([]byte(nil), raw...)}
			if k == kTools {
				it.repeatable, it.headers = toolRepeatable(raw), modern.ParamHeaders(raw)
			}
			items = append(items, it)
		}
		cursor = ""
		if nc := pg["nextCursor"]; len(nc) > 0 && string(nc) != "null" {
			if err := sonic.Unmarshal(nc, &cursor); err != nil {
				return nil, err
			}
		}
		if cursor == "" {
			return items, nil
		}
	}
	return nil, fmt.Errorf("more than %d pages", maxPages)
}

// hasMember reports whether the JSON object obj has a member named key.
func hasMember(obj []byte, key string) bool {
	if len(obj) == 0 {
		return false
	}
	n, err := sonic.Get(obj, key)
	return err == nil && n.Exists()
}

// build merges the lists of every backend into a new catalog. Name collisions resolve
// deterministically: the backend configured first keeps the name, the other item is
// hidden, and the collision is logged.
func (cb *catalogBuilder) build(gen uint64) *catalog {
	cat := &catalog{
		gen: gen, tools: map[string]route{}, prompts: map[string]route{}, resources: map[string]*backend{},
		templateOwners: map[string]*backend{},
	}
	cat.backends = cb.set.all()
	for k := range cat.lists {
		cat.lists[k] = make([][]item, len(cat.backends))
	}
	for bi, b := range cat.backends {
		lists := b.lists.Load()
		if lists == nil {
			continue
		}
		strip := 0
		if b.cfg.Prefix != "" {
			strip = len(b.cfg.Prefix) + len(Separator)
		}
		for k := kind(0); k < numKinds; k++ {
			var kept []item
			for _, it := range lists[k] {
				if cb.claim(cat, k, it, b, strip) {
					kept = append(kept, it)
				}
			}
			cat.lists[k][bi] = kept
		}
	}
	sort.SliceStable(cat.templates, func(i, j int) bool { return len(cat.templates[i].prefix) > len(cat.templates[j].prefix) })
	return cat
}

// claim records that b serves it; false when an earlier backend already does.
func (cb *catalogBuilder) claim(cat *catalog, k kind, it item, b *backend, strip int) bool {
	key := it.key
	var owner *backend
	switch k {
	case kTools:
		if r, dup := cat.tools[key]; dup {
			owner = r.b
		} else {
			cat.tools[key] = route{b: b, strip: strip, repeatable: it.repeatable, headers: it.headers}
		}
	case kPrompts:
		if r, dup := cat.prompts[key]; dup {
			owner = r.b
		} else {
			cat.prompts[key] = route{b: b, strip: strip}
		}
	case kResources:
		if o, dup := cat.resources[key]; dup {
			owner = o
		} else {
			cat.resources[key] = b
		}
	case kTemplates:
		if o, dup := cat.templateOwners[key]; dup {
			owner = o
			break
		}
		cat.templateOwners[key] = b
		prefix := key
		if i := strings.IndexByte(key, '{'); i >= 0 {
			prefix = key[:i]
		}
		cat.templates = append(cat.templates, templateRoute{prefix: prefix, b: b})
	}
	if owner != nil && owner != b {
		// Logged once per collision, not at every catalog rebuild.
		if _, seen := cb.collisions.LoadOrStore(kindInfo[k].list+"\x00"+key+"\x00"+b.cfg.Name, true); !seen {
			cb.log.Warn("name collision: the backend configured first keeps it", "kind", kindInfo[k].list, "name", key, "kept", owner.cfg.Name, "hidden", b.cfg.Name)
		}
		return false
	}
	return true
}
