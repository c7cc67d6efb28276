package params

import (
	"errors"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// The cases the issue names, and the corners of the walk: each revision's answer to a
// wrong or missing member of the methods the router answers or routes.
func TestValidateCases(t *testing.T) {
	const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	type tc struct {
		revs   []string // nil: every revision before 2026-07-28
		method string
		params string
		want   string // "" valid, else the error message
	}
	legacy := []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	cases := []tc{
		{nil, "tools/call", `{"name":"echo","arguments":{"x":1}}`, ""},
		{nil, "tools/call", `{"name":42}`, "params.name: must be a string"},
		{nil, "tools/call", `{"arguments":{}}`, "params.name: required"},
		{nil, "tools/call", `{"name":"echo","arguments":[1]}`, "params.arguments: must be an object"},
		{nil, "tools/call", `{"name":"echo","_meta":"x"}`, "params._meta: must be an object"},
		{nil, "tools/call", `{"name":"echo","_meta":{"progressToken":true}}`, "params._meta.progressToken: must be a string or an integer"},
		{nil, "tools/call", `{"name":"echo","_meta":{"progressToken":1.5}}`, "params._meta.progressToken: must be a string or an integer"},
		{nil, "tools/call", `{"name":"echo","_meta":{"progressToken":7}}`, ""},
		{nil, "tools/call", `{"name":"echo","unknown":[{}],"more":null}`, ""},
		{nil, "tools/call", `{"\u006eame":5}`, "params.name: must be a string"},
		{nil, "tools/call", `[1,2]`, "params: must be an object"},
		{nil, "tools/call", ``, "params: required"},
		{nil, "resources/read", `{"uri":"file:///a"}`, ""},
		{nil, "resources/read", `{}`, "params.uri: required"},
		{nil, "resources/read", `{"uri":{"x":1}}`, "params.uri: must be a string"},
		{nil, "resources/subscribe", `{"uri":1}`, "params.uri: must be a string"},
		{nil, "resources/unsubscribe", `{"url":"x"}`, "params.uri: required"},
		{nil, "prompts/get", `{"name":"p","arguments":{"a":"b"}}`, ""},
		{nil, "prompts/get", `{"name":"p","arguments":{"a":1}}`, "params.arguments.a: must be a string"},
		{nil, "prompts/get", `{"name":"p","arguments":{"a b":1}}`, `params.arguments["a b"]: must be a string`},
		{nil, "tools/list", ``, ""},
		{nil, "tools/list", `{}`, ""},
		{nil, "tools/list", `{"cursor":"abc"}`, ""},
		{nil, "tools/list", `{"cursor":12}`, "params.cursor: must be a string"},
		{nil, "prompts/list", `{"cursor":null}`, "params.cursor: must be a string"},
		{nil, "resources/list", `{"cursor":["a"]}`, "params.cursor: must be a string"},
		{nil, "resources/templates/list", `{"cursor":true}`, "params.cursor: must be a string"},
		{nil, "logging/setLevel", `{"level":"debug"}`, ""},
		{nil, "logging/setLevel", `{"level":"loud"}`, `params.level: must be one of "alert", "critical", "debug", "emergency", "error", "info", "notice", "warning"`},
		{nil, "logging/setLevel", `{"level":"\u0064ebug"}`, ""},
		{nil, "logging/setLevel", `{}`, "params.level: required"},
		{nil, "ping", ``, ""},
		{nil, "ping", `{"_meta":{}}`, ""},
		{nil, "initialize", `{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, ""},
		{nil, "initialize", `{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"c"}}`, "params.clientInfo.version: required"},
		{nil, "initialize", `{"protocolVersion":20250326,"capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, "params.protocolVersion: must be a string"},
		{nil, "initialize", `{"protocolVersion":"2025-03-26","clientInfo":{"name":"c","version":"1"}}`, "params.capabilities: required"},
		{nil, "completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"}}`, ""},
		{nil, "completion/complete", `{"ref":{"type":"ref/prompt"},"argument":{"name":"a","value":"v"}}`, "params.ref.name: required"},
		{nil, "completion/complete", `{"ref":{"type":"ref/resource","uri":7},"argument":{"name":"a","value":"v"}}`, "params.ref.uri: must be a string"},
		{nil, "completion/complete", `{"ref":{"type":"ref/tool","name":"p"},"argument":{"name":"a","value":"v"}}`, `params.ref.type: must be one of "ref/prompt", "ref/resource"`},
		{nil, "completion/complete", `{"ref":{"name":"p"},"argument":{"name":"a","value":"v"}}`, "params.ref.type: required"},
		{nil, "notifications/cancelled", `{"requestId":"r1","reason":"x"}`, ""},
		{nil, "notifications/cancelled", `{"requestId":{}}`, "params.requestId: must be a string or an integer"},
		{nil, "notifications/progress", `{"progressToken":"t","progress":0.5,"total":1}`, ""},
		{nil, "notifications/progress", `{"progressToken":"t"}`, "params.progress: required"},
		{nil, "notifications/progress", `{"progressToken":"t","progress":"half"}`, "params.progress: must be a number"},
		{nil, "notifications/initialized", ``, ""},
		{nil, "notifications/resources/updated", `{"uri":false}`, "params.uri: must be a string"},
		{nil, "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}`, ""},
		{nil, "sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}},{"role":"robot","content":{"type":"text","text":"x"}}],"maxTokens":10}`, `params.messages[1].role: must be one of "assistant", "user"`},
		{nil, "sampling/createMessage", `{"messages":[],"maxTokens":1.5}`, "params.maxTokens: must be an integer"},
		{nil, "no/such/method", `{"x":1}`, ""},
		{[]string{"2025-11-25"}, "notifications/cancelled", `{"reason":"x"}`, ""}, // requestId optional since tasks
		{[]string{"2024-11-05", "2025-03-26", "2025-06-18"}, "notifications/cancelled", `{"reason":"x"}`, "params.requestId: required"},
		{[]string{"2025-11-25"}, "tasks/get", `{"taskId":1}`, "params.taskId: must be a string"},
		{[]string{"2025-06-18", "2025-11-25"}, "elicitation/create", `{"message":"m","requestedSchema":{"type":"object","properties":{}}}`, ""},
		{[]string{"2025-11-25"}, "elicitation/create", `{"mode":"url","message":"m","elicitationId":"e"}`, "params.url: required"},
		{[]string{"2026-07-28"}, "tools/call", `{` + meta26 + `,"name":"echo"}`, ""},
		{[]string{"2026-07-28"}, "tools/call", `{"name":"echo"}`, "params._meta: required"},
		{[]string{"2026-07-28"}, "tools/call", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}},"name":"echo"}`, `params._meta["io.modelcontextprotocol/protocolVersion"]: required`},
		{[]string{"2026-07-28"}, "tools/call", `{` + meta26 + `}`, "params.name: required"},
		{[]string{"2026-07-28"}, "resources/read", `{` + meta26 + `,"uri":3}`, "params.uri: must be a string"},
		{[]string{"2026-07-28"}, "tools/list", `{` + meta26 + `,"cursor":{}}`, "params.cursor: must be a string"},
		{[]string{"2026-07-28"}, "tools/list", ``, "params: required"},
		{[]string{"2026-07-28"}, "subscriptions/listen", `{` + meta26 + `,"notifications":{}}`, ""},
		{[]string{"2026-07-28"}, "logging/setLevel", `{"level":1}`, ""}, // not in 2026-07-28: not this package's call
		{[]string{"1999-01-01"}, "tools/call", `{"name":1}`, ""},
	}
	for _, c := range cases {
		revs := c.revs
		if revs == nil {
			revs = legacy
		}
		for _, rev := range revs {
			var p []byte
			if c.params != "" {
				p = []byte(c.params)
			}
			err := Validate(rev, c.method, p)
			got := ""
			if err != nil {
				got = err.Error()
				var e *Error
				if !errors.As(err, &e) || !errors.Is(err, ErrInvalidParams) || e.Code() != codec.CodeInvalidParams {
					t.Errorf("%s %s %s: error %#v is not an *Error for -32602", rev, c.method, c.params, err)
				}
			}
			if got != c.want {
				t.Errorf("%s %s %s:\n got %q\nwant %q", rev, c.method, c.params, got, c.want)
			}
			// The same answer for the method as bytes, as the router holds it.
			if err2 := Validate(rev, []byte(c.method), p); (err2 == nil) != (err == nil) {
				t.Errorf("%s %s: string and []byte methods disagree", rev, c.method)
			}
		}
	}
}

func TestKnown(t *testing.T) {
	if !Known("2025-11-25", "tasks/get") || Known("2025-06-18", "tasks/get") || Known("2026-07-28", "initialize") || Known("x", "ping") {
		t.Error("Known disagrees with the schemas")
	}
	if got := Revisions(); len(got) != 5 || got[0] != "2024-11-05" || got[4] != "2026-07-28" {
		t.Errorf("Revisions() = %v", got)
	}
}

// The answer the router sends: -32602, the message, and the member in data.
func TestErrorAnswer(t *testing.T) {
	err := Validate("2025-11-25", "resources/read", []byte(`{"uri":{"a":1}}`))
	e := err.(*Error)
	got := string(codec.AppendError(nil, []byte("7"), e.Code(), e.Error(), e.AppendData(nil)))
	want := `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"params.uri: must be a string","data":{"path":"params.uri","reason":"must be a string"}}}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var m codec.Message
	if err := codec.Scan([]byte(got), &m); err != nil || m.Kind != codec.KindError {
		t.Errorf("the answer does not scan as an error response: %v", err)
	}
}
