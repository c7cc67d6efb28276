package policy

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// BenchmarkSyncClusterBound measures the cluster-wide limit's error on the real clock:
// three instances, each with its own NATS connection to one server and its own sync
// ticker, offered 18x the rate of one principal's limit for three seconds (3 attempts
// every 5 ms per instance). It reports, for windows of 100 ms, 1 s and the whole run,
// the most requests the cluster admitted against the bound documented on Sync,
// r·T + b + (N−1)·(b + r·d), with d the sync interval; and the same run unshared, which
// the bound must not hold for. Run it once: -benchtime 1x.
func BenchmarkSyncClusterBound(b *testing.B) {
	const (
		n        = 3
		rate     = 100.0
		burst    = 20
		interval = 100 * time.Millisecond
		tick     = 5 * time.Millisecond
		attempts = 3
		duration = 3 * time.Second
	)
	ns := startNATS(b)
	lim := Limit{Name: "p", Key: KeyParts{KeyPrincipal}, Rate: rate, Burst: burst}
	run := func(shared bool) []int64 {
		start := time.Now()
		var mu sync.Mutex
		var admitted []int64
		var wg sync.WaitGroup
		for range n {
			l := NewLimiter(LimiterOptions{})
			e := limitsEngine(b, l, lim)
			if shared {
				s, err := StartSync(l, connect(b, ns), SyncOptions{Subject: "bench.policy.limits", Interval: interval, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
			}
			req := mustInput(b, call("t", ""))
			wg.Go(func() {
				tk := time.NewTicker(tick)
				defer tk.Stop()
				for time.Since(start) < duration {
					<-tk.C
					for range attempts {
						if e.Take(alice, req).Allowed {
							mu.Lock()
							admitted = append(admitted, int64(time.Since(start)))
							mu.Unlock()
						}
					}
				}
			})
		}
		wg.Wait()
		return admitted
	}
	bound := func(T time.Duration) float64 {
		return rate*T.Seconds() + burst + (n-1)*(burst+rate*interval.Seconds())
	}
	for i := 0; i < b.N; i++ {
		shared, alone := run(true), run(false)
		for _, T := range []time.Duration{interval, time.Second, duration} {
			worst, _ := maxInWindow(shared, T, time.Millisecond)
			unshared, _ := maxInWindow(alone, T, time.Millisecond)
			b.ReportMetric(float64(worst), fmt.Sprintf("admitted/%v", T))
			b.ReportMetric(bound(T), fmt.Sprintf("bound/%v", T))
			b.ReportMetric(float64(unshared), fmt.Sprintf("unshared/%v", T))
		}
	}
}
