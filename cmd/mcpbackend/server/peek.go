package server

import (
	"bytes"
	"math"
	"strconv"

	"github.com/mcprouter/mcprouter/codec"
)

// A peek over JSON that codec.Scan has already validated: find one member of an object
// by skipping the others, without building anything (codec.Member and codec.Walker, the
// walk Scan itself does). Arguments of MCP calls are small flat objects, so walking them
// costs less than any parser (see BenchmarkPeekArguments, which compares it with
// sonic.Get).
//
// The functions never panic and always terminate on arbitrary input (they are fuzzed),
// but they only promise correct answers on valid JSON; malformed input yields nil or
// false.

// member returns the raw value of the first member named key of the JSON object obj, or
// nil when obj is not an object or has no such member.
func member(obj []byte, key string) []byte { return codec.Member(obj, key) }

// path follows member names through nested objects.
func path(obj []byte, keys ...string) []byte {
	for _, k := range keys {
		if obj = codec.Member(obj, k); obj == nil {
			return nil
		}
	}
	return obj
}

// forEach calls fn with each element of the JSON array arr until fn returns false.
func forEach(arr []byte, fn func(v []byte) bool) {
	var w codec.Walker
	w.Array(arr)
	for _, _, v, ok := w.Next(); ok && fn(v); _, _, v, ok = w.Next() {
	}
}

// isString reports whether raw is a JSON string token.
func isString(raw []byte) bool { return len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' }

// appendStringValue appends the decoded contents of the JSON string token raw to dst;
// ok is false when raw is not a string.
func appendStringValue(dst, raw []byte) ([]byte, bool) {
	if !isString(raw) {
		return dst, false
	}
	contents := raw[1 : len(raw)-1]
	if bytes.IndexByte(contents, '\\') < 0 {
		return append(dst, contents...), true
	}
	out, err := codec.Unquote(dst, contents)
	return out, err == nil
}

// stringValue decodes the JSON string token raw; ok is false when raw is not a string.
func stringValue(raw []byte) (string, bool) {
	b, ok := appendStringValue(nil, raw)
	if !ok {
		return "", false
	}
	return string(b), true
}

// intValue reads a JSON number token holding an integer (1e3 and 2.0 count; 2.5 does
// not). ok is false for anything else, including values beyond int64.
func intValue(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 32 {
		return 0, false
	}
	neg, i := false, 0
	if raw[0] == '-' {
		neg, i = true, 1
	}
	var u uint64
	simple := i < len(raw)
	for ; i < len(raw); i++ {
		c := raw[i]
		if c < '0' || c > '9' {
			simple = false // a fraction or exponent: let ParseFloat judge
			break
		}
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if simple {
		switch {
		case !neg && u <= math.MaxInt64:
			return int64(u), true
		case neg && u <= 1<<63:
			return int64(-u), true // -(1<<63) wraps to MinInt64, as it should
		}
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != math.Trunc(f) || f >= 1<<63 || f < -(1<<63) {
		return 0, false
	}
	return int64(f), true
}
