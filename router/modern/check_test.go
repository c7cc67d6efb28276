package modern

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

var checker = Checker{Supported: []string{Version, "2025-11-25"}}

func TestCheck(t *testing.T) {
	const disc = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + validMeta + `}}`
	for _, tc := range []struct {
		name   string
		msg    string
		h      *Headers
		code   int
		status int
	}{
		{"valid discover", disc, headers("server/discover", ""), 0, 0},
		{"valid without headers (stdio)", disc, nil, 0, 0},
		{"valid call", call("echo"), headers("tools/call", "echo"), 0, 0},
		{"no params", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, headers("server/discover", ""), codec.CodeInvalidParams, 400},
		{"no version", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, headers("tools/list", ""), codec.CodeInvalidParams, 400},
		{"no capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, headers("tools/list", ""), codec.CodeInvalidParams, 400},
		{"no client info is fine", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, headers("tools/list", ""), 0, 0},
		{"unsupported version", strings.Replace(disc, `"2026-07-28"`, `"v999.0.0"`, 1), &Headers{Version: []byte("v999.0.0"), Method: []byte("server/discover")}, codec.CodeUnsupportedVersion, 400},
		{"header and body disagree on the version", strings.Replace(disc, `"2026-07-28"`, `"v999.0.0"`, 1), headers("server/discover", ""), codec.CodeHeaderMismatch, 400},
		{"no version header", disc, &Headers{Method: []byte("server/discover")}, codec.CodeHeaderMismatch, 400},
		{"no method header", disc, &Headers{Version: []byte(Version)}, codec.CodeHeaderMismatch, 400},
		{"method header in another case", disc, headers("SERVER/DISCOVER", ""), codec.CodeHeaderMismatch, 400},
		{"no name header", call("echo"), headers("tools/call", ""), codec.CodeHeaderMismatch, 400},
		{"wrong name header", call("echo"), headers("tools/call", "other"), codec.CodeHeaderMismatch, 400},
		{"name header with spaces around", call("echo"), headers("tools/call", "  echo\t"), 0, 0},
		{"name header in base64", call("echo"), headers("tools/call", "=?base64?ZWNobw==?="), 0, 0},
		{"name header in bad base64", call("echo"), headers("tools/call", "=?base64?ZWNob?="), codec.CodeHeaderMismatch, 400},
		{"name header with a control byte", call("echo"), headers("tools/call", "ec\x01ho"), codec.CodeHeaderMismatch, 400},
		{"escaped name in the body", strings.Replace(call("echo"), `"name":"echo"`, `"name":"\u0065cho"`, 1), headers("tools/call", "echo"), 0, 0},
		{"read by uri", `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"file:///a b",` + validMeta + `}}`, headers("resources/read", "file:///a b"), 0, 0},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"nope/nope","params":{` + validMeta + `}}`, headers("nope/nope", ""), codec.CodeMethodNotFound, 404},
		{"removed method", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{` + validMeta + `}}`, headers("ping", ""), codec.CodeMethodNotFound, 404},
		{"extension not declared", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t",` + validMeta + `}}`, headers("tasks/get", ""), codec.CodeMethodNotFound, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := scan(t, tc.msg)
			var meta Meta
			ReadMeta(m.Params, &meta)
			r := checker.Check(m, &meta, tc.h)
			if r.Code != tc.code || r.Status != tc.status {
				t.Fatalf("got %d/%d (%s), want %d/%d", r.Code, r.Status, r.Message, tc.code, tc.status)
			}
			if r.OK() {
				return
			}
			resp := decode(t, r.AppendError(nil, m.ID, checker.Supported))
			e := resp["error"].(map[string]any)
			if int(e["code"].(float64)) != tc.code || e["message"] == "" || string(m.ID) != jsonID(resp["id"]) {
				t.Errorf("error response %v", resp)
			}
		})
	}
}

// jsonID re-encodes a decoded id, to compare it with the raw token of the request.
func jsonID(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestUnsupportedVersionData(t *testing.T) {
	m, _ := scan(t, `{"jsonrpc":"2.0","id":301,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	var meta Meta
	ReadMeta(m.Params, &meta)
	r := checker.Check(m, &meta, &Headers{Version: []byte("v999.0.0"), Method: []byte("server/discover")})
	data := decode(t, r.AppendError(nil, m.ID, checker.Supported))["error"].(map[string]any)["data"].(map[string]any)
	sup := data["supported"].([]any)
	if data["requested"] != "v999.0.0" || len(sup) != 2 || sup[0] != Version {
		t.Errorf("data %v", data)
	}
}

func TestRequire(t *testing.T) {
	var meta Meta
	ReadMeta([]byte(`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{}}}}`), &meta)
	if r := Require(&meta, CapRoots); !r.OK() {
		t.Errorf("declared roots refused: %v", r.Message)
	}
	r := Require(&meta, CapSampling|CapRoots)
	if r.Code != codec.CodeMissingCapability || r.Status != http.StatusBadRequest || r.Missing != CapSampling {
		t.Fatalf("got %+v", r)
	}
	data := decode(t, r.AppendError(nil, []byte("1"), nil))["error"].(map[string]any)["data"].(map[string]any)
	req, ok := data["requiredCapabilities"].(map[string]any)
	if !ok || len(req) != 1 || req["sampling"] == nil {
		t.Errorf("requiredCapabilities %v: want an object naming sampling", data)
	}
}

// TestMethodTable: the index constants and the table agree, every method has its own
// entry, and removed methods are not in the table.
func TestMethodTable(t *testing.T) {
	for i := range methods {
		if got := methodIndex([]byte(methods[i].Name)); got != i {
			t.Errorf("%s: index %d, want %d", methods[i].Name, got, i)
		}
		if Removed([]byte(methods[i].Name)) != "" {
			t.Errorf("%s is both served and removed", methods[i].Name)
		}
	}
	for _, name := range []string{"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/result", "tasks/list"} {
		if LookupMethod([]byte(name)) != nil || Removed([]byte(name)) == "" {
			t.Errorf("%s should be removed with a reason", name)
		}
	}
	if MethodAt(MethodToolsCall).NameFrom != NameParam || MethodAt(MethodResourcesRead).NameFrom != NameURI || !MethodAt(MethodResourcesRead).Cacheable {
		t.Error("tools/call and resources/read rows")
	}
}
