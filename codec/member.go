package codec

import "bytes"

// Member returns the raw value of the first member named key of the JSON object obj, or
// nil when obj is not an object, has no such member, or is malformed before it. Keys
// are compared after decoding their escapes. It walks obj in place with a Walker, so it
// builds nothing and allocates nothing (but for a key of more than 96 bytes written with
// escapes): the layers above use it to read one member of a value Scan returned.
func Member(obj []byte, key string) []byte {
	var w Walker
	if !w.Object(obj) {
		return nil
	}
	for k, esc, v, ok := w.Next(); ok; k, esc, v, ok = w.Next() {
		if esc && KeyIs(k, key) || !esc && string(k) == key {
			return v
		}
	}
	return nil
}

// KeyIs reports whether the raw contents of a member name (escapes intact, as Walker
// returns them) spell key once decoded.
func KeyIs(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	var buf [96]byte
	dec, err := Unquote(buf[:0], raw)
	return err == nil && string(dec) == key
}
