package modern

import (
	"reflect"
	"strings"
	"testing"
)

var fields = AppendMetaFields(nil, Version, []byte(`{"sampling":{}}`), []byte(`{"name":"c","version":"1"}`), "info")

func TestAppendMetaFields(t *testing.T) {
	got := decode(t, append(append([]byte("{"), fields...), '}'))
	if got[KeyProtocolVersion] != Version || got[KeyLogLevel] != "info" || got[KeyClientInfo] == nil ||
		got[KeyClientCapabilities].(map[string]any)["sampling"] == nil {
		t.Errorf("%s", fields)
	}
	if s := string(AppendMetaFields(nil, Version, nil, nil, "")); s != `"`+KeyProtocolVersion+`":"2026-07-28","`+KeyClientCapabilities+`":{}` {
		t.Errorf("minimal %s", s)
	}
}

func TestAppendWithMeta(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"no params, spaces", `{"jsonrpc":"2.0","id":1,"method":"tools/list" } `},
		{"empty params", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{ }}`},
		{"params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`},
		{"progress token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":7}}}`},
		{"empty _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, msg := scan(t, tc.in)
			out := AppendWithMeta(nil, msg, m, fields)
			got, want := decode(t, out), decode(t, msg)
			params, _ := got["params"].(map[string]any)
			meta, _ := params["_meta"].(map[string]any)
			if meta[KeyProtocolVersion] != Version || meta[KeyLogLevel] != "info" {
				t.Fatalf("%s", out)
			}
			// Nothing else changed.
			delete(meta, KeyProtocolVersion)
			delete(meta, KeyClientCapabilities)
			delete(meta, KeyClientInfo)
			delete(meta, KeyLogLevel)
			if len(meta) == 0 {
				delete(params, "_meta")
			}
			if wp, _ := want["params"].(map[string]any); wp == nil && len(params) == 0 {
				delete(got, "params")
			} else if wm, ok := wp["_meta"].(map[string]any); ok && len(wm) == 0 {
				delete(wp, "_meta")
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %v\nwant %v", got, want)
			}
		})
	}
}

func TestInputRequired(t *testing.T) {
	reqs := []InputRequest{
		{Key: "sample-1", Method: "sampling/createMessage", Params: []byte(`{"messages":[],"maxTokens":5}`)},
		{Key: "roots", Method: "roots/list"},
	}
	out := AppendInputRequired(nil, reqs, "c3RhdGU")
	v := decode(t, out)
	if v["resultType"] != ResultInputRequired || v["requestState"] != "c3RhdGU" || len(v["inputRequests"].(map[string]any)) != 2 {
		t.Fatalf("%s", out)
	}
	var got []InputRequest
	EachInputRequest(out, func(k, method, params []byte) bool {
		got = append(got, InputRequest{Key: string(k), Method: string(method), Params: params})
		return true
	})
	if len(got) != 2 || got[0].Key != "sample-1" || got[0].Method != "sampling/createMessage" || string(got[0].Params) != `{"messages":[],"maxTokens":5}` ||
		got[1].Params != nil {
		t.Errorf("read back %+v", got)
	}
	if s := string(AppendInputRequired(nil, nil, "")); s != `{"resultType":"input_required","inputRequests":{}}` {
		t.Errorf("empty %s", s)
	}
}

func TestAppendRetry(t *testing.T) {
	resp := []byte(`{"sample-1":{"role":"assistant","content":{"type":"text","text":"hi"}}}`)
	for _, tc := range []struct {
		name, in, state string
	}{
		{"first retry", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`, `"s1"`},
		{"no state", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, ""},
		{"second retry", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","inputResponses":{"old":{}},"requestState":"s0"}}`, `"s1"`},
		{"state dropped, last member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","inputResponses":{},"requestState":"s0"}}`, ""},
		{"state dropped, first member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{ "requestState" : "s\"0" , "name":"x"}}`, ""},
		{"state dropped, only member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requestState":"s0"}}`, ""},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `"s1"`},
		{"empty params", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, `"s1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, msg := scan(t, tc.in)
			var state []byte
			if tc.state != "" {
				state = []byte(tc.state)
			}
			out := AppendRetry(nil, msg, m, []byte(`"r-2"`), resp, state)
			v := decode(t, out)
			p := v["params"].(map[string]any)
			if v["id"] != "r-2" || p["inputResponses"].(map[string]any)["sample-1"] == nil {
				t.Fatalf("%s", out)
			}
			if tc.state == "" {
				if _, has := p["requestState"]; has {
					t.Fatalf("a state the backend did not give: %s", out)
				}
			} else if p["requestState"] != "s1" {
				t.Fatalf("state: %s", out)
			}
			if orig := decode(t, msg); orig["params"] != nil && orig["params"].(map[string]any)["name"] != p["name"] {
				t.Errorf("name lost: %s", out)
			}
			back, _ := scan(t, string(out))
			if string(RequestState(back.Params)) != strings.Trim(tc.state, `"`) || InputResponse(back.Params, "sample-1") == nil {
				t.Errorf("read back from %s", out)
			}
		})
	}
}
