package modern

import (
	"testing"
)

var serverInfo = AppendImplementation(nil, "mcprouter", "1.2.3")

func TestAppendDecorated(t *testing.T) {
	public := Cache{TTLms: 5000, Scope: ScopePublic}
	for _, tc := range []struct {
		name, in string
		d        Decoration
		want     string
	}{
		{"empty result", `{}`, Decoration{ServerInfo: serverInfo},
			`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"}}}`},
		{"legacy result", `{"tools":[]}`, Decoration{ServerInfo: serverInfo},
			`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"}},"tools":[]}`},
		{"has a type and _meta", `{"resultType":"input_required","_meta":{"a":1}}`, Decoration{ServerInfo: serverInfo},
			`{"resultType":"input_required","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"},"a":1}}`},
		{"empty _meta", `{ "_meta" : { } }`, Decoration{ServerInfo: serverInfo},
			`{"resultType":"complete", "_meta" : {"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"} } }`},
		{"backend's serverInfo kept", `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b"}}}`, Decoration{ServerInfo: serverInfo},
			`{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"b"}}}`},
		{"backend's serverInfo replaced", `{"resultType":"complete","_meta":{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"b"},"z":2}}`,
			Decoration{ServerInfo: serverInfo, ReplaceInfo: true},
			`{"resultType":"complete","_meta":{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"},"z":2}}`},
		{"every edit, out of order", `{"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{}},"ttlMs":7,"content":[]}`,
			Decoration{ServerInfo: serverInfo, ReplaceInfo: true, Cache: &Cache{TTLms: 3}},
			`{"resultType":"complete","cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"}},"ttlMs":3,"content":[]}`},
		{"serverInfo into _meta, ttlMs replaced", `{"ttlMs":7,"_meta":{"x":1}}`, Decoration{ServerInfo: serverInfo, Cache: &public},
			`{"resultType":"complete","cacheScope":"public","ttlMs":5000,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcprouter","version":"1.2.3"},"x":1}}`},
		{"legacy result asking for input", `{"content":[],"inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}`, Decoration{},
			`{"resultType":"input_required","content":[],"inputRequests":{"a":{"method":"roots/list"}},"requestState":"s"}`},
		{"no serverInfo", `{"x":1}`, Decoration{}, `{"resultType":"complete","x":1}`},
		{"cache added", `{"tools":[]}`, Decoration{Cache: &public},
			`{"resultType":"complete","ttlMs":5000,"cacheScope":"public","tools":[]}`},
		{"cache replaced", `{"resultType":"complete","ttlMs":99999,"cacheScope":"public","tools":[]}`, Decoration{Cache: &Cache{TTLms: 10}},
			`{"resultType":"complete","ttlMs":10,"cacheScope":"private","tools":[]}`},
		{"cache on an empty result", `{}`, Decoration{Cache: &public},
			`{"resultType":"complete","ttlMs":5000,"cacheScope":"public"}`},
		{"not an object", `[1]`, Decoration{ServerInfo: serverInfo}, `[1]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(AppendDecorated([]byte("prefix:"), []byte(tc.in), &tc.d))
			if got != "prefix:"+tc.want {
				t.Errorf("got  %s\nwant prefix:%s", got, tc.want)
			}
			if tc.want[0] == '{' {
				decode(t, []byte(tc.want))
			}
		})
	}
}

func TestAppendDiscoverResult(t *testing.T) {
	d := Discover{Supported: []string{Version, "2025-11-25"}, Capabilities: []byte(`{"tools":{"listChanged":true}}`),
		ServerInfo: serverInfo, Instructions: "use \"echo\"", Cache: Cache{TTLms: 60000, Scope: ScopePublic}}
	v := decode(t, AppendDiscoverResult(nil, &d))
	if v["resultType"] != "complete" || len(v["supportedVersions"].([]any)) != 2 || v["instructions"] != `use "echo"` ||
		v["ttlMs"] != 60000.0 || v["cacheScope"] != "public" || v["capabilities"].(map[string]any)["tools"] == nil ||
		v["_meta"].(map[string]any)[KeyServerInfo].(map[string]any)["name"] != "mcprouter" {
		t.Errorf("discover result %v", v)
	}
	v = decode(t, AppendDiscoverResult(nil, &Discover{}))
	if v["capabilities"] == nil || v["cacheScope"] != "private" || v["ttlMs"] != 0.0 {
		t.Errorf("zero discover result %v", v)
	}
}

func TestReadResultType(t *testing.T) {
	if string(ReadResultType([]byte(`{"tools":[]}`))) != ResultComplete ||
		string(ReadResultType([]byte(`{"resultType":"input_required"}`))) != ResultInputRequired ||
		string(ReadResultType([]byte(`{"content":[],"inputRequests":{"k":{}}}`))) != ResultInputRequired {
		t.Error("ReadResultType")
	}
}

func TestCacheMerge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []Cache
		want  Cache
	}{
		{"none", nil, Cache{}},
		{"one", []Cache{{TTLms: 5, Scope: ScopePublic}}, Cache{TTLms: 5, Scope: ScopePublic}},
		{"smallest ttl", []Cache{{TTLms: 500, Scope: ScopePublic}, {TTLms: 60, Scope: ScopePublic}}, Cache{TTLms: 60, Scope: ScopePublic}},
		{"never public from private", []Cache{{TTLms: 5, Scope: ScopePublic}, {TTLms: 9, Scope: ScopePrivate}}, Cache{TTLms: 5, Scope: ScopePrivate}},
		{"private first", []Cache{{TTLms: 5, Scope: ScopePrivate}, {TTLms: 1, Scope: ScopePublic}}, Cache{TTLms: 1, Scope: ScopePrivate}},
	} {
		if got := MergeAll(tc.parts...); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestReadCache(t *testing.T) {
	for in, want := range map[string]Cache{
		`{"ttlMs":300000,"cacheScope":"public"}`: {TTLms: 300000, Scope: ScopePublic},
		`{"ttlMs":-5,"cacheScope":"public"}`:     {Scope: ScopePublic},
		`{"tools":[]}`:                           {}, // a 2025 backend: stale and private
		`{"ttlMs":"9","cacheScope":"shared"}`:    {},
		`{"ttlMs":1.5}`:                          {},
	} {
		if got := ReadCache([]byte(in)); got != want {
			t.Errorf("ReadCache(%s) = %+v, want %+v", in, got, want)
		}
	}
	if got := string(Cache{TTLms: -1}.AppendFields(nil)); got != `"ttlMs":0,"cacheScope":"private"` {
		t.Errorf("fields %s", got)
	}
}
