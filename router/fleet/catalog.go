package fleet

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcprouter/mcprouter/router/modern"
)

// The catalog: every backend's lists, merged into an immutable snapshot with the routes
// (tool and prompt names, resource URIs and templates) and the pages of the merged lists.
// The catalogBuilder (catalog_build.go) makes the snapshots; readers (routing, on the
// dispatcher's workers) load the current one without a lock.

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
	// repeatable: a tool whose annotations say that running it twice does no harm
	// (catalog_hints.go).
	repeatable bool
	// headers are a tool's Mcp-Param declarations (x-mcp-header in its inputSchema),
	// read once when its list comes: nil for most tools.
	headers []modern.ParamHeader
}

// route says where a named item lives and how to give the backend its own name back.
type route struct {
	b     *backend
	strip int // bytes of prefix+separator to remove from the exposed name
	// repeatable: a tool call whose answer was lost may be sent to another replica
	// (the tool's annotations allow it; forward_retry.go).
	repeatable bool
	// headers are the tool's Mcp-Param declarations, which a stateless call's
	// headers are checked against (paramheaders.go).
	headers []modern.ParamHeader
}

// templateRoute routes URIs matching a template's literal prefix.
type templateRoute struct {
	prefix string
	b      *backend
}

// catalog is an immutable snapshot of every backend's lists, merged. A refresh builds a
// new one and swaps it in.
type catalog struct {
	gen uint64
	// backends are the backends the snapshot was built from, in configuration order:
	// lists' second index is a position in it.
	backends  []*backend
	lists     [numKinds][][]item // [kind][backend index]
	tools     map[string]route
	prompts   map[string]route
	resources map[string]*backend
	templates []templateRoute // longest prefix first
	// templateOwners maps each listed URI template to its backend: a template served by
	// several backends is listed and routed once, like any other name.
	templateOwners map[string]*backend
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
// paging reaches every item of every backend. visible, when not nil, says which items
// are shown (a policy that filters lists): size of them per page, and a next cursor only
// when some shown item remains.
func (cat *catalog) page(dst []byte, k kind, cursor []byte, size int, visible func(bi, i int) bool) ([]byte, error) {
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
	more := false
	for bi := range pos {
		list := cat.lists[k][bi]
		for pos[bi] < len(list) {
			if visible != nil && !visible(bi, pos[bi]) {
				pos[bi]++
				continue
			}
			if n == size {
				more = true
				break
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, list[pos[bi]].raw...)
			pos[bi]++
			n++
		}
	}
	dst = append(dst, ']')
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
