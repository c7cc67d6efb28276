package codec

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestEncoders(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"result", AppendResult([]byte("x"), []byte(`7`), []byte(`{"ok":true}`)), `x{"jsonrpc":"2.0","id":7,"result":{"ok":true}}`},
		{"result nil", AppendResult(nil, []byte(`"a"`), nil), `{"jsonrpc":"2.0","id":"a","result":{}}`},
		{"result null id", AppendResult(nil, nil, []byte(`1`)), `{"jsonrpc":"2.0","id":null,"result":1}`},
		{"error", AppendError(nil, []byte(`"r1"`), CodeMethodNotFound, `Method "x" not found`, nil),
			`{"jsonrpc":"2.0","id":"r1","error":{"code":-32601,"message":"Method \"x\" not found"}}`},
		{"error data null id", AppendError(nil, nil, CodeParseError, "Parse error", []byte(`{"offset":3}`)),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"offset":3}}}`},
		{"error positive code", AppendError(nil, []byte(`1`), 42, "", nil),
			`{"jsonrpc":"2.0","id":1,"error":{"code":42,"message":""}}`},
		{"request", AppendRequest(nil, []byte(`5`), "tools/call", []byte(`{"name":"a"}`)),
			`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a"}}`},
		{"request no params", AppendRequest(nil, []byte(`5`), "ping", nil), `{"jsonrpc":"2.0","id":5,"method":"ping"}`},
		{"notification", AppendNotification(nil, "notifications/progress", []byte(`{"progress":1}`)),
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`},
		{"notification no params", AppendNotification(nil, "notifications/initialized", nil),
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"string escapes", AppendString(nil, "a\"b\\c\n\r\t\b\f\x00\x1f\x7fé\u2028\xff"),
			`"a\"b\\c\n\r\t\b\f\u0000\u001f` + "\x7fé" + `\u2028\ufffd"`},
		{"quote", AppendQuote(nil, []byte("</script>")), `"</script>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("\n got %s\nwant %s", tt.got, tt.want)
			}
		})
	}
}

// TestEncodersScan checks that every encoder's output scans back to what was encoded.
func TestEncodersScan(t *testing.T) {
	var m Message
	msgs := []struct {
		b    []byte
		kind Kind
	}{
		{AppendResult(nil, []byte(`1`), []byte(`{}`)), KindResult},
		{AppendError(nil, nil, CodeInternalError, "x", []byte(`[1]`)), KindError},
		{AppendRequest(nil, []byte(`"a"`), "tools/call", []byte(`{"name":"t\"1"}`)), KindRequest},
		{AppendNotification(nil, "n", []byte(`[]`)), KindNotification},
	}
	for _, tt := range msgs {
		if err := Scan(tt.b, &m); err != nil || m.Kind != tt.kind {
			t.Fatalf("%s: %v kind %v, want %v", tt.b, err, m.Kind, tt.kind)
		}
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: ``, want: ``},
		{in: `plain`, want: `plain`},
		{in: `a\"b\\c\/d\b\f\n\r\t`, want: "a\"b\\c/d\b\f\n\r\t"},
		{in: `\u00e9\u65E5`, want: "é日"},
		{in: `\ud83d\ude00`, want: "😀"},
		{in: `\ud800x`, want: "\uFFFDx"},
		{in: `\udc00`, want: "\uFFFD"},
		{in: `\ud800\u0041`, want: "\uFFFDA"},
		{in: `\x`, bad: true},
		{in: `\u12g4`, bad: true},
		{in: `\`, bad: true},
		{in: `a"b`, bad: true},
		{in: "a\nb", bad: true},
		{in: "\xff", bad: true},
	}
	for _, tt := range tests {
		got, err := Unquote([]byte("p:"), []byte(tt.in))
		if tt.bad {
			if !errors.Is(err, ErrParse) {
				t.Errorf("Unquote(%q): got %v, want a parse error", tt.in, err)
			}
			continue
		}
		if err != nil || string(got) != "p:"+tt.want {
			t.Errorf("Unquote(%q) = %q, %v; want %q", tt.in, got, err, "p:"+tt.want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	var m Message
	err := Scan([]byte(`{"jsonrpc":"2.0","id":1,"method":"x",}`), &m)
	if got, want := err.Error(), "codec: parse error at byte 37: expected a string object key"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrParse) || errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrTooLarge) {
		t.Fatal("parse error matches the wrong sentinels")
	}
	err = Scan([]byte(`{"jsonrpc":"1.0","id":1,"method":"x"}`), &m)
	if got, want := err.Error(), `codec: invalid request at byte 11: "jsonrpc" must be exactly "2.0"`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalidRequest) || errors.Is(err, ErrParse) {
		t.Fatal("invalid request matches the wrong sentinels")
	}
	// The reason is fit for an error response's data.
	data, _ := json.Marshal(err.(*Error).Reason)
	if resp := AppendError(nil, m.ID, err.(*Error).Code, "Invalid Request", data); !json.Valid(resp) {
		t.Fatalf("error response not JSON: %s", resp)
	}
}
