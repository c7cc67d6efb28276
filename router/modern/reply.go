package modern

import (
	"bytes"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// Reply is what a stateless request's screen needs of the response going back to its
// client, read in one walk (ReadReply): whether it is a result or an error, the error
// object, and the result's members that decide its decoration (AppendDecorated) and
// its caching fields. Reading it with codec.Scan and then AppendDecorated walked the
// result twice, the second time only to find again the members the first had passed.
// The views are into the response's bytes.
type Reply struct {
	// Kind is codec.KindResult or codec.KindError for a response with one result or
	// one error member; codec.KindInvalid for anything else (not an object, malformed,
	// both, neither, one of them twice), which the screen passes on untouched.
	Kind   codec.Kind
	Error  []byte // the raw error object (KindError)
	Result []byte // the raw result value (KindResult)
	fields resultFields
	start  int // offset of Result's opening brace in Result; -1: not an object
}

// ReadReply reads the JSON-RPC response msg into r. It walks the envelope's members and
// enters the result in place; what it passes over is validated as codec.Walker does,
// but the envelope's shape is not checked beyond the one result or error: the screen
// reads replies that the fleet or the router made from scanned messages.
func ReadReply(msg []byte, r *Reply) {
	*r = Reply{start: -1}
	var w codec.Walker
	if !w.Object(msg) {
		return
	}
	var results, errs int
	for k, esc, ok := w.Key(); ok; k, esc, ok = w.Key() {
		switch {
		case keyIs(k, esc, "result") && w.Peek() == '{':
			var rw codec.Walker
			w.Enter(&rw)
			r.fields.read(&rw)
			v, ok := w.Exit(&rw)
			if !ok {
				r.Kind = codec.KindInvalid
				return
			}
			r.Result, r.start = v, 0
			results++
			continue
		case keyIs(k, esc, "result"):
			results++
		case keyIs(k, esc, "error"):
			errs++
		}
		v, ok := w.Value()
		if !ok {
			r.Kind = codec.KindInvalid
			return
		}
		switch {
		case keyIs(k, esc, "result"):
			r.Result = v
		case keyIs(k, esc, "error"):
			r.Error = v
		}
	}
	switch {
	case w.Err() != nil:
	case results == 1 && errs == 0:
		r.Kind = codec.KindResult
	case errs == 1 && results == 0:
		r.Kind = codec.KindError
	}
}

// ResultType is ReadResultType of the result.
func (r *Reply) ResultType() []byte {
	if r.start < 0 {
		return ReadResultType(r.Result)
	}
	if s, ok := stringContents(r.fields.typ); ok {
		return s
	}
	if isObject(r.fields.asks) {
		return inputRequiredBytes
	}
	return completeBytes
}

// Cache is ReadCache of the result.
func (r *Reply) Cache() Cache {
	if r.start < 0 {
		return ReadCache(r.Result)
	}
	var c Cache
	if n, err := strconv.ParseInt(string(r.fields.ttl), 10, 64); err == nil && n > 0 {
		c.TTLms = n
	}
	if string(r.fields.scope) == `"public"` {
		c.Scope = ScopePublic
	}
	return c
}

// AppendDecorated appends msg, the response r was read from, with its result decorated
// as AppendDecorated decorates it.
func (r *Reply) AppendDecorated(dst, msg []byte, d *Decoration) []byte {
	at := cap(msg) - cap(r.Result)
	dst = append(dst, msg[:at]...)
	if r.start < 0 {
		dst = AppendDecorated(dst, r.Result, d)
	} else {
		dst = appendDecorated(dst, r.Result, r.start, &r.fields, d)
	}
	return append(dst, msg[at+len(r.Result):]...)
}

// AppendPlainDecorated appends msg, a response to the request whose raw id is id, with
// its result decorated as AppendDecorated decorates it without caching fields (d.Cache
// is not written), for the common reply that can be decorated without a walk: written
// as most servers write it, {"jsonrpc":"2.0","id":<id>,"result":{ with no space, and
// with no backslash, "_meta", "resultType" or "inputRequests" in it. With no backslash
// in the bytes, a key can only be written as it reads and a quote always delimits a
// string, so the result has none of the members the decoration depends on: every one
// is inserted after the result's opening brace, and nothing else changes. ok false:
// msg is not such a reply, and nothing was appended (read it with ReadReply). Like
// ReadReply, it takes msg for a response the fleet or the router made from a scanned
// message (one result, valid JSON); it looks at the bytes, not at their structure
// beyond that head.
//
// A 2026-07-28 backend's result written the same way, beginning with its resultType and
// a _meta of its serverInfo alone ("resultType":"complete","_meta":{"<serverInfo
// key>":{...}}), has that serverInfo replaced with d's (d.ReplaceInfo) the same way.
func AppendPlainDecorated(dst, msg, id []byte, d *Decoration) (out []byte, ok bool) {
	head := len(plainHead) + len(id) + len(plainResult)
	if len(msg) <= head || string(msg[:len(plainHead)]) != plainHead ||
		string(msg[len(plainHead):len(plainHead)+len(id)]) != string(id) ||
		string(msg[head-len(plainResult):head]) != plainResult ||
		bytes.IndexByte(msg, '\\') >= 0 {
		return dst, false
	}
	rest := msg[head:]
	info := 0 // the end of a 2026-07-28 backend's serverInfo in rest, 0: none
	if d.ReplaceInfo && d.ServerInfo != nil && len(rest) > len(plainModernHead) &&
		string(rest[:len(plainModernHead)]) == plainModernHead {
		info = objectEnd(rest, len(plainModernHead))
		if info < 0 || info >= len(rest) || rest[info] != '}' {
			return dst, false // not an object, or not _meta's only member
		}
	}
	if containsBy(rest[info:], `"_meta"`, 1) || containsBy(rest[info:], `"resultType"`, 7) ||
		containsBy(rest[info:], `"inputRequests"`, 6) {
		return dst, false
	}
	if info > 0 {
		dst = append(dst, msg[:head+len(plainModernHead)]...)
		dst = append(dst, d.ServerInfo...)
		return append(dst, rest[info:]...), true
	}
	dst = append(dst, msg[:head]...)
	dst = append(dst, typeComplete...)
	if d.ServerInfo != nil {
		dst = append(dst, ',')
		dst = append(dst, metaInfoOpen...)
		dst = append(dst, d.ServerInfo...)
		dst = append(dst, '}')
	}
	if at := skipWS(rest, 0); at < len(rest) && rest[at] != '}' {
		dst = append(dst, ',')
	}
	return append(dst, rest...), true
}

// The head of a reply AppendPlainDecorated decorates, the id between them, and the
// beginning of a 2026-07-28 backend's result it replaces the serverInfo of.
const (
	plainHead       = `{"jsonrpc":"2.0","id":`
	plainResult     = `,"result":{`
	plainModernHead = `"resultType":"complete","_meta":{"` + KeyServerInfo + `":`
)

// objectEnd returns the offset just past the JSON object that opens at b[at], in bytes
// with no backslash (a quote then always opens or closes a string); -1 when none opens
// there or it does not end in b. A string is passed in a loop of its own that looks for
// its closing quote alone (a serverInfo is mostly strings): the switch on every byte
// took 1.6 times as long (BenchmarkObjectEnd).
func objectEnd(b []byte, at int) int {
	if at >= len(b) || b[at] != '{' {
		return -1
	}
	depth := 0
	for i := at; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// containsBy reports whether b contains s, looking for its byte s[at], which is rare in
// JSON (an underscore, a capital), and comparing around each one found: bytes.Contains
// looks for s by its first byte, here a quote, which JSON is full of, and so compared
// at nearly every string (three such searches cost more than the walk they spare).
func containsBy(b []byte, s string, at int) bool {
	for from := at; from < len(b); {
		i := bytes.IndexByte(b[from:], s[at])
		if i < 0 {
			return false
		}
		i += from
		if start := i - at; start+len(s) <= len(b) && string(b[start:start+len(s)]) == s {
			return true
		}
		from = i + 1
	}
	return false
}
