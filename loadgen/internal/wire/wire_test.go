package wire

import (
	"encoding/json"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "nl\nt\tr\r", "\x00\x1f", "é✓😀", "bad\xffutf8"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q -> %s: %v", s, got, err)
			continue
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if back != want {
			t.Errorf("%q round-trips to %q", s, back)
		}
		if q := AppendQuote(nil, []byte(s)); string(q) != string(got) {
			t.Errorf("AppendQuote(%q) = %s, AppendString = %s", s, q, got)
		}
	}
}

func TestAppendMessages(t *testing.T) {
	tests := []struct{ got, want string }{
		{string(AppendRequest(nil, 7, "tools/call", []byte(`{"name":"x"}`))), `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`},
		{string(AppendRequest(nil, 0, "ping", nil)), `{"jsonrpc":"2.0","id":0,"method":"ping"}`},
		{string(AppendNotification(nil, "notifications/initialized", nil)), `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{string(AppendResult(nil, []byte(`"a"`), []byte(`{}`))), `{"jsonrpc":"2.0","id":"a","result":{}}`},
		{string(AppendError(nil, nil, -32601, "no")), `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no"}}`},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %s\nwant %s", tt.got, tt.want)
		}
		var m codec.Message
		if err := Scan([]byte(tt.got), &m); err != nil {
			t.Errorf("%s does not scan: %v", tt.got, err)
		}
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
