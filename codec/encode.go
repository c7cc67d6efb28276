package codec

import (
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// decodeEscape decodes the backslash escape at raw[i] (raw[i] == '\\') and returns the
// rune and the number of bytes it took, or width 0 if the escape is invalid. A \u
// escape naming a lone surrogate decodes to U+FFFD, as encoding/json does.
func decodeEscape(raw []byte, i int) (rune, int) {
	if i+1 >= len(raw) {
		return 0, 0
	}
	switch raw[i+1] {
	case '"':
		return '"', 2
	case '\\':
		return '\\', 2
	case '/':
		return '/', 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(raw, i+2)
		if !ok {
			return 0, 0
		}
		if r < 0xD800 || r > 0xDFFF {
			return r, 6
		}
		if r <= 0xDBFF && i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
			if lo, ok := hex4(raw, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
			}
		}
		return utf8.RuneError, 6
	}
	return 0, 0
}

// hex4 decodes four hex digits at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	a, b, c, d := hexVal[raw[i]], hexVal[raw[i+1]], hexVal[raw[i+2]], hexVal[raw[i+3]]
	if a|b|c|d == 0xff {
		return 0, false
	}
	return rune(a)<<12 | rune(b)<<8 | rune(c)<<4 | rune(d), true
}

// encodeRune writes r as UTF-8 into p (len >= 4) and returns the length.
func encodeRune(p []byte, r rune) int { return utf8.EncodeRune(p, r) }

// Unquote appends to dst the decoded form of contents, the raw contents of a JSON
// string without its quotes, as Scan returns them for Method, Name, URI and Cursor when
// the matching *Escaped flag is set. A lone surrogate escape decodes to U+FFFD. Input
// that is not valid string contents (bad escape, raw quote or control character,
// invalid UTF-8) gives a parse *Error whose Offset is relative to contents.
func Unquote(dst, contents []byte) ([]byte, error) {
	i := 0
	for i < len(contents) {
		// Copy the run of plain bytes in one append.
		j := i
		for j < len(contents) && plain[contents[j]] {
			j++
		}
		dst = append(dst, contents[i:j]...)
		i = j
		if i >= len(contents) {
			break
		}
		c := contents[i]
		switch {
		case c == '\\':
			r, w := decodeEscape(contents, i)
			if w == 0 {
				return dst, parseError(reasonBadEscape, i)
			}
			dst = utf8.AppendRune(dst, r)
			i += w
		case c == '"':
			return dst, parseError(reasonUnexpected, i)
		case c < 0x20:
			return dst, parseError(reasonControl, i)
		default:
			n := utf8Len(contents, i)
			if n == 0 {
				return dst, parseError(reasonBadUTF8, i)
			}
			dst = append(dst, contents[i:i+n]...)
			i += n
		}
	}
	return dst, nil
}

const hexDigits = "0123456789abcdef"

// appendEscaped appends s escaped as JSON string contents (no quotes): '"', '\\' and
// control characters are escaped (\n, \r, \t, \b, \f or \u00XX), U+2028 and U+2029
// become \u2028 and \u2029 (as encoding/json writes them, so the output is also safe
// inside JavaScript), and each byte of invalid UTF-8 becomes \ufffd. Runs of plain bytes
// are found eight at a time and copied in one append.
func appendEscaped[S string | []byte](dst []byte, s S) []byte {
	i, last := 0, 0
	for i < len(s) {
		for i+8 <= len(s) {
			if m := strSpecial(load64(s, i)); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x80 {
			n := utf8LenOf(s, i)
			switch {
			case n == 0:
				dst = append(dst, s[last:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				last = i
			case n == 3 && c == 0xE2 && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9):
				dst = append(dst, s[last:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, hexDigits[s[i+2]&0xf])
				i += 3
				last = i
			default:
				i += n
			}
			continue
		}
		dst = append(dst, s[last:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		last = i
	}
	return append(dst, s[last:]...)
}

// load64 loads s[i:i+8] as a little-endian word (the compiler merges the byte loads).
func load64[S string | []byte](s S, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// utf8LenOf is utf8Len for a string or a byte slice.
func utf8LenOf[S string | []byte](s S, i int) int {
	c := s[i]
	switch {
	case c < 0xC2:
		return 0
	case c < 0xE0:
		if i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			return 2
		}
	case c < 0xF5:
		n := 3 + int(c>>4&1) // E0-EF start three bytes, F0-F4 four
		if i+n > len(s) {
			return 0
		}
		// The second byte's range rules out overlong forms (after E0, F0),
		// surrogates (ED) and code points beyond U+10FFFF (F4).
		lo, hi := byte(0x80), byte(0xBF)
		switch c {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
		if c1 := s[i+1]; c1 >= lo && c1 <= hi && s[i+2]&0xC0 == 0x80 && (n == 3 || s[i+3]&0xC0 == 0x80) {
			return n
		}
	}
	return 0
}

// AppendString appends s to dst as a JSON string: quoted and escaped so that any Go
// string, even invalid UTF-8, yields valid JSON that decodes back to s (invalid bytes
// become U+FFFD).
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// AppendQuote is AppendString for a byte slice.
func AppendQuote(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendID appends a raw id token, or null for a nil id.
func appendID(dst, id []byte) []byte {
	if id == nil {
		return append(dst, "null"...)
	}
	return append(dst, id...)
}

// AppendResult appends a success response {"jsonrpc":"2.0","id":<id>,"result":<result>}.
// id and result are raw JSON, written as given (the caller vouches for them: typically
// views from Scan). A nil id writes null; a nil result writes {} (the empty result MCP
// uses for ping and the like).
func AppendResult(dst, id, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"result":`...)
	if result == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, result...)
	}
	return append(dst, '}')
}

// AppendError appends an error response
// {"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":<message>,"data":<data>}}.
// A nil id writes null (the answer to a message whose id could not be read); message
// is escaped; data is raw JSON, omitted when nil.
func AppendError(dst, id []byte, code int, message string, data []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, message)
	if data != nil {
		dst = append(dst, `,"data":`...)
		dst = append(dst, data...)
	}
	return append(dst, '}', '}')
}

// AppendRequest appends a request
// {"jsonrpc":"2.0","id":<id>,"method":<method>,"params":<params>}; id and params are raw
// JSON, params omitted when nil.
func AppendRequest(dst, id []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = appendID(dst, id)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendNotification appends a notification
// {"jsonrpc":"2.0","method":<method>,"params":<params>}; params is raw JSON, omitted
// when nil.
func AppendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}
