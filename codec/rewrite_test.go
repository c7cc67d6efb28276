package codec

import (
	"errors"
	"testing"
)

func mustScan(t testing.TB, s string) ([]byte, *Message) {
	t.Helper()
	b := []byte(s)
	m := new(Message)
	if err := Scan(b, m); err != nil {
		t.Fatal(err)
	}
	return b, m
}

func TestReplaceID(t *testing.T) {
	tests := []struct{ in, id, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"x"}`, `"r:123456"`, `{"jsonrpc":"2.0","id":"r:123456","method":"x"}`},
		{`{"jsonrpc":"2.0","id":"long-client-id","method":"x"}`, `9`, `{"jsonrpc":"2.0","id":9,"method":"x"}`},
		{`{ "id" : "a" , "jsonrpc":"2.0","result":{}}`, `"b"`, `{ "id" : "b" , "jsonrpc":"2.0","result":{}}`},
		{`{"jsonrpc":"2.0","method":"n"}`, `1`, `{"jsonrpc":"2.0","method":"n"}`},
	}
	for _, tt := range tests {
		msg, m := mustScan(t, tt.in)
		got := AppendReplaceID([]byte("pre"), msg, m, []byte(tt.id))
		if string(got) != "pre"+tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
}

func TestReplaceProgressToken(t *testing.T) {
	msg, m := mustScan(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"client-tok"}}}`)
	got := AppendReplaceProgressToken(nil, msg, m, []byte(`77`))
	want := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":77}}}`
	if string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var m2 Message
	if err := Scan(got, &m2); err != nil || string(m2.ProgressToken) != "77" {
		t.Fatalf("rescan: %v %s", err, m2.ProgressToken)
	}
	msg, m = mustScan(t, `{"jsonrpc":"2.0","id":1,"method":"x"}`)
	if got := AppendReplaceProgressToken(nil, msg, m, []byte(`1`)); string(got) != string(msg) {
		t.Fatalf("no token: got %s", got)
	}
}

func TestSplices(t *testing.T) {
	msg, m := mustScan(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"srv__search","_meta":{"progressToken":"t"}}}`)
	// Any order: strip the name prefix, replace the token and the id.
	sp := []Splice{
		{Old: m.ProgressToken, New: []byte(`42`)},
		{Old: m.Name[:len("srv__")]},
		{Old: m.ID, New: []byte(`"x:1"`)},
		{Old: m.Params[len(m.Params)-1:][:0], New: []byte(`,"extra":true`)},
	}
	got := AppendSplices(nil, msg, sp)
	want := `{"jsonrpc":"2.0","id":"x:1","method":"tools/call","params":{"name":"search","_meta":{"progressToken":42},"extra":true}}`
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	// Insert at the very end of a full-capacity message.
	full := msg[:len(msg):len(msg)]
	if got := AppendSplices(nil, full, []Splice{{Old: full[len(full):], New: []byte("\n")}}); string(got) != string(msg)+"\n" {
		t.Fatalf("insert at end: %q", got)
	}
	// Two inserts at one position keep their order.
	if got := AppendSplices(nil, msg[:3], []Splice{{Old: msg[1:1], New: []byte("A")}, {Old: msg[1:1], New: []byte("B")}}); string(got) != `{AB"j` {
		t.Fatalf("ordered inserts: %q", got)
	}
}

func TestSplicesMisuse(t *testing.T) {
	msg, m := mustScan(t, `{"jsonrpc":"2.0","id":1,"method":"x"}`)
	other := []byte(`{"id":2}`)
	for name, sp := range map[string][]Splice{
		"foreign":     {{Old: other[6:7]}},
		"overlapping": {{Old: msg[5:12]}, {Old: m.Method}, {Old: msg[10:20]}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			AppendSplices(nil, msg, sp)
		})
	}
}

func TestListNames(t *testing.T) {
	tests := []struct {
		name, in, list, prefix, want string
		err                          error
	}{
		{"tools", `{"tools":[{"name":"a","inputSchema":{"name":"not me"}},{"description":"n","name":"b"}],"nextCursor":"c"}`, "tools", "s1__",
			`{"tools":[{"name":"s1__a","inputSchema":{"name":"not me"}},{"description":"n","name":"s1__b"}],"nextCursor":"c"}`, nil},
		{"whitespace", "{ \"prompts\" : [ { \"name\" : \"p\" } ] }", "prompts", "x/", "{ \"prompts\" : [ { \"name\" : \"x/p\" } ] }", nil},
		{"escaped prefix", `{"tools":[{"name":"a"}]}`, "tools", `q"\`, `{"tools":[{"name":"q\"\\a"}]}`, nil},
		{"escaped key", `{"to\u006fls":[{"n\u0061me":"a"}]}`, "tools", "p_", `{"to\u006fls":[{"n\u0061me":"p_a"}]}`, nil},
		{"odd elements", `{"tools":[1,null,{"name":2},{},{"name":"ok"}]}`, "tools", "p_", `{"tools":[1,null,{"name":2},{},{"name":"p_ok"}]}`, nil},
		{"no list", `{"resources":[]}`, "tools", "p_", `{"resources":[]}`, nil},
		{"empty list", `{"tools":[]}`, "tools", "p_", `{"tools":[]}`, nil},
		{"list not array", `{"tools":{}}`, "tools", "p_", "", ErrInvalidRequest},
		{"not object", `[{"name":"a"}]`, "tools", "p_", "", ErrInvalidRequest},
		{"invalid json", `{"tools":[{"name":"a"}]`, "tools", "p_", "", ErrParse},
		{"invalid utf8", "{\"tools\":[{\"name\":\"\xff\"}]}", "tools", "p_", "", ErrParse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendPrefixListNames([]byte("pre"), []byte(tt.in), tt.list, "name", tt.prefix)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || string(got) != "pre" {
					t.Fatalf("got %q, %v; want %v and dst unchanged", got, err, tt.err)
				}
				return
			}
			if err != nil || string(got) != "pre"+tt.want {
				t.Fatalf("\n got %s %v\nwant %s", got, err, tt.want)
			}
			back, err := AppendStripListNames(nil, got[3:], tt.list, "name", tt.prefix)
			if err != nil || string(back) != tt.in {
				t.Fatalf("strip:\n got %s %v\nwant %s", back, err, tt.in)
			}
		})
	}
}

func TestStripListNamesPartial(t *testing.T) {
	in := `{"tools":[{"name":"s1__a"},{"name":"other"},{"name":"s1\u005f_b"},{"name":"s1_"}]}`
	got, err := AppendStripListNames(nil, []byte(in), "tools", "name", "s1__")
	want := `{"tools":[{"name":"a"},{"name":"other"},{"name":"b"},{"name":"s1_"}]}`
	if err != nil || string(got) != want {
		t.Fatalf("\n got %s %v\nwant %s", got, err, want)
	}
}
