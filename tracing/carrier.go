package tracing

import (
	"bytes"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
)

// carrier holds one W3C trace context: traceparent, tracestate and baggage. It is the
// propagation.TextMapCarrier the propagators read from and write into, whichever place
// (HTTP headers or params._meta) the values came from or go to.
type carrier struct {
	parent, state, baggage string
}

// keys are the members a carrier fills, in the order they are written.
var keys = [3]string{"traceparent", "tracestate", "baggage"}

// metaKey is the member name of params._meta, quoted as written without escapes.
var metaKey = []byte(`"_meta"`)

// maxValue bounds a value taken from a client: W3C Baggage allows 8192 bytes.
const maxValue = 8192

func (c *carrier) field(key string) *string {
	switch key {
	case "traceparent":
		return &c.parent
	case "tracestate":
		return &c.state
	case "baggage":
		return &c.baggage
	}
	return nil
}

// Get implements propagation.TextMapCarrier.
func (c *carrier) Get(key string) string {
	if f := c.field(key); f != nil {
		return *f
	}
	return ""
}

// Set implements propagation.TextMapCarrier; keys other than the three are dropped.
func (c *carrier) Set(key, value string) {
	if f := c.field(key); f != nil {
		*f = value
	}
}

// Keys implements propagation.TextMapCarrier.
func (c *carrier) Keys() []string { return keys[:] }

// empty reports whether c carries nothing to continue.
func (c *carrier) empty() bool { return c.parent == "" && c.baggage == "" }

// values are c's three values in the order of keys.
func (c *carrier) values() [3]string { return [3]string{c.parent, c.state, c.baggage} }

// fromMeta fills c from the members of params._meta, and reports whether there was a
// traceparent or baggage. Values that are not strings, or too long, are ignored, and so
// are keys written with escapes: a byte search rules out most requests, which have no
// _meta, before any walk.
func (c *carrier) fromMeta(params []byte) bool {
	if !bytes.Contains(params, metaKey) {
		return false
	}
	meta := codec.Member(params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		return false
	}
	var w codec.Walker
	w.Object(meta)
	for k, esc, v, ok := w.Next(); ok; k, esc, v, ok = w.Next() {
		if esc || len(v) < 2 || v[0] != '"' || len(v) > maxValue {
			continue
		}
		f := c.field(string(k)) // no allocation: the conversion is only compared
		if f == nil {
			continue
		}
		s, err := codec.Unquote(nil, v[1:len(v)-1])
		if err == nil {
			*f = string(s)
		}
	}
	return !c.empty()
}

// fromHeaders fills c from HTTP header values.
func (c *carrier) fromHeaders(parent, state, baggage []byte) {
	c.parent, c.state, c.baggage = string(parent), string(state), string(baggage)
}

// appendHeaders appends c's values as header lines, "name: value\n" each
// (upstream.WithTraceHeaders).
func (c *carrier) appendHeaders(dst []byte) []byte {
	for i, v := range c.values() {
		if v == "" {
			continue
		}
		dst = append(dst, keys[i]...)
		dst = append(dst, ':', ' ')
		dst = append(dst, v...)
		dst = append(dst, '\n')
	}
	return dst
}

// appendFields appends c's values as JSON members, without braces: what params._meta
// of a forwarded request gets.
func (c *carrier) appendFields(dst []byte) []byte {
	first := true
	for i, v := range c.values() {
		if v == "" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = codec.AppendString(dst, keys[i])
		dst = append(dst, ':')
		dst = codec.AppendString(dst, v)
	}
	return dst
}

// AppendMeta appends request msg with its params._meta carrying fields (members
// written by appendFields) in place of any traceparent, tracestate and baggage it had;
// the other members of _meta, and everything else, are kept byte for byte. A message
// that does not scan is appended unchanged.
func AppendMeta(dst, msg, fields []byte) []byte {
	var m codec.Message
	if codec.Scan(msg, &m) != nil || m.Kind != codec.KindRequest {
		return append(dst, msg...)
	}
	meta := codec.Member(m.Params, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		return modern.AppendWithMeta(dst, msg, &m, fields)
	}
	// Rebuild _meta: the fields first, then its members but the three.
	var w codec.Walker
	w.Object(meta)
	rebuilt := make([]byte, 0, len(meta)+len(fields)+2)
	rebuilt = append(rebuilt, '{')
	rebuilt = append(rebuilt, fields...)
	wrote := len(fields) > 0
	for k, esc, v, ok := w.Next(); ok; k, esc, v, ok = w.Next() {
		if isTraceKey(k, esc) {
			continue
		}
		if wrote {
			rebuilt = append(rebuilt, ',')
		}
		wrote = true
		rebuilt = append(rebuilt, '"')
		rebuilt = append(rebuilt, k...)
		rebuilt = append(rebuilt, '"', ':')
		rebuilt = append(rebuilt, v...)
	}
	if w.Err() != nil {
		return append(dst, msg...)
	}
	rebuilt = append(rebuilt, '}')
	return codec.AppendSplices(dst, msg, []codec.Splice{{Old: meta, New: rebuilt}})
}

// isTraceKey reports whether raw member name k is one of the three.
func isTraceKey(k []byte, esc bool) bool {
	for _, key := range keys {
		if esc && codec.KeyIs(k, key) || !esc && string(k) == key {
			return true
		}
	}
	return false
}
