package transport

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport/budget"
)

// BenchmarkBudgetHotPath is the cost of the memory budget's bookkeeping on calls whose
// replies stream (every event reserved and released): the same call on two servers,
// budgets on and off, alternating in blocks within one run so that both see the same
// machine. It reports calls per second of each, their ratio (on/off), and the median of
// the ratios of adjacent blocks, which a burst of other work on the machine moves less.
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
	var ratios []float64 // per round of one block each: robust to the machine's bursts
	b.ReportAllocs()
	b.ResetTimer()
	for n, round := 0, 0; n < b.N; round++ {
		var took [2]time.Duration
		for _, i := range [2][2]int{{0, 1}, {1, 0}}[round%2] { // each goes first in turn
			k := min(block, b.N-n)
			start := time.Now()
			for j := 0; j < k; j++ {
				call(servers[i], sids[i])
			}
			took[i] = time.Since(start) / time.Duration(max(k, 1))
			spent[i] += time.Since(start)
			calls[i] += k
			n += k
		}
		if took[0] > 0 && took[1] > 0 {
			ratios = append(ratios, float64(took[0])/float64(took[1]))
		}
	}
	b.StopTimer()
	rate := func(i int) float64 { return float64(calls[i]) / spent[i].Seconds() }
	if calls[0] > 0 && calls[1] > 0 && len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(rate(0), "calls/s-off")
		b.ReportMetric(rate(1), "calls/s-on")
		b.ReportMetric(rate(1)/rate(0), "on/off")
		b.ReportMetric(ratios[len(ratios)/2], "median-on/off")
	}
}
