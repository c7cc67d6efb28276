package wire

import (
	"math"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

func TestAppendRequest(t *testing.T) {
	tests := []struct{ got, want string }{
		{string(AppendRequest(nil, 7, "tools/call", []byte(`{"name":"x"}`))), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`},
		{string(AppendRequest(nil, 0, "ping", nil)), `{"jsonrpc":"2.0","id":0,"method":"ping"}`},
		{string(AppendRequest([]byte("x"), math.MaxUint64, "a\"b", []byte(`{}`))), `x{"jsonrpc":"2.0","id":18446744073709551615,"method":"a\"b","params":{}}`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %s\nwant %s", tt.got, tt.want)
		}
		var m codec.Message
		if err := codec.Scan([]byte(strings.TrimPrefix(tt.got, "x")), &m); err != nil {
			t.Errorf("%s does not scan: %v", tt.got, err)
		}
	}
}

// TestAppendRequestAllocs checks that formatting the id costs no allocation: this runs
// once per call mcpload makes.
func TestAppendRequestAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() {
		dst = AppendRequest(dst[:0], 1<<40, "tools/call", []byte(`{"name":"echo"}`))
	}); n != 0 {
		t.Errorf("AppendRequest allocates %v times", n)
	}
}

func TestAppendMember(t *testing.T) {
	tests := []struct{ obj, want string }{
		{"", `{"cursor":"c"}`},
		{"{}", `{"cursor":"c"}`},
		{"{ }", `{ "cursor":"c"}`},
		{`{"a":1}`, `{"a":1,"cursor":"c"}`},
	}
	for _, tt := range tests {
		var obj []byte
		if tt.obj != "" {
			obj = []byte(tt.obj)
		}
		if got := string(AppendMember(nil, obj, "cursor", []byte(`"c"`))); got != tt.want {
			t.Errorf("AppendMember(%q) = %s, want %s", tt.obj, got, tt.want)
		}
	}
}

func TestReads(t *testing.T) {
	if code, msg, ok := ErrorCode([]byte(`{"code":-32602,"message":"bad"}`)); !ok || code != -32602 || msg != "bad" {
		t.Errorf("ErrorCode = %d %q %v", code, msg, ok)
	}
	if _, _, ok := ErrorCode([]byte(`{"message":"no code"}`)); ok {
		t.Error("ErrorCode without code ok")
	}
	toolErr := []struct {
		result string
		want   bool
	}{
		{`{"content":[]}`, false},
		{`{"content":[],"isError":true}`, true},
		{`{"content":[],"isError":false}`, false},
		{`{"content":[{"type":"text","text":"\"isError\":true"}]}`, false},
	}
	for _, tt := range toolErr {
		if got := ToolError([]byte(tt.result)); got != tt.want {
			t.Errorf("ToolError(%s) = %v", tt.result, got)
		}
	}
	if c := NextCursor([]byte(`{"tools":[],"nextCursor":"abc"}`)); string(c) != `"abc"` {
		t.Errorf("NextCursor = %s", c)
	}
	for _, r := range []string{`{"tools":[]}`, `{"nextCursor":""}`, `{"nextCursor":null}`} {
		if c := NextCursor([]byte(r)); c != nil {
			t.Errorf("NextCursor(%s) = %s", r, c)
		}
	}
	if s := StringField(Field([]byte(`{"serverInfo":{"name":"x"}}`), "serverInfo"), "name"); s != "x" {
		t.Errorf("nested field %q", s)
	}
}
