package fleet

import (
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
)

// BenchmarkForwardRoundTrip follows tools/call requests through the whole fleet, one
// at a time: Prepare (routing, track), Run (the upstream session, the wire bytes, the
// send), the backend's answer (backendResponse) and the reply to the client, over an
// in-memory stdio client and a scripted backend. The transport's share is in it too:
// compare runs of the same tree, and allocs/op between trees.
//
// The two eras side by side: a 2025 upstream session, and a 2026-07-28 backend used
// without one, each request carrying its _meta (the extra scan and splice of withMeta).
func BenchmarkForwardRoundTrip(b *testing.B) {
	for _, era := range []struct {
		name   string
		modern bool
	}{{"session-2025", false}, {"stateless-2026", true}} {
		b.Run(era.name, func(b *testing.B) {
			fc := newFleetClientEra(b, time.Minute, era.modern)
			benchToolCalls(b, fc)
		})
	}
}

// benchCall is the tools/call the round-trip benchmarks send.
const benchCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{}}}`

// benchToolCalls times b.N tools/call round trips through fc, one at a time.
func benchToolCalls(b *testing.B, fc *fleetClient) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCall)))
	b.ResetTimer()
	toolCalls(b, fc, b.N)
}

// toolCalls makes n tools/call round trips through fc, one at a time, the backend
// answering each at once.
func toolCalls(b *testing.B, fc *fleetClient, n int) {
	for range n {
		fc.send(benchCall)
		m := fc.upstream()
		fc.answer(m.ID, `{"content":[]}`)
		if r := fc.read(); r.Kind != codec.KindResult {
			b.Fatalf("client got kind %v, want a result", r.Kind)
		}
	}
}
