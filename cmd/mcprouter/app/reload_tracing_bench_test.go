package app

import (
	"testing"

	"github.com/mcprouter/mcprouter/transport"
)

// BenchmarkTracerSwitchOff is what a reloadable tracer costs a request with tracing
// off: the router's Config.Tracer is always the switch, which finds no tracer.
func BenchmarkTracerSwitchOff(b *testing.B) {
	var s TracerSwitch
	var tracer interface{ Start(*transport.Exchange) } = &s
	x := new(transport.Exchange)
	b.ReportAllocs()
	for b.Loop() {
		tracer.Start(x)
	}
}
