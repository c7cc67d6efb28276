//go:build unix

package fleet

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/tracing"
	"github.com/mcprouter/mcprouter/transport"
)

// BenchmarkTracingOverhead is BenchmarkForwardRoundTrip's tools/call round trip with
// tracing off, and with tracing on but not sampling (sample_ratio 0, a client sending
// no trace context): what a router in its default configuration (metrics on) pays for
// having tracing on, on the requests it does not record. Both fleets run in the same process, in interleaved rounds (each round
// alternating which goes first), so that the machine's drift hits both alike.
//
// The figures are per call: wall time, and the process's CPU time (user and system),
// which a loaded shared machine distorts far less. ratio and cpu-ratio are off's over
// unsampled's: at least 0.98 is the goal (on-but-unsampled within 2% of off).
func BenchmarkTracingOverhead(b *testing.B) {
	b.Setenv("OTEL_SDK_DISABLED", "")
	b.Setenv("OTEL_TRACES_EXPORTER", "")
	zero := 0.0
	tr, err := tracing.New(context.Background(), tracing.Config{Enabled: true, Endpoint: "127.0.0.1:1", Insecure: true, SampleRatio: &zero}, "bench")
	if err != nil || tr == nil {
		b.Fatalf("tracer %v: %v", tr, err)
	}
	b.Cleanup(func() { tr.Shutdown(context.Background()) })

	// Both report to an observer, as the router's metrics are on by default; with
	// tracing on, the tracing observer ends the traces before handing over.
	fOff, upOff := newScriptedFleet(b, time.Minute, false)
	fOff.SetObserver(new(countObserver))
	off := attachClient(b, fOff, upOff)
	fOn, upOn := newScriptedFleet(b, time.Minute, false)
	fOn.SetObserver(tracing.Observe(new(countObserver)))
	on := attachTracedClient(b, fOn, upOn, tr)

	const rounds = 16
	n := max(b.N/(2*rounds), 1)
	var offT, onT phase
	b.ReportAllocs()
	b.SetBytes(int64(len(benchCall)))
	b.ResetTimer()
	for r := range rounds {
		if r%2 == 0 {
			offT.run(b, off, n)
			onT.run(b, on, n)
		} else {
			onT.run(b, on, n)
			offT.run(b, off, n)
		}
	}
	calls := float64(rounds * n)
	b.ReportMetric(float64(offT.wall)/calls, "off-ns/call")
	b.ReportMetric(float64(onT.wall)/calls, "unsampled-ns/call")
	b.ReportMetric(float64(offT.wall)/float64(onT.wall), "ratio")
	b.ReportMetric(float64(offT.cpu)/calls, "off-cpu-ns/call")
	b.ReportMetric(float64(onT.cpu)/calls, "unsampled-cpu-ns/call")
	b.ReportMetric(float64(offT.cpu)/float64(onT.cpu), "cpu-ratio")
}

// countObserver counts finished requests: the cheapest stand-in for the metrics.
type countObserver struct{ n atomic.Uint64 }

func (o *countObserver) RequestDone(*transport.Exchange, int, router.Outcome, int64, int64) {
	o.n.Add(1)
}

func (o *countObserver) FanOutDelivered(int64) {}

// phase adds up the wall and CPU time of one side's rounds.
type phase struct{ wall, cpu time.Duration }

func (p *phase) run(b *testing.B, fc *fleetClient, n int) {
	c0, t0 := cpuTime(), time.Now()
	toolCalls(b, fc, n)
	p.wall += time.Since(t0)
	p.cpu += cpuTime() - c0
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
