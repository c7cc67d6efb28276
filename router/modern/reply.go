package modern

import (
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
