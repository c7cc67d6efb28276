package tracing

import (
	"testing"

	"github.com/mcprouter/mcprouter/router"
)

// BenchmarkStartUnsampled is what an unsampled request without a client's trace
// context costs the router with tracing on: the trace's start and its end.
func BenchmarkStartUnsampled(b *testing.B) {
	tr, _ := recorded(&testing.T{}, 0)
	x := exchange(&testing.T{}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__echo","arguments":{}}}`)
	obs := Observe(nil)
	b.ReportAllocs()
	for range b.N {
		tr.Start(x)
		obs.RequestDone(x, 0, router.OutcomeOK, 0, 0)
		x.Trace = nil
	}
}
