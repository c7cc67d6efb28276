package modern

import (
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// The two result types of the revision.
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
)

// Decoration is what a 2026-07-28 server adds to every result it passes on. It is read
// only and may be shared by every goroutine (the router's serverInfo).
type Decoration struct {
	// ServerInfo is the raw Implementation object for _meta's serverInfo, encoded once
	// (AppendImplementation); nil adds none.
	ServerInfo []byte
	// ReplaceInfo replaces a serverInfo the result has with ServerInfo: a gateway speaks
	// for itself, where a server passing on its own results keeps what they say.
	ReplaceInfo bool
	// Cache, when set, is written as the result's ttlMs and cacheScope, replacing the
	// ones it has: the router's merged or policy-restricted fields win over a backend's.
	Cache *Cache
}

// AppendDecorated appends the result object result with what a 2026-07-28 result needs
// and lacks: a resultType when it has none (a 2025 backend's result: "complete", or
// "input_required" when it carries inputRequests, as a 2025-era server written for both
// generations answers a call it re-ran with its client's answers and that still needs
// more: the client must see that it has to retry), the serverInfo in _meta unless it
// has one (or in place of it, with ReplaceInfo), and d.Cache's fields. It walks the
// result's members once (its _meta entered in place) and copies its bytes with the
// insertions and replacements in one pass, allocating nothing beyond growing dst. A result that is not an object is
// copied unchanged.
func AppendDecorated(dst, result []byte, d *Decoration) []byte {
	start := skipWS(result, 0)
	if start >= len(result) || result[start] != '{' {
		return append(dst, result...)
	}
	var f resultFields
	var w codec.Walker
	w.Object(result)
	f.read(&w)
	return appendDecorated(dst, result, start, &f, d)
}

// resultFields is what AppendDecorated needs of a result object's members, read in one
// walk (resultFields.read): by the reply screen (Reply) too, which walks the result as
// it finds it, so that the result's bytes are passed over once.
type resultFields struct {
	typ, asks              []byte // the first resultType and the last inputRequests, raw
	meta, info, ttl, scope []byte // _meta (an object) and its serverInfo, ttlMs, cacheScope
	empty                  bool   // no member at all
}

// read reads the members of the result object on w (just begun or entered) into f,
// entering _meta in place to find its serverInfo. Malformed input ends the walk with
// what was read before it; it reports whether the walk reached the object's end.
func (f *resultFields) read(w *codec.Walker) bool {
	*f = resultFields{empty: true}
	for k, esc, ok := w.Key(); ok; k, esc, ok = w.Key() {
		f.empty = false
		if keyIs(k, esc, "_meta") && w.Peek() == '{' {
			// Entered in place: its serverInfo is found in the same pass.
			var mw codec.Walker
			w.Enter(&mw)
			var found []byte
			for mk, mesc, mv, ok := mw.Next(); ok; mk, mesc, mv, ok = mw.Next() {
				if found == nil && keyIs(mk, mesc, KeyServerInfo) {
					found = mv
				}
			}
			v, ok := w.Exit(&mw)
			if !ok {
				return false
			}
			f.meta, f.info = v, found
			continue
		}
		v, ok := w.Value()
		if !ok {
			return false
		}
		switch {
		case keyIs(k, esc, "resultType"):
			if f.typ == nil {
				f.typ = v
			}
		case keyIs(k, esc, "inputRequests"):
			f.asks = v
		case keyIs(k, esc, "ttlMs"):
			f.ttl = v
		case keyIs(k, esc, "cacheScope"):
			f.scope = v
		}
	}
	return w.Err() == nil
}

// appendDecorated is AppendDecorated of result (an object opening at result[start]),
// whose members f holds.
func appendDecorated(dst, result []byte, start int, f *resultFields, d *Decoration) []byte {
	hasType, asks, empty := f.typ != nil, isObject(f.asks), f.empty
	meta, info, ttl, scope := f.meta, f.info, f.ttl, f.scope

	// Members inserted first, just after the opening brace.
	head := start + 1
	dst = append(dst, result[:head]...)
	n := 0 // members inserted
	if !hasType {
		dst = lead(dst, &n)
		if asks {
			dst = append(dst, typeInputRequired...)
		} else {
			dst = append(dst, typeComplete...)
		}
	}
	if d.ServerInfo != nil && meta == nil {
		dst = lead(dst, &n)
		dst = append(dst, metaInfoOpen...)
		dst = append(dst, d.ServerInfo...)
		dst = append(dst, '}')
	}
	var num [20]byte
	var ttlVal, scopeVal []byte
	if d.Cache != nil {
		ttlVal = strconv.AppendInt(num[:0], max(d.Cache.TTLms, 0), 10)
		scopeVal = scopePrivate
		if d.Cache.Scope == ScopePublic {
			scopeVal = scopePublic
		}
		if ttl == nil {
			dst = lead(dst, &n)
			dst = append(dst, ttlKey...)
			dst = append(dst, ttlVal...)
		}
		if scope == nil {
			dst = lead(dst, &n)
			dst = append(dst, scopeKey...)
			dst = append(dst, scopeVal...)
		}
	}
	if n > 0 && !empty {
		dst = append(dst, ',')
	}

	// Then the rest, with the values replaced or the serverInfo put into _meta, in the
	// order they come.
	var eds [3]edit
	k := 0
	add := func(sub []byte, at, end int, what uint8) {
		if off := cap(result) - cap(sub); off >= head && off <= len(result) {
			eds[k] = edit{at: off + at, end: off + end, what: what}
			k++
		}
	}
	if d.Cache != nil {
		if ttl != nil {
			add(ttl, 0, len(ttl), editTTL)
		}
		if scope != nil {
			add(scope, 0, len(scope), editScope)
		}
	}
	metaEmpty := false
	if d.ServerInfo != nil && meta != nil {
		switch {
		case info == nil:
			ws := skipWS(meta, 1)
			metaEmpty = ws >= len(meta) || meta[ws] == '}'
			add(meta, 1, 1, editInfoIn)
		case d.ReplaceInfo:
			add(info, 0, len(info), editInfo)
		}
	}
	for i := 1; i < k; i++ { // a handful: insertion sort by offset
		for j := i; j > 0 && eds[j].at < eds[j-1].at; j-- {
			eds[j], eds[j-1] = eds[j-1], eds[j]
		}
	}
	last := head
	for _, e := range eds[:k] {
		if e.at < last || e.end > len(result) {
			continue // overlapping views: only malformed JSON has them
		}
		dst = append(dst, result[last:e.at]...)
		switch e.what {
		case editTTL:
			dst = append(dst, ttlVal...)
		case editScope:
			dst = append(dst, scopeVal...)
		case editInfoIn:
			dst = append(dst, infoKey...)
			dst = append(dst, d.ServerInfo...)
			if !metaEmpty {
				dst = append(dst, ',')
			}
		case editInfo:
			dst = append(dst, d.ServerInfo...)
		}
		last = e.end
	}
	return append(dst, result[last:]...)
}

