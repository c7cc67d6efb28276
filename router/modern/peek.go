package modern

import (
	"bytes"

	"github.com/mcprouter/mcprouter/codec"
)

// A walk over JSON that codec.Scan has already validated: members of an object are found
// by skipping the others, nothing is built. The functions never panic and always end on
// arbitrary input (they are fuzzed), but promise correct answers on valid JSON only;
// malformed input yields nil or false.

// eachMember calls fn with the raw key contents (escapes intact) and the raw value of
// each member of the JSON object obj, until fn returns false. It reports whether obj is
// an object.
func eachMember(obj []byte, fn func(key, val []byte) bool) bool {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i++
	for { // each turn consumes one member or ends
		i = skipWS(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return true // '}' or malformed
		}
		end := skipString(obj, i)
		if end < 0 {
			return true
		}
		key := obj[i+1 : end-1]
		i = skipWS(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return true
		}
		i = skipWS(obj, i+1)
		vEnd := skipValue(obj, i)
		if vEnd < 0 {
			return true
		}
		if !fn(key, obj[i:vEnd]) {
			return true
		}
		i = skipWS(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			return true
		}
		i++
	}
}

// member returns the raw value of the first member named key of the object obj, or nil.
func member(obj []byte, key string) []byte {
	var found []byte
	eachMember(obj, func(k, v []byte) bool {
		if keyIs(k, key) {
			found = v
			return false
		}
		return true
	})
	return found
}

// keyIs compares raw key contents with key, decoding escapes if any.
func keyIs(raw []byte, key string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	var buf [96]byte
	dec, err := codec.Unquote(buf[:0], raw)
	return err == nil && string(dec) == key
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

// skipString returns the index just past the string starting at b[i] == '"', or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := skipString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case ',', ':', '}', ']':
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}
