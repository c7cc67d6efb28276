package params

import (
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

const benchMeta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{}}},"progressToken":"tok-1"}`

// benchCases are the requests the router sees most: a tool call with a few arguments
// and a resource read, in the newest session revision and in the stateless one.
var benchCases = []struct {
	name, rev, method, params string
}{
	{"tools/call/2025-11-25", "2025-11-25", "tools/call", `{"name":"search_documents","arguments":{"query":"quarterly revenue by region","limit":20,"filters":{"year":2025,"tags":["finance","emea"]}},"_meta":{"progressToken":"tok-1"}}`},
	{"resources/read/2025-11-25", "2025-11-25", "resources/read", `{"uri":"file:///projects/mcprouter/docs/design.md","_meta":{"progressToken":17}}`},
	{"tools/call/2026-07-28", "2026-07-28", "tools/call", `{` + benchMeta26 + `,"name":"search_documents","arguments":{"query":"quarterly revenue by region","limit":20,"filters":{"year":2025,"tags":["finance","emea"]}}}`},
	{"resources/read/2026-07-28", "2026-07-28", "resources/read", `{` + benchMeta26 + `,"uri":"file:///projects/mcprouter/docs/design.md"}`},
}

// BenchmarkValidate measures Validate on the params of each case; BenchmarkScan beside
// it is codec.Scan of the whole message, the cost every message already pays, so that
// the ratio of the two is what validation adds per request.
func BenchmarkValidate(b *testing.B) {
	for _, c := range benchCases {
		params, method := []byte(c.params), []byte(c.method)
		if err := Validate(c.rev, method, params); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(params)))
			for b.Loop() {
				_ = Validate(c.rev, method, params)
			}
		})
	}
}

func BenchmarkScan(b *testing.B) {
	for _, c := range benchCases {
		msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"` + c.method + `","params":` + c.params + `}`)
		b.Run(c.name, func(b *testing.B) {
			var m codec.Message
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				_ = codec.Scan(msg, &m)
			}
		})
	}
}
