package stats

import (
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/client"
)

func TestRecorder(t *testing.T) {
	ops := []Op{{Method: "tools/call", Name: "echo", Primary: true}, {Method: "connect"}}
	r := New(ops, 3)
	ms := int64(time.Millisecond)
	samples := []Sample{
		{Op: 0, Intended: 0, Sent: 0, Done: 1 * ms, Measured: true},
		{Op: 0, Intended: 0, Sent: 4 * ms, Done: 5 * ms, Measured: true, Paced: true, Late: true, Starved: true},
		{Op: 0, Intended: 10 * ms, Sent: 10 * ms, Done: 12 * ms, Measured: true, Paced: true},
		{Op: 0, Sent: 0, Done: 9 * ms, Measured: true, Err: ErrKey{Class: client.ClassHTTP, Code: 503}},
		{Op: 0, Sent: 0, Done: 9 * ms, Measured: true, Err: ErrKey{Class: client.ClassTimeout}},
		{Op: 0, Sent: 0, Done: 100 * ms, Measured: false}, // warm-up
		{Op: 1, Sent: 0, Done: 3 * ms, Measured: true},
	}
	for i, s := range samples {
		r.Record(i, s)
	}
	var iv Interval
	r.TakeInterval(&iv)
	// The interval covers primary operations, measured or not.
	if iv.Completed != 6 || iv.Errors != 2 || iv.Latency.TotalCount() != 4 {
		t.Errorf("interval completed %d errors %d latencies %d", iv.Completed, iv.Errors, iv.Latency.TotalCount())
	}
	r.TakeInterval(&iv)
	if iv.Completed != 0 || iv.Latency.TotalCount() != 0 {
		t.Error("interval not reset")
	}
	totals, p := r.Totals()
	call := totals[0]
	if call.Count != 5 || call.Errors != 2 || call.Corrected.TotalCount() != 3 {
		t.Errorf("count %d errors %d latencies %d", call.Count, call.Errors, call.Corrected.TotalCount())
	}
	if call.ByErr[ErrKey{Class: client.ClassHTTP, Code: 503}] != 1 || call.ByErr[ErrKey{Class: client.ClassTimeout}] != 1 {
		t.Errorf("by error %v", call.ByErr)
	}
	// The late sample: corrected from intended (5ms), uncorrected from sent (1ms).
	if got := call.Corrected.Max(); !call.Corrected.ValuesAreEquivalent(got, 12*ms-10*ms) && !call.Corrected.ValuesAreEquivalent(got, 5*ms) {
		t.Errorf("corrected max %v", time.Duration(got))
	}
	if got := call.Uncorrected.Max(); !call.Uncorrected.ValuesAreEquivalent(got, 2*ms) {
		t.Errorf("uncorrected max %v, want 2ms", time.Duration(got))
	}
	if p.Sends != 2 || p.Late != 1 || p.Starved != 1 || p.Excluded != 1 {
		t.Errorf("pacing %+v", p)
	}
	if totals[1].Count != 1 || totals[1].Op.Primary {
		t.Errorf("connect totals %+v", totals[1])
	}
}

func TestErrKeyString(t *testing.T) {
	tests := []struct {
		k    ErrKey
		want string
	}{
		{ErrKey{Class: client.ClassHTTP, Code: 503}, "http_503"},
		{ErrKey{Class: client.ClassJSONRPC, Code: -32601}, "jsonrpc_-32601"},
		{ErrKey{Class: client.ClassTimeout}, "timeout"},
		{ErrKey{Class: client.ClassTransport}, "transport"},
		{ErrKey{Class: client.ClassTool}, "tool_error"},
		{ErrKey{Class: client.ClassProtocol}, "protocol"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.k, got, tt.want)
		}
	}
}

func TestConcurrentRecord(t *testing.T) {
	r := New([]Op{{Method: "ping", Primary: true}}, 4)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				r.Record(w, Sample{Done: int64(i + 1), Measured: true})
			}
		}()
	}
	var iv Interval
	for range 10 {
		r.TakeInterval(&iv) // concurrent with recording
	}
	wg.Wait()
	totals, _ := r.Totals()
	if totals[0].Count != 8000 {
		t.Errorf("count %d, want 8000", totals[0].Count)
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	r := New([]Op{{Method: "ping", Primary: true}}, 1)
	r.Record(0, Sample{Done: 1, Measured: true}) // first sample allocates the histograms
	allocs := testing.AllocsPerRun(1000, func() {
		r.Record(0, Sample{Sent: 0, Done: 12345, Measured: true})
	})
	if allocs != 0 {
		t.Errorf("Record allocates %v times", allocs)
	}
}

func BenchmarkRecord(b *testing.B) {
	r := New([]Op{{Method: "ping", Primary: true}}, 4)
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		r.Record(0, Sample{Intended: 0, Sent: 10, Done: 1000 + i%100000, Measured: true})
	}
}

// BenchmarkRecordParallel records from several goroutines, each into its own shard
// as the runner's workers do.
func BenchmarkRecordParallel(b *testing.B) {
	r := New([]Op{{Method: "ping", Primary: true}}, 8)
	var next sync.Mutex
	worker := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		next.Lock()
		w := worker
		worker++
		next.Unlock()
		i := int64(0)
		for pb.Next() {
			i++
			r.Record(w, Sample{Intended: 0, Sent: 10, Done: 1000 + i%100000, Measured: true})
		}
	})
}
