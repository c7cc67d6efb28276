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

// Decoration is what a 2026-07-28 server adds to every result it passes on. Without
// Cache it is read only and may be shared by every goroutine (the router's serverInfo);
// with Cache it is written by AppendDecorated, so each goroutine uses its own.
type Decoration struct {
	// ServerInfo is the raw Implementation object for _meta's serverInfo, encoded once
	// (AppendImplementation); nil adds none.
	ServerInfo []byte
	// Cache, when set, is written as the result's ttlMs and cacheScope, replacing the
	// ones it has: the router's merged or policy-restricted fields win over a backend's.
	Cache *Cache

	// num holds the encoded ttlMs while AppendDecorated splices it in: scratch space in
	// the caller's Decoration rather than a buffer of the function's, which would escape
	// through the splices.
	num [20]byte
}

// AppendDecorated appends the result object result with what a 2026-07-28 result needs
// and lacks: a resultType when it has none (a 2025 backend's result: "complete", or
// "input_required" when it carries inputRequests, as a 2025-era server written for both
// generations answers a call it re-ran with its client's answers and that still needs
// more: the client must see that it has to retry), the
// serverInfo in _meta unless it has one, and d.Cache's fields. It copies the bytes with
// a few insertions (codec.AppendSplices) and allocates nothing beyond growing dst. A
// result that is not an object is copied unchanged.
func AppendDecorated(dst, result []byte, d *Decoration) []byte {
	start := skipWS(result, 0)
	if start >= len(result) || result[start] != '{' {
		return append(dst, result...)
	}
	var hasType, hasInfo, asks bool
	var meta, ttl, scope []byte
	empty := true
	eachMember(result, func(k, v []byte) bool {
		empty = false
		switch {
		case codec.KeyIs(k, "resultType"):
			hasType = true
		case codec.KeyIs(k, "_meta"):
			if isObject(v) {
				meta = v
				hasInfo = codec.Member(v, KeyServerInfo) != nil
			}
		case codec.KeyIs(k, "inputRequests"):
			asks = isObject(v)
		case codec.KeyIs(k, "ttlMs"):
			ttl = v
		case codec.KeyIs(k, "cacheScope"):
			scope = v
		}
		return true
	})

	var sp [12]codec.Splice
	n := 0
	at := result[start+1 : start+1] // just after the opening brace
	add := func(old, new []byte) {
		sp[n] = codec.Splice{Old: old, New: new}
		n++
	}
	// Insertions after the brace, each followed by a comma unless it is the last thing
	// in an object that was empty.
	var inserted int
	lead := func() {
		if inserted > 0 {
			add(at, comma)
		}
		inserted++
	}
	if !hasType {
		lead()
		if asks {
			add(at, typeInputRequired)
		} else {
			add(at, typeComplete)
		}
	}
	if d.ServerInfo != nil && meta == nil {
		lead()
		add(at, metaInfoOpen)
		add(at, d.ServerInfo)
		add(at, closeBrace)
	}
	if d.Cache != nil {
		ttlVal := strconv.AppendInt(d.num[:0], max(d.Cache.TTLms, 0), 10)
		scopeVal := scopePrivate
		if d.Cache.Scope == ScopePublic {
			scopeVal = scopePublic
		}
		// A member the result has gets its value replaced; one it lacks is inserted.
		set := func(old, key, val []byte) {
			if old != nil {
				add(old, val)
				return
			}
			lead()
			add(at, key)
			add(at, val)
		}
		set(ttl, ttlKey, ttlVal)
		set(scope, scopeKey, scopeVal)
	}
	if inserted > 0 && !empty {
		add(at, comma)
	}
	if d.ServerInfo != nil && meta != nil && !hasInfo {
		in := meta[1:1]
		add(in, infoKey)
		add(in, d.ServerInfo)
		if ws := skipWS(meta, 1); ws < len(meta) && meta[ws] != '}' {
			add(in, comma)
		}
	}
	return codec.AppendSplices(dst, result, sp[:n])
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
