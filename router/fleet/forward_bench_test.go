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
func BenchmarkForwardRoundTrip(b *testing.B) {
	fc := newFleetClient(b, time.Minute)
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{}}}`
	b.ReportAllocs()
	b.SetBytes(int64(len(req)))
	b.ResetTimer()
	for range b.N {
		fc.send(req)
		m := fc.upstream()
		fc.answer(m.ID, `{"content":[]}`)
		if r := fc.read(); r.Kind != codec.KindResult {
			b.Fatalf("client got kind %v, want a result", r.Kind)
		}
	}
}
