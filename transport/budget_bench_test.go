package transport

import (
	"io"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/budget"
)

// BenchmarkBudgetHotPath is the cost of the memory budget's bookkeeping on calls whose
// replies stream (every event reserved and released): the same call on two servers,
// budgets on and off, alternating in blocks within one run so that both see the same
// machine. It reports calls per second of each and their ratio (on/off).
func BenchmarkBudgetHotPath(b *testing.B) {
	on := newTestServer(b, serverOpts{reg: RegistryConfig{Budget: budget.New(1<<30, 16<<20)}, cfg: HTTPConfig{InitRate: -1}})
	off := newTestServer(b, serverOpts{reg: RegistryConfig{Budget: nil}, cfg: HTTPConfig{InitRate: -1}})
	servers := []*testServer{off, on}
	sids := []string{off.initialize("2025-06-18"), on.initialize("2025-06-18")}
	call := func(ts *testServer, sid string) {
		resp := ts.do(req{body: `{"jsonrpc":"2.0","id":2,"method":"progress","params":{"count":2,"size":512}}`, headers: sessionHeaders(sid, "2025-06-18")})
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := range servers { // warm both up
		for j := 0; j < 64; j++ {
			call(servers[i], sids[i])
		}
	}
	const block = 32
	var spent [2]time.Duration
	var calls [2]int
	b.ReportAllocs()
	b.ResetTimer()
	for n, round := 0, 0; n < b.N; round++ {
		for _, i := range [2][2]int{{0, 1}, {1, 0}}[round%2] { // each goes first in turn
			k := min(block, b.N-n)
			start := time.Now()
			for j := 0; j < k; j++ {
				call(servers[i], sids[i])
			}
			spent[i] += time.Since(start)
			calls[i] += k
			n += k
		}
	}
	b.StopTimer()
	rate := func(i int) float64 { return float64(calls[i]) / spent[i].Seconds() }
	if calls[0] > 0 && calls[1] > 0 {
		b.ReportMetric(rate(0), "calls/s-off")
		b.ReportMetric(rate(1), "calls/s-on")
		b.ReportMetric(rate(1)/rate(0), "on/off")
	}
}
