package server

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcprouter/mcprouter/internal/golden"
)

// TestPath: codec.Member (member_test.go there) followed through nested objects.
func TestPath(t *testing.T) {
	if got := path([]byte(`{"a":{"b":{"c":"d"}}}`), "a", "b", "c"); string(got) != `"d"` {
		t.Errorf("path: %s", got)
	}
	if got := path([]byte(`{"a":{"b":1}}`), "a", "x"); got != nil {
		t.Errorf("path to a missing member: %s", got)
	}
}

func TestForEach(t *testing.T) {
	cases := []struct {
		arr  string
		want []string
	}{
		{`[]`, nil},
		{` [ ] `, nil},
		{`[1]`, []string{"1"}},
		{`[1, "a,b", {"x":[1,2]}, [3], null]`, []string{"1", `"a,b"`, `{"x":[1,2]}`, "[3]", "null"}},
		{`{"a":1}`, nil},
		{`[1,`, nil}, // malformed: the walk stops where it is cut off
	}
	for _, c := range cases {
		var got []string
		forEach([]byte(c.arr), func(v []byte) bool { got = append(got, string(v)); return true })
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("forEach(%s) = %q, want %q", c.arr, got, c.want)
		}
	}
	n := 0
	forEach([]byte(`[1,2,3]`), func([]byte) bool { n++; return false })
	if n != 1 {
		t.Errorf("forEach did not stop: %d calls", n)
	}
}

func TestIntValue(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"42", 42, true}, {"-17", -17, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false},
		{"2.0", 2, true}, {"1e3", 1000, true}, {"2.5", 0, false}, {"1e400", 0, false},
		{`"1"`, 0, false}, {"", 0, false}, {"-", 0, false}, {"null", 0, false},
	}
	for _, c := range cases {
		got, ok := intValue([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("intValue(%s) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestStringValue(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{`"plain"`, "plain", true},
		{`"a\"b\\c\n\u00e9\ud83d\ude00"`, "a\"b\\c\né😀", true},
		{`""`, "", true},
		{`42`, "", false},
		{`"`, "", false},
		{`"bad \x"`, "", false},
	}
	for _, c := range cases {
		got, ok := stringValue([]byte(c.in))
		if ok != c.ok || got != c.want {
			t.Errorf("stringValue(%s) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestPeekNoAlloc guards the hot path: finding the echo text allocates nothing.
func TestPeekNoAlloc(t *testing.T) {
	params := []byte(`{"name":"echo","arguments":{"other":[1,{"a":"b"}],"text":"hello"},"_meta":{"progressToken":1}}`)
	allocs := testing.AllocsPerRun(100, func() {
		if !isString(member(member(params, "arguments"), "text")) {
			t.Fatal("text not found")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per peek", allocs)
	}
}

func seedsFrom(f *testing.F, dir string) {
	for _, file := range golden.Inputs(f, filepath.Join("testdata", dir, "*.json")) {
		f.Add(file.Data)
	}
}

// FuzzPeek checks the peek against encoding/json on valid objects, and that it neither
// panics nor loops on anything else.
func FuzzPeek(f *testing.F) {
	seedsFrom(f, "peek")
	f.Fuzz(func(t *testing.T, b []byte) {
		forEach(b, func(v []byte) bool {
			if json.Valid(b) && !json.Valid(v) {
				t.Fatalf("element %q of a valid array is not valid JSON", v)
			}
			return true
		})
		intValue(b)
		stringValue(b)
		for _, key := range []string{"text", "n", "a", "x"} {
			got := member(b, key)
			// Valid JSON is UTF-8 (RFC 8259), as codec.Scan checks before anything is
			// peeked; encoding/json lets invalid bytes in strings pass.
			if !json.Valid(b) || !utf8.Valid(b) {
				continue
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(b, &obj) != nil {
				if got != nil {
					t.Fatalf("member %q found in a non-object: %s", key, b)
				}
				continue
			}
			if _, present := obj[key]; present != (got != nil) {
				t.Fatalf("member %q: peek found %v, encoding/json %v, in %s", key, got != nil, present, b)
			}
			if got != nil && !json.Valid(got) {
				t.Fatalf("member %q value %q is not valid JSON", key, got)
			}
		}
	})
}
