package router

import (
	"encoding/json"
	"testing"

	"github.com/bytedance/sonic"
)

// TestParseInitialize: initialize's params read in place give what a decoder gave:
// escapes decoded, the last of a member given twice, null as absent, a version that is
// not a string and params that are not a well-formed object refused.
func TestParseInitialize(t *testing.T) {
	for _, c := range []struct {
		params, version, caps, info string
		present, ok                 bool
	}{
		{`{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"c"}}`, "2025-11-25", `{"roots":{}}`, `{"name":"c"}`, true, true},
		{` { "protocol\u0056ersion" : "2025-06-\u00318" , "clientInfo" : {} } `, "2025-06-18", "", `{}`, true, true},
		{`{"protocolVersion":"1","protocolVersion":"2025-03-26"}`, "2025-03-26", "", "", true, true},
		{`{"protocolVersion":null,"capabilities":null}`, "", "null", "", false, true},
		{`{"capabilities":{}}`, "", `{}`, "", false, true},
		{`{"protocolVersion":20251125}`, "", "", "", false, false},
		{`{"protocolVersion":"2025-11-25",}`, "", "", "", false, false},
		{`["2025-11-25"]`, "", "", "", false, false},
		{``, "", "", "", false, false},
	} {
		p, ok := parseInitialize([]byte(c.params))
		v, present, isString := p.version()
		if ok && isString != c.ok || !ok && c.ok {
			t.Errorf("%s: accepted %v (well-formed %v, a string version %v), want %v", c.params, ok && isString, ok, isString, c.ok)
			continue
		}
		if !c.ok {
			continue
		}
		if v != c.version || present != c.present || string(p.capabilities) != c.caps || string(p.clientInfo) != c.info {
			t.Errorf("%s: version %q (present %v), capabilities %q, clientInfo %q; want %q (%v), %q, %q",
				c.params, v, present, p.capabilities, p.clientInfo, c.version, c.present, c.caps, c.info)
		}
	}
}

var benchInitialize = []byte(`{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"mcpload","version":"1.0.0"}}`)

// BenchmarkInitializeParams: initialize's params read in place (parseInitialize)
// against the decoder into a struct it replaced, side by side.
func BenchmarkInitializeParams(b *testing.B) {
	b.Run("walker", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchInitialize)))
		for b.Loop() {
			p, _ := parseInitialize(benchInitialize)
			if v, _, _ := p.version(); v == "" {
				b.Fatal("no version")
			}
		}
	})
	b.Run("sonic", func(b *testing.B) {
		var p struct {
			ProtocolVersion *string         `json:"protocolVersion"`
			Capabilities    json.RawMessage `json:"capabilities"`
			ClientInfo      json.RawMessage `json:"clientInfo"`
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(benchInitialize)))
		for b.Loop() {
			if sonic.Unmarshal(benchInitialize, &p) != nil || p.ProtocolVersion == nil {
				b.Fatal("no version")
			}
		}
	})
}
