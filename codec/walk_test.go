package codec

import (
	"errors"
	"strings"
	"testing"
)

func TestWalkerObject(t *testing.T) {
	var w Walker
	in := []byte(` { "a" : 1, "b\u0063":{"x":[1,2]} ,"d":"s" } `)
	if !w.Object(in) {
		t.Fatal("not an object")
	}
	var got []string
	for key, esc, val, ok := w.Next(); ok; key, esc, val, ok = w.Next() {
		k := string(key)
		if esc {
			d, _ := Unquote(nil, key)
			k = string(d)
		}
		got = append(got, k+"="+string(val))
	}
	want := []string{`a=1`, `bc={"x":[1,2]}`, `d="s"`}
	if len(got) != len(want) || w.Err() != nil {
		t.Fatalf("got %q (err %v), want %q", got, w.Err(), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func TestWalkerArray(t *testing.T) {
	var w Walker
	if !w.Array([]byte(`[ "a", {"k":null}, [] ,true]`)) {
		t.Fatal("not an array")
	}
	n := 0
	for key, _, _, ok := w.Next(); ok; key, _, _, ok = w.Next() {
		if key != nil {
			t.Errorf("array element with a key %q", key)
		}
		n++
	}
	if n != 4 || w.Err() != nil {
		t.Fatalf("%d elements, err %v", n, w.Err())
	}
	for _, empty := range []string{`[]`, ` [ ] `} {
		if !w.Array([]byte(empty)) {
			t.Fatalf("%s: not an array", empty)
		}
		if _, _, _, ok := w.Next(); ok {
			t.Errorf("%s: an element", empty)
		}
	}
}

func TestWalkerMalformed(t *testing.T) {
	var w Walker
	if w.Object([]byte(`[1]`)) || w.Array([]byte(`{}`)) || w.Object(nil) {
		t.Fatal("wrong kind accepted")
	}
	if _, _, _, ok := w.Next(); ok {
		t.Fatal("Next after a refused start")
	}
	for _, in := range []string{`{"a":}`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `{"a":1`, `{"a":"\x01"}`, `[1 2]`} {
		w.Object([]byte(in))
		if in[0] == '[' {
			w.Array([]byte(in))
		}
		for _, _, _, ok := w.Next(); ok; _, _, _, ok = w.Next() {
		}
		if err := w.Err(); !errors.Is(err, ErrParse) {
			t.Errorf("%s: err %v, want a parse error", in, err)
		}
	}
}

func TestAllocsWalker(t *testing.T) {
	skipUnderRace(t)
	in := readTestdata(t, "bench/call199.json")
	var m Message
	if err := Scan(in, &m); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() {
		var w Walker
		w.Object(m.Params)
		for _, _, _, ok := w.Next(); ok; _, _, _, ok = w.Next() {
		}
	}); n != 0 {
		t.Errorf("%v allocs per walk", n)
	}
}

// walkDeep walks v with Key, Enter and Exit all the way down, stopping each child after
// stop members or elements (the rest is left to Exit), and returns the values Exit
// and Value returned, in order.
func walkDeep(t *testing.T, w *Walker, stop int, out []string) []string {
	for n := 0; n < stop; n++ {
		if w.close == '}' {
			if _, _, ok := w.Key(); !ok {
				return out
			}
		}
		var c Walker
		if w.Enter(&c) {
			out = walkDeep(t, &c, stop, out)
			v, ok := w.Exit(&c)
			if !ok {
				return out
			}
			out = append(out, string(v))
			continue
		}
		v, ok := w.Value()
		if !ok {
			return out
		}
		out = append(out, string(v))
	}
	return out
}

func TestWalkerEnter(t *testing.T) {
	in := []byte(`{"a":{"b":[1,{"c":"d"},[]],"e":{}},"f":[ {"g":null} ],"h":true}`)
	for stop, want := range map[int]string{
		0:   "",
		1:   `1 [1,{"c":"d"},[]] {"b":[1,{"c":"d"},[]],"e":{}}`,
		100: `1 "d" {"c":"d"} [] [1,{"c":"d"},[]] {} {"b":[1,{"c":"d"},[]],"e":{}} null {"g":null} [ {"g":null} ] true`,
	} {
		var w Walker
		w.Object(in)
		got := strings.Join(walkDeep(t, &w, stop, nil), " ")
		if got != want {
			t.Errorf("stop %d:\n got %s\nwant %s", stop, got, want)
		}
		if w.Err() != nil {
			t.Errorf("stop %d: %v", stop, w.Err())
		}
	}
	// A parse error inside a child reaches the parent.
	var w Walker
	w.Object([]byte(`{"a":{"b":tru},"c":1}`))
	walkDeep(t, &w, 100, nil)
	if !errors.Is(w.Err(), ErrParse) {
		t.Errorf("err %v, want a parse error", w.Err())
	}
	if w.Peek() != 0 {
		t.Error("Peek after the end")
	}
}

// TestWalkerPass: Pass moves past the member whose value is the view it is given (as
// Scan recorded _meta) and the walk goes on from there as after Value; any other view,
// of other bytes or of the same bytes elsewhere, leaves the walker where it was.
func TestWalkerPass(t *testing.T) {
	in := []byte(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"k":[1,2]} , "z":true}`)
	var m Message
	if err := Scan([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+string(in)+`}`), &m); err != nil || m.Meta == nil {
		t.Fatalf("scan: %v, meta %q", err, m.Meta)
	}
	in = m.Params
	var w Walker
	w.Object(in)
	var got []string
	for key, _, ok := w.Key(); ok; key, _, ok = w.Key() {
		if w.Pass([]byte(`{"k":[1,2]}`)) || w.On(m.Params) {
			t.Fatalf("%s: Pass or On took a view of other bytes", key)
		}
		if string(key) == "_meta" {
			if !w.On(m.Meta) || !w.Pass(m.Meta) {
				t.Fatal("_meta: Pass did not take the view Scan recorded")
			}
			got = append(got, "_meta passed")
			continue
		}
		if w.Pass(m.Meta) {
			t.Fatalf("%s: Pass took _meta's view on another member", key)
		}
		v, _ := w.Value()
		got = append(got, string(key)+"="+string(v))
	}
	want := `name="echo" arguments={"text":"hello"} _meta passed z=true`
	if s := strings.Join(got, " "); s != want || w.Err() != nil {
		t.Fatalf("got %s (err %v), want %s", s, w.Err(), want)
	}
	if w.Pass(m.Meta) || w.On(m.Meta) {
		t.Error("Pass or On after the end")
	}
}
