package codec

import "testing"

func TestMember(t *testing.T) {
	cases := []struct {
		obj, key, want string
		found          bool
	}{
		{`{"text":"hello","n":42}`, "text", `"hello"`, true},
		{`{"text":"hello","n":42}`, "n", `42`, true},
		{`{"text":"hello","n":42}`, "missing", ``, false},
		{` { "a" : [1,{"text":"inner"}] , "text" : "outer" } `, "text", `"outer"`, true},
		{`{"a":"}\"","text":true}`, "text", `true`, true},
		{`{"t\u0065xt":1,"text":2}`, "text", `1`, true}, // first match, escapes decoded
		{`{"text":{"deep":[{"x":"]"}]}}`, "text", `{"deep":[{"x":"]"}]}`, true},
		{`{"n":-1.5e3}`, "n", `-1.5e3`, true},
		{`{}`, "text", ``, false},
		{`[1,2]`, "text", ``, false},
		{`"text"`, "text", ``, false},
		{``, "text", ``, false},
		{`{"text"`, "text", ``, false},
		{`{"text":`, "text", ``, false},
		{`{"text":"unterminated`, "text", ``, false},
		{`{"a":1 "text":2}`, "text", ``, false},
	}
	for _, c := range cases {
		got := Member([]byte(c.obj), c.key)
		if (got != nil) != c.found || string(got) != c.want {
			t.Errorf("Member(%s, %q) = %q (found %v), want %q (%v)", c.obj, c.key, got, got != nil, c.want, c.found)
		}
	}
}

func TestKeyIs(t *testing.T) {
	cases := []struct {
		raw, key string
		want     bool
	}{
		{`text`, "text", true},
		{`t\u0065xt`, "text", true},
		{`t\"xt`, `t"xt`, true},
		{`text`, "tex", false},
		{`t\u0065xt`, "t\\u0065xt", false},
		{`bad \x`, "bad x", false},
	}
	for _, c := range cases {
		if got := KeyIs([]byte(c.raw), c.key); got != c.want {
			t.Errorf("KeyIs(%s, %q) = %v, want %v", c.raw, c.key, got, c.want)
		}
	}
}

func TestAllocsMember(t *testing.T) {
	skipUnderRace(t)
	params := []byte(`{"name":"echo","arguments":{"other":[1,{"a":"b"}],"t\u0065xt":"hello"}}`)
	if n := testing.AllocsPerRun(100, func() {
		if Member(Member(params, "arguments"), "text") == nil {
			t.Fatal("text not found")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per Member", n)
	}
}

// TestScanStateMember: Scan flags a params.requestState member however its key is
// written, and no member of that name deeper in params or outside it.
func TestScanStateMember(t *testing.T) {
	cases := []struct {
		msg  string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"requestState":"s"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"request\u0053tate":"s","name":"t"}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requestState":null}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"requestState":"s"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"requestState":"s"}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"requestState"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","requestState":"s"}`, false},
	}
	for _, c := range cases {
		var m Message
		if err := Scan([]byte(c.msg), &m); err != nil {
			t.Fatalf("%s: %v", c.msg, err)
		}
		if got := m.Flags&StateMember != 0; got != c.want {
			t.Errorf("%s: StateMember %v, want %v", c.msg, got, c.want)
		}
	}
}