// edit is one change AppendDecorated makes past the members it inserts: the bytes
// result[at:end] (none: an insertion) give way to what it says. Offsets, not views, so
// that nothing of the caller's escapes through them.
type edit struct {
	at, end int
	what    uint8
}

// What an edit writes.
const (
	editTTL    = iota // the ttlMs value
	editScope         // the cacheScope value
	editInfoIn        // the serverInfo member, first in _meta
	editInfo          // the serverInfo value, in place of the result's own
)

// lead appends the comma before an inserted member unless it is the first, and counts
// it.
func lead(dst []byte, n *int) []byte {
	if *n > 0 {
		dst = append(dst, ',')
	}
	*n++
	return dst
}

var (
	comma             = []byte(",")
	closeBrace        = []byte("}")
	typeComplete      = []byte(`"resultType":"complete"`)
	typeInputRequired = []byte(`"resultType":"input_required"`)
	metaInfoOpen      = []byte(`"_meta":{"` + KeyServerInfo + `":`)
	infoKey           = []byte(`"` + KeyServerInfo + `":`)
	ttlKey            = []byte(`"ttlMs":`)
	scopeKey          = []byte(`"cacheScope":`)
	scopePublic       = []byte(`"public"`)
	scopePrivate      = []byte(`"private"`)
)

// AppendImplementation appends an Implementation object {"name":...,"version":...}: the
// serverInfo a server announces (encode it once and keep the bytes).
func AppendImplementation(dst []byte, name, version string) []byte {
	dst = append(dst, `{"name":`...)
	dst = codec.AppendString(dst, name)
	dst = append(dst, `,"version":`...)
	dst = codec.AppendString(dst, version)
	return append(dst, '}')
}

// Discover is what a server/discover result says.
type Discover struct {
	// Supported are the protocol versions served, preferred first.
	Supported []string
	// Capabilities is the raw ServerCapabilities object (the router's merged one).
	Capabilities []byte
	// ServerInfo is the raw Implementation object (AppendImplementation).
	ServerInfo []byte
	// Instructions, when not empty, guide a model in using the server.
	Instructions string
	// Cache are the result's caching fields.
	Cache Cache
}

// AppendDiscoverResult appends the DiscoverResult object of d.
func AppendDiscoverResult(dst []byte, d *Discover) []byte {
	dst = append(dst, `{"resultType":"complete","supportedVersions":[`...)
	for i, v := range d.Supported {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = codec.AppendString(dst, v)
	}
	dst = append(dst, `],"capabilities":`...)
	if d.Capabilities == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, d.Capabilities...)
	}
	if d.ServerInfo != nil {
		dst = append(dst, `,"_meta":{"`+KeyServerInfo+`":`...)
		dst = append(dst, d.ServerInfo...)
		dst = append(dst, '}')
	}
	if d.Instructions != "" {
		dst = append(dst, `,"instructions":`...)
		dst = codec.AppendString(dst, d.Instructions)
	}
	dst = append(dst, ',')
	dst = d.Cache.AppendFields(dst)
	return append(dst, '}')
}

// ReadResultType returns the contents of a raw result's resultType; when it has none,
// "complete" (the specification: a result from an earlier-protocol server that omits
// the field is complete), or "input_required" when it carries inputRequests (see
// AppendDecorated).
func ReadResultType(result []byte) []byte {
	if s, ok := stringContents(codec.Member(result, "resultType")); ok {
		return s
	}
	if isObject(codec.Member(result, "inputRequests")) {
		return inputRequiredBytes
	}
	return completeBytes
}

var (
	completeBytes      = []byte(ResultComplete)
	inputRequiredBytes = []byte(ResultInputRequired)
)
