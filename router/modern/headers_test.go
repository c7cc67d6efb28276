package modern

import (
	"encoding/base64"
	"testing"
)

// TestEncodedEquals: the examples of the specification's Value Encoding table, and the
// conformance suite's edge cases (bad padding, bad characters, half a sentinel).
func TestEncodedEquals(t *testing.T) {
	for _, tc := range []struct {
		header, want string
		match, valid bool
	}{
		{"us-west1", "us-west1", true, true},
		{"=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界", true, true},
		{"=?base64?IHBhZGRlZCA=?=", " padded ", true, true},
		{"=?base64?bGluZTEKbGluZTI=?=", "line1\nline2", true, true},
		{"=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", true, true},
		{"=?base64?SGVsbG8=?=", "Hello", true, true},
		{"=?base64?SGVsbG8=?=", "Hell", false, true},
		{"=?base64?SGVsbG8=?=", "Hello!", false, true},
		{"=?base64?SGVsbG8?=", "Hello", false, false},          // padding missing
		{"=?base64?SGVs!!!bG8=?=", "Hello", false, false},      // not the alphabet
		{"=?base64?SGVsbG9=?=", "Hello", false, false},         // non-zero padding bits
		{"=?base64?SG==bG8=?=", "Hello", false, false},         // padding inside
		{"SGVsbG8=", "SGVsbG8=", true, true},                   // no sentinel: literal
		{"=?base64?SGVsbG8=", "=?base64?SGVsbG8=", true, true}, // half a sentinel: literal
		{"=?base64??=", "", true, true},
	} {
		match, valid := EncodedEquals([]byte(tc.header), []byte(tc.want))
		if match != tc.match || valid != tc.valid {
			t.Errorf("EncodedEquals(%q, %q) = %v, %v; want %v, %v", tc.header, tc.want, match, valid, tc.match, tc.valid)
		}
	}
}

func TestMatchParam(t *testing.T) {
	for _, tc := range []struct {
		header, body string
		match, valid bool
	}{
		{"us-west1", `"us-west1"`, true, true},
		{"=?base64?" + base64.StdEncoding.EncodeToString([]byte("Hello, 世界")) + "?=", `"Hello, \u4e16界"`, true, true},
		{"42", `42`, true, true},
		{"42", `42.0`, true, true},
		{"42.0", `42`, true, true},
		{"43", `42`, false, true},
		{"true", `true`, true, true},
		{"True", `true`, false, true},
		{"x\x7f", `"x"`, false, false},
		{"=?base64?!!?=", `1`, false, false},
	} {
		match, valid := MatchParam([]byte(tc.header), []byte(tc.body))
		if match != tc.match || valid != tc.valid {
			t.Errorf("MatchParam(%q, %s) = %v, %v; want %v, %v", tc.header, tc.body, match, valid, tc.match, tc.valid)
		}
	}
}

// TestAppendHeaderValue: the specification's encoding examples, and every encoded value
// compares equal to its source.
func TestAppendHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":           "us-west1",
		"Hello, 世界":          "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":           "=?base64?IHBhZGRlZCA=?=",
		"line1\nline2":       "=?base64?bGluZTEKbGluZTI=?=",
		"=?base64?literal?=": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
		"":                   "=?base64??=",
	} {
		got := AppendHeaderValue(nil, []byte(in))
		if string(got) != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
		if match, valid := EncodedEquals(got, []byte(in)); !match || !valid {
			t.Errorf("%q does not compare equal once encoded", in)
		}
	}
}
