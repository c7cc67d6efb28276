package modern

import "github.com/mcprouter/mcprouter/codec"

// A walk over JSON that codec.Scan has already validated, in place with codec.Walker
// (the walk Scan itself does): members of an object are found by skipping the others,
// nothing is built. The functions never panic and always end on arbitrary input (they
// are fuzzed), but promise correct answers on valid JSON only; malformed input yields nil
// or false.

// eachMember calls fn with the raw key contents (escapes intact: compare them with
// codec.KeyIs) and the raw value of each member of the JSON object obj, until fn returns
// false. It reports whether obj is an object.
func eachMember(obj []byte, fn func(key, val []byte) bool) bool {
	var w codec.Walker
	if !w.Object(obj) {
		return false
	}
	for k, _, v, ok := w.Next(); ok && fn(k, v); k, _, v, ok = w.Next() {
	}
	return true
}

// eachArray calls fn with each element of the JSON array arr until fn returns false.
func eachArray(arr []byte, fn func(v []byte) bool) {
	var w codec.Walker
	w.Array(arr)
	for _, _, v, ok := w.Next(); ok && fn(v); _, _, v, ok = w.Next() {
	}
}

// isObject reports whether raw is a JSON object.
func isObject(raw []byte) bool { return len(raw) >= 2 && raw[0] == '{' }

// stringContents returns the contents of the JSON string token raw (escapes intact) and
// whether raw is a string.
func stringContents(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// keyIs reports whether a member name as codec.Walker returns it (raw contents, esc:
// it has escapes) spells key once decoded. A plain name is compared as it is: the
// walks here compare each name with several keys, and codec.KeyIs looked for a
// backslash in it for every one of them (a fifth of reading a reply).
func keyIs(raw []byte, esc bool, key string) bool {
	if !esc {
		return string(raw) == key
	}
	return codec.KeyIs(raw, key)
}
