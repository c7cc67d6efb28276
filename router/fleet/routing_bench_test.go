package fleet

import (
	"bytes"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
)

// benchStatelessCall is a 2026-07-28 tools/call as a client sends it: arguments, then
// the _meta with its revision, capabilities and clientInfo.
const benchStatelessCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world","count":3},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{}}},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"mcpload","version":"dev"}}}}`

// BenchmarkRetryStateCheck: what routing pays on every stateless request to tell a
// retry carrying a requestState from the rest: the flag Scan sets (StateMember, now)
// against the search of params for the router's state prefix (before).
func BenchmarkRetryStateCheck(b *testing.B) {
	var m codec.Message
	if err := codec.Scan([]byte(benchStatelessCall), &m); err != nil {
		b.Fatal(err)
	}
	var hits int
	b.Run("before", func(b *testing.B) {
		for b.Loop() {
			if bytes.Contains(m.Params, []byte(statePrefix)) {
				hits++
			}
		}
	})
	b.Run("after", func(b *testing.B) {
		for b.Loop() {
			if m.Flags&codec.StateMember != 0 {
				hits++
			}
		}
	})
	if hits != 0 {
		b.Fatal("a call without requestState taken for a retry")
	}
}
