package modern

import (
	"encoding/base64"
	"math"
	"net/http"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// Headers are the raw values of a POST's standard MCP headers (nil when absent), as the
// transport peeks them: MCP-Protocol-Version, Mcp-Method and Mcp-Name.
type Headers struct {
	Version []byte
	Method  []byte
	Name    []byte
}

var (
	rejectHeaderMissing = mismatch("a required header (MCP-Protocol-Version, Mcp-Method, or Mcp-Name for tools/call, resources/read and prompts/get) is missing")
	rejectVersionHeader = mismatch("MCP-Protocol-Version does not match _meta." + KeyProtocolVersion)
	rejectMethodHeader  = mismatch("Mcp-Method does not match the body's method")
	rejectNameHeader    = mismatch("Mcp-Name does not match the body's params.name or params.uri")
	rejectHeaderChars   = mismatch("a header value has invalid characters or invalid Base64")
)

// mismatch is the -32020 rejection (HTTP 400) of headers that disagree with the body.
func mismatch(why string) Reject {
	return Reject{Code: codec.CodeHeaderMismatch, Status: http.StatusBadRequest, Message: "Header mismatch: " + why}
}

// CheckHeaders judges the headers of a request claiming the modern era against its body
// on their own (Check calls it between the _meta and version checks; a transport that
// routes on the headers before reading the body calls it once the body is scanned).
func CheckHeaders(h *Headers, m *codec.Message, meta *Meta) Reject {
	var mb [64]byte
	method := decoded(mb[:0], m.Method, m.Flags&codec.MethodEscaped != 0)
	if r := checkHeaders(h, m, meta, method, LookupMethod(method)); r != nil {
		return *r
	}
	return Reject{}
}

// checkHeaders is CheckHeaders for the request's method, decoded, and its table entry
// (nil: none). It returns the rejection, nil when none: one of the package's, not a copy
// (as headerAgrees).
func checkHeaders(h *Headers, m *codec.Message, meta *Meta, method []byte, def *Method) *Reject {
	if r := headerAgrees(h.Version, meta.Version, meta.Version != nil, &rejectVersionHeader); r != nil {
		return r
	}
	if r := headerAgrees(h.Method, method, true, &rejectMethodHeader); r != nil {
		return r
	}
	var body []byte
	var escaped bool
	if def != nil {
		switch def.NameFrom {
		case NameParam:
			body, escaped = m.Name, m.Flags&codec.NameEscaped != 0
		case NameURI:
			body, escaped = m.URI, m.Flags&codec.URIEscaped != 0
		}
	}
	nh, ok := headerValue(h.Name)
	switch {
	case !ok:
		return &rejectHeaderChars
	case body == nil && nh == nil:
		return nil
	case nh == nil:
		return &rejectHeaderMissing // the body names a tool, prompt or resource
	case body == nil:
		if def != nil && def.NameFrom != NameNone {
			return &rejectNameHeader // a name in the header and none in the body
		}
		return nil // Mcp-Name on a method without one: nothing to compare
	}
	var bb [256]byte
	bodyValue := decoded(bb[:0], body, escaped)
	match, valid := EncodedEquals(nh, bodyValue)
	switch {
	case !valid:
		return &rejectHeaderChars
	case !match:
		return &rejectNameHeader
	}
	return nil
}

// headerAgrees judges a header every modern request carries (MCP-Protocol-Version,
// Mcp-Method): present, well formed, and, when compare is set, equal to what the body
// says (body); wrong is the rejection when it is not. It returns the rejection, nil
// when none: one of the package's, not a copy (a Reject is 64 bytes, and the two
// headers of every request were judged by value).
func headerAgrees(raw, body []byte, compare bool, wrong *Reject) *Reject {
	v, ok := headerValue(raw)
	switch {
	case !ok:
		return &rejectHeaderChars
	case v == nil:
		return &rejectHeaderMissing
	case compare && string(v) != string(body):
		return wrong
	}
	return nil
}

// headerValue trims optional whitespace (RFC 9110) around a header value and checks its
// characters: visible ASCII, space and tab. nil stays nil (absent); ok is false for a
// value with other bytes.
func headerValue(v []byte) (out []byte, ok bool) {
	if v == nil {
		return nil, true
	}
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	for _, c := range v {
		if (c < 0x20 && c != '\t') || c > 0x7e {
			return nil, false
		}
	}
	return v, true
}

// strictB64 is standard Base64 that refuses non-zero padding bits, made once (Strict
// returns a new *Encoding).
var strictB64 = base64.StdEncoding.Strict()

const (
	b64Prefix = "=?base64?"
	b64Suffix = "?="
)

// EncodedEquals compares a header value in the revision's encoding (plain, or
// =?base64?...?= with standard padded Base64 of the UTF-8 bytes) with the decoded body
// value want. valid is false when the value uses the Base64 form with invalid Base64. A
// value with only the prefix or only the suffix is literal. It allocates nothing: the
// Base64 is decoded and compared one quantum at a time.
func EncodedEquals(header, want []byte) (match, valid bool) {
	if len(header) < len(b64Prefix)+len(b64Suffix) || string(header[:len(b64Prefix)]) != b64Prefix ||
		string(header[len(header)-len(b64Suffix):]) != b64Suffix {
		return string(header) == string(want), true
	}
	enc := header[len(b64Prefix) : len(header)-len(b64Suffix)]
	if len(enc)%4 != 0 {
		return false, false
	}
	var q [3]byte
	match = true
	pos := 0
	for i := 0; i < len(enc); i += 4 {
		last := i+4 == len(enc)
		if !last && (enc[i+2] == '=' || enc[i+3] == '=') {
			return false, false // padding only at the end
		}
		for _, c := range enc[i : i+4] {
			if c == '\r' || c == '\n' {
				return false, false // the decoder would skip them: a header has none
			}
		}
		n, err := strictB64.Decode(q[:], enc[i:i+4])
		if err != nil {
			return false, false
		}
		if match && (pos+n > len(want) || string(q[:n]) != string(want[pos:pos+n])) {
			match = false // keep going: the rest must still be valid Base64
		}
		pos += n
	}
	return match && pos == len(want), true
}

// MatchParam compares an Mcp-Param-{Name} header with the body value it mirrors (raw
// JSON: a string, an integer or a boolean); integers compare numerically, so 42 and 42.0
// match. valid is false for invalid characters or Base64.
func MatchParam(header, body []byte) (match, valid bool) {
	hv, ok := headerValue(header)
	if !ok || hv == nil {
		return false, ok
	}
	if s, isStr := stringContents(body); isStr {
		var bb [256]byte
		return EncodedEquals(hv, decoded(bb[:0], s, hasBackslash(s)))
	}
	var pb [64]byte
	plain, ok := plainValue(pb[:0], hv)
	if !ok {
		return false, false
	}
	switch string(body) {
	case "true", "false":
		return string(plain) == string(body), true
	}
	a, errA := strconv.ParseFloat(string(plain), 64)
	b, errB := strconv.ParseFloat(string(body), 64)
	if errA != nil || errB != nil || math.IsNaN(a) {
		return false, true
	}
	return a == b, true
}

// plainValue decodes the Base64 form of a header value into buf, or returns it as is.
func plainValue(buf, v []byte) ([]byte, bool) {
	if len(v) < len(b64Prefix)+len(b64Suffix) || string(v[:len(b64Prefix)]) != b64Prefix ||
		string(v[len(v)-len(b64Suffix):]) != b64Suffix {
		return v, true
	}
	enc := v[len(b64Prefix) : len(v)-len(b64Suffix)]
	n := base64.StdEncoding.DecodedLen(len(enc))
	if n > cap(buf) {
		buf = make([]byte, 0, n)
	}
	out := buf[:n]
	k, err := strictB64.Decode(out, enc)
	if err != nil {
		return nil, false
	}
	return out[:k], true
}

func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// AppendHeaderValue appends value as the revision's header encoding asks (Value
// Encoding): as is when it is plain visible ASCII without leading or trailing space and
// does not look like the sentinel, else =?base64?...?=. The router writes Mcp-Name this
// way when it forwards to a 2026-07-28 backend under a name it rewrote (a prefix
// removed).
func AppendHeaderValue(dst, value []byte) []byte {
	plain := len(value) > 0 && value[0] != ' ' && value[0] != '\t' &&
		value[len(value)-1] != ' ' && value[len(value)-1] != '\t'
	for _, c := range value {
		if c < 0x20 || c > 0x7e {
			plain = false
			break
		}
	}
	if plain && !(len(value) >= len(b64Prefix)+len(b64Suffix) && string(value[:len(b64Prefix)]) == b64Prefix &&
		string(value[len(value)-len(b64Suffix):]) == b64Suffix) {
		return append(dst, value...)
	}
	dst = append(dst, b64Prefix...)
	dst = base64.StdEncoding.AppendEncode(dst, value)
	return append(dst, b64Suffix...)
}
