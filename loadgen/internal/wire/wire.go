// Package wire holds the JSON-RPC byte helpers mcpload needs beyond the project codec
// (which does the scanning and the encoding): a request with an integer id, a member
// appended to an object, and the rare deeper reads (error code, isError, nextCursor,
// a field of a result) that happen only on error, pagination or handshake paths.
package wire

import (
	"bytes"
	"strconv"

	"github.com/bytedance/sonic"
	"github.com/mcprouter/mcprouter/codec"
)

// AppendRequest appends {"jsonrpc":"2.0","id":<id>,"method":<method>[,"params":<params>]}
// with the integer id mcpload numbers its calls with: codec.AppendRequest takes the id
// as a raw token, which is formatted here on the stack. params must be a JSON object or
// nil (omitted).
func AppendRequest(dst []byte, id uint64, method string, params []byte) []byte {
	var tok [20]byte // the longest uint64
	return codec.AppendRequest(dst, strconv.AppendUint(tok[:0], id, 10), method, params)
}

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

// FirstText returns the text of the first content item of a tools/call result (the
// message of a tool error), or "".
func FirstText(result []byte) string {
	n, err := sonic.Get(result, "content", 0, "text")
	if err != nil {
		return ""
	}
	s, _ := n.String()
	return s
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
	dst = codec.AppendString(dst, key)
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
