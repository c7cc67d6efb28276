package modern

import (
	"testing"
)

// The per-request path allocates nothing: a valid request read and judged, a rejected
// one answered, a result decorated. These guards fail any change that makes it allocate.

func TestAllocsPerRequest(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	m, _ := scan(t, call("echo"))
	h := headers("tools/call", "=?base64?ZWNobw==?=")
	var meta Meta
	if n := testing.AllocsPerRun(100, func() {
		ReadMeta(m.Params, &meta)
		if !meta.Claimed(h.Version) {
			t.Fatal("not claimed")
		}
		if r := checker.Check(m, &meta, h); !r.OK() {
			t.Fatal(r.Message)
		}
		if r := Require(&meta, CapSampling); !r.OK() {
			t.Fatal(r.Message)
		}
	}); n != 0 {
		t.Errorf("valid request: %v allocs", n)
	}

	bad, _ := scan(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	bh := &Headers{Version: []byte("v9"), Method: []byte("server/discover")}
	out := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		ReadMeta(bad.Params, &meta)
		r := checker.Check(bad, &meta, bh)
		out = r.AppendError(out[:0], bad.ID, checker.Supported)
		r = Require(&meta, CapSampling)
		out = r.AppendError(out[:0], bad.ID, checker.Supported)
	}); n != 0 {
		t.Errorf("rejected request: %v allocs", n)
	}

	result := []byte(`{"content":[{"type":"text","text":"hi"}],"_meta":{"x":1},"ttlMs":5}`)
	d := Decoration{ServerInfo: serverInfo, Cache: &Cache{TTLms: 100, Scope: ScopePublic}}
	disc := Discover{Supported: checker.Supported, Capabilities: []byte(`{"tools":{}}`), ServerInfo: serverInfo, Cache: Cache{TTLms: 1}}
	if n := testing.AllocsPerRun(100, func() {
		out = AppendDecorated(out[:0], result, &d)
		out = AppendDiscoverResult(out[:0], &disc)
		_ = ReadCache(result).Merge(Cache{TTLms: 3})
	}); n != 0 {
		t.Errorf("results: %v allocs", n)
	}

	state := []byte(`"c3RhdGU"`)
	resp := []byte(`{"sample":{"content":{"type":"text","text":"x"}}}`)
	reqs := []InputRequest{{Key: "sample", Method: "sampling/createMessage", Params: []byte(`{"maxTokens":1}`)}}
	req, msg := scan(t, call("echo"))
	newID := []byte(`"r"`)
	if n := testing.AllocsPerRun(100, func() {
		out = AppendWithMeta(out[:0], msg, req, fields)
		out = AppendRetry(out[:0], msg, req, newID, resp, state)
		out = AppendInputRequired(out[:0], reqs, "c3RhdGU")
		_ = InputResponse(req.Params, "sample")
		_ = RequestState(req.Params)
	}); n != 0 {
		t.Errorf("translation encoders: %v allocs", n)
	}
}
