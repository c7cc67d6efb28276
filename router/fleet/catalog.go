package fleet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/bytedance/sonic"

	"github.com/mcprouter/mcprouter/codec"
)

// The catalog: every backend's lists, merged into an immutable snapshot with the routes
// (tool and prompt names, resource URIs and templates) and the pages of the merged lists.
// refresh, run on a background goroutine per instance event or change notice, fetches a
// backend's lists and swaps in a new snapshot under buildM; readers (routing, on the
// dispatcher's workers) load the snapshot without a lock.

// refresh re-reads a backend's lists and swaps in a new catalog; clients hear of it
// when the exposed lists changed.
func (f *Fleet) refresh(b *backend, c *upConn) {
	ctx, cancel := context.WithTimeout(f.life.ctx, b.cfg.Timeout)
	defer cancel()
	lists, err := f.fetchLists(ctx, c)
	if err != nil {
		f.log.Warn("cannot read backend catalog", "backend", b.cfg.Name, "err", err)
		if b.lists.Load() != nil {
			return
		}
	}
	f.Stats.Refreshes.Add(1)
	old := b.lists.Swap(&lists)
	f.buildM.Lock()
	f.cat.Store(f.build(f.gen.Add(1)))
	f.buildM.Unlock()
	b.markListed()
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

// kind is one of the four lists a backend may offer.
type kind int

const (
	kTools kind = iota
	kPrompts
	kResources
	kTemplates
	numKinds
)

// kindInfo says how each list is fetched, keyed and exposed.
var kindInfo = [numKinds]struct {
	method   string // the list method
	list     string // the result member holding the items
	field    string // the item member that identifies it
	cap      string // the server capability that offers it
	prefixed bool   // whether names get the backend's prefix
	changed  string // the list_changed notification
}{
	kTools:     {"tools/list", "tools", "name", "tools", true, "notifications/tools/list_changed"},
	kPrompts:   {"prompts/list", "prompts", "name", "prompts", true, "notifications/prompts/list_changed"},
	kResources: {"resources/list", "resources", "uri", "resources", false, "notifications/resources/list_changed"},
	kTemplates: {"resources/templates/list", "resourceTemplates", "uriTemplate", "resources", false, "notifications/resources/list_changed"},
}

// item is one entry of a list, as exposed to clients (prefix applied).
type item struct {
	key string // exposed name, URI or URI template
	raw []byte // the item's JSON object
}

// route says where a named item lives and how to give the backend its own name back.
type route struct {
	b     *backend
	strip int // bytes of prefix+separator to remove from the exposed name
}

// templateRoute routes URIs matching a template's literal prefix.
type templateRoute struct {
	prefix string
	b      *backend
}

// catalog is an immutable snapshot of every backend's lists, merged. A refresh builds a
// new one and swaps it in.
type catalog struct {
	gen       uint64
	lists     [numKinds][][]item // [kind][backend index]
	tools     map[string]route
	prompts   map[string]route
	resources map[string]*backend
	templates []templateRoute // longest prefix first
	// templateOwners maps each listed URI template to its backend: a template served by
	// several backends is listed and routed once, like any other name.
	templateOwners map[string]*backend
}

// fetchLists reads every page of every list the backend offers, through c.
func (f *Fleet) fetchLists(ctx context.Context, c *upConn) ([numKinds][]item, error) {
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
		items, err := f.fetchList(ctx, c, k)
		if err != nil {
			return out, fmt.Errorf("%s: %w", info.method, err)
		}
		out[k] = items
	}
	return out, nil
}

// maxPages bounds one list fetch against a backend whose cursors never end.
const maxPages = 10000

func (f *Fleet) fetchList(ctx context.Context, c *upConn, k kind) ([]item, error) {
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
		res, err := f.table.call(ctx, c, info.method, params)
		if err != nil {
			return nil, err
		}
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
			items = append(items, item{key: key, raw: append([]byte(nil), raw...)})
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
func (f *Fleet) build(gen uint64) *catalog {
	cat := &catalog{
		gen: gen, tools: map[string]route{}, prompts: map[string]route{}, resources: map[string]*backend{},
		templateOwners: map[string]*backend{},
	}
	for k := range cat.lists {
		cat.lists[k] = make([][]item, len(f.backends))
	}
	for bi, b := range f.backends {
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
				if f.claim(cat, k, it.key, b, strip) {
					kept = append(kept, it)
				}
			}
			cat.lists[k][bi] = kept
		}
	}
	sort.SliceStable(cat.templates, func(i, j int) bool { return len(cat.templates[i].prefix) > len(cat.templates[j].prefix) })
	return cat
}

// claim records that b serves key; false when an earlier backend already does.
func (f *Fleet) claim(cat *catalog, k kind, key string, b *backend, strip int) bool {
	var owner *backend
	switch k {
	case kTools:
		if r, dup := cat.tools[key]; dup {
			owner = r.b
		} else {
			cat.tools[key] = route{b: b, strip: strip}
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
		if _, seen := f.collisions.LoadOrStore(kindInfo[k].list+"\x00"+key+"\x00"+b.cfg.Name, true); !seen {
			f.log.Warn("name collision: the backend configured first keeps it", "kind", kindInfo[k].list, "name", key, "kept", owner.cfg.Name, "hidden", b.cfg.Name)
		}
		return false
	}
	return true
}

// resourceOwner finds the backend serving uri: an exact resource first, then the
// template with the longest matching literal prefix.
func (cat *catalog) resourceOwner(uri string) *backend {
	if b, ok := cat.resources[uri]; ok {
		return b
	}
	for _, t := range cat.templates {
		if strings.HasPrefix(uri, t.prefix) {
			return t.b
		}
	}
	return nil
}

// page appends one page of list k to dst as a result object, starting at the cursor, and
// the cursor of the next page if any. The cursor encodes every backend's position, so
// paging reaches every item of every backend.
func (cat *catalog) page(dst []byte, k kind, cursor []byte, size int) ([]byte, error) {
	pos := make([]int, len(cat.lists[k]))
	if len(cursor) > 0 {
		if err := decodeCursor(cursor, pos); err != nil {
			return dst, err
		}
	}
	dst = append(dst, `{"`...)
	dst = append(dst, kindInfo[k].list...)
	dst = append(dst, `":[`...)
	n := 0
	for bi := range pos {
		list := cat.lists[k][bi]
		for pos[bi] < len(list) && n < size {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, list[pos[bi]].raw...)
			pos[bi]++
			n++
		}
	}
	dst = append(dst, ']')
	more := false
	for bi, p := range pos {
		if p < len(cat.lists[k][bi]) {
			more = true
		}
	}
	if more {
		dst = append(dst, `,"nextCursor":"`...)
		dst = appendCursor(dst, pos)
		dst = append(dst, '"')
	}
	return append(dst, '}'), nil
}

// The cursor is opaque to clients: base64url of "v1" and each backend's offset.
func appendCursor(dst []byte, pos []int) []byte {
	raw := []byte("v1")
	for _, p := range pos {
		raw = append(raw, '.')
		raw = strconv.AppendInt(raw, int64(p), 10)
	}
	return base64.RawURLEncoding.AppendEncode(dst, raw)
}

var errCursor = fmt.Errorf("invalid cursor")

func decodeCursor(c []byte, pos []int) error {
	raw, err := base64.RawURLEncoding.DecodeString(string(c))
	if err != nil {
		return errCursor
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != len(pos)+1 || parts[0] != "v1" {
		return errCursor
	}
	for i, p := range parts[1:] {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return errCursor
		}
		pos[i] = n
	}
	return nil
}
