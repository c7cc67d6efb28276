// Package wire holds the few JSON-RPC byte helpers mcpload needs on its hot path:
// appending requests, notifications and responses, scanning replies through the
// project's codec, and the rare deeper reads (error code, isError, nextCursor) that
// happen only on error or pagination paths.
package wire

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/bytedance/sonic"
	"github.com/mcprouter/mcprouter/codec"
)

// Scan scans one JSON-RPC message into m with the project codec (fully validated, no
// allocation); see codec.Scan.
func Scan(b []byte, m *codec.Message) error { return codec.Scan(b, m) }

// AppendRequest appends {"jsonrpc":"2.0","id":<id>,"method":<method>[,"params":<params>]}.
// params must be a JSON object or nil (omitted).
func AppendRequest(dst []byte, id uint64, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendUint(dst, id, 10)
	dst = append(dst, `,"method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendNotification appends a notification (a request without id).
func AppendNotification(dst []byte, method string, params []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = AppendString(dst, method)
	if params != nil {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// AppendResult appends a success response; id is the raw id token.
func AppendResult(dst, id, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"result":`...)
	dst = append(dst, result...)
	return append(dst, '}')
}

// AppendError appends an error response; a nil id is written as null.
func AppendError(dst, id []byte, code int, message string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if id == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = AppendString(dst, message)
	return append(dst, "}}"...)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

func appendQuoted[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendQuote appends s as a JSON string; see AppendString.
func AppendQuote(dst, s []byte) []byte { return appendQuoted(dst, s) }

// ErrorCode reads code and message from a raw JSON-RPC error object. ok is false when
// the object has no integer code.
func ErrorCode(errObj []byte) (code int, message string, ok bool) {
	n, err := sonic.Get(errObj, "code")
	if err != nil {
		return 0, "", false
	}
	c, err := n.Int64()
	if err != nil {
		return 0, "", false
	}
	if m, err := sonic.Get(errObj, "message"); err == nil {
		message, _ = m.String()
	}
	return int(c), message, true
}

var isErrorKey = []byte(`"isError"`)

// ToolError reports whether a tools/call result says "isError": true. The common case,
// a result without the key anywhere, costs one substring search.
func ToolError(result []byte) bool {
	if !bytes.Contains(result, isErrorKey) {
		return false
	}
	n, err := sonic.Get(result, "isError")
	if err != nil {
		return false
	}
	v, err := n.Bool()
	return err == nil && v
}

// NextCursor returns the raw JSON token of result.nextCursor (a quoted string), or nil
// when the result has no further page.
func NextCursor(result []byte) []byte {
	n, err := sonic.Get(result, "nextCursor")
	if err != nil || !n.Exists() {
		return nil
	}
	raw, err := n.Raw()
	if err != nil || len(raw) < 2 || raw[0] != '"' || raw == `""` {
		return nil
	}
	return []byte(raw)
}

// Field returns the raw JSON value of obj[key], or nil when absent.
func Field(obj []byte, key string) []byte {
	n, err := sonic.Get(obj, key)
	if err != nil || !n.Exists() {
		return nil
	}
	raw, err := n.Raw()
	if err != nil {
		return nil
	}
	return []byte(raw)
}

// StringField returns the decoded string value of obj[key], or "" when absent.
func StringField(obj []byte, key string) string {
	n, err := sonic.Get(obj, key)
	if err != nil {
		return ""
	}
	s, _ := n.String()
	return s
}

// AppendMember returns obj (a JSON object or nil) with the member "key":raw added at
// its end, appended to dst.
func AppendMember(dst, obj []byte, key string, raw []byte) []byte {
	end := len(obj) - 1
	for end >= 0 && obj[end] != '}' {
		end--
	}
	if end < 0 {
		dst = append(dst, '{')
	} else {
		dst = append(dst, obj[:end]...)
		if !emptyObject(obj[:end]) {
			dst = append(dst, ',')
		}
	}
	dst = AppendString(dst, key)
	dst = append(dst, ':')
	dst = append(dst, raw...)
	return append(dst, '}')
}

// emptyObject reports whether head (an object without its closing brace) has no members.
func emptyObject(head []byte) bool {
	for i := len(head) - 1; i >= 0; i-- {
		switch head[i] {
		case ' ', '\t', '\r', '\n':
		case '{':
			return true
		default:
			return false
		}
	}
	return true
}

func decodeRune[T string | []byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.RuneError, 1
}
