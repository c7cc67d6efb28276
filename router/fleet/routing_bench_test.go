package fleet

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router/modern"
	"github.com/mcprouter/mcprouter/transport"
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

// BenchmarkParamHeaderCheck: what a stateless tools/call of a tool without Mcp-Param
// declarations pays for them once routed: a look at the declarations that come with its
// route (after) against a lookup of the tool's name in a per-snapshot sync.Map (before,
// its entry made by an earlier call).
func BenchmarkParamHeaderCheck(b *testing.B) {
	var x transport.Exchange
	if err := codec.Scan([]byte(benchStatelessCall), &x.Msg); err != nil {
		b.Fatal(err)
	}
	cat := &catalog{gen: 1, tools: map[string]route{"echo": {}}}
	r, ok := cat.tools[string(x.Msg.Name)]
	if !ok {
		b.Fatal("no route")
	}
	b.Run("before", func(b *testing.B) {
		var memo struct {
			gen uint64
			m   sync.Map // tool name → []modern.ParamHeader
		}
		memo.gen = cat.gen
		memo.m.Store("echo", []modern.ParamHeader(nil))
		cur := atomic.Pointer[struct {
			gen uint64
			m   sync.Map
		}]{}
		cur.Store(&memo)
		for b.Loop() {
			c := cur.Load()
			if c.gen != cat.gen {
				b.Fatal("stale")
			}
			v, _ := c.m.Load(string(x.Msg.Name))
			if decls := v.([]modern.ParamHeader); len(decls) != 0 {
				b.Fatal("declarations")
			}
		}
	})
	b.Run("after", func(b *testing.B) { // routing's guard: only a tool with some is checked
		for b.Loop() {
			if len(r.headers) > 0 {
				if rej := checkParamHeaders(r.headers, &x); !rej.OK() {
					b.Fatal(rej.Message)
				}
			}
		}
	})
}
