//go:build unix

package fleet

import (
	"slices"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
)

// BenchmarkPolicyRounds is BenchmarkForwardPolicy for the figure on a loaded
// machine: the fleet without a policy and the fleet with benchPolicy (20 rules and a
// rate limit) in one process, in interleaved rounds (each round alternating which goes
// first), so that the machine's drift hits both alike. ratio and cpu-ratio are the
// median over the rounds of none's time over the policy's, by wall and by the
// process's CPU time (user and system): the policy's calls per second as a fraction of
// none's. At least 0.95 is the goal.
func BenchmarkPolicyRounds(b *testing.B) {
	fNone, upNone := newScriptedFleet(b, time.Minute, false)
	none := attachClient(b, fNone, upNone)
	fPol, upPol := newScriptedFleet(b, time.Minute, false)
	fPol.SetPolicy(benchPolicy(b))
	pol := attachClient(b, fPol, upPol)
	toolCalls(b, none, 100) // warm both (the policy's plan cache, pools)
	toolCalls(b, pol, 100)

	const rounds = 16
	n := max(b.N/(2*rounds), 1)
	b.ReportAllocs()
	b.ResetTimer()
	sumNone, sumPol := interleave(b, rounds,
		func(p *phase) { p.run(b, none, n) },
		func(p *phase) { p.run(b, pol, n) })
	calls := float64(rounds * n)
	b.ReportMetric(float64(sumNone.wall)/calls, "none-ns/call")
	b.ReportMetric(float64(sumPol.wall)/calls, "policy-ns/call")
	b.ReportMetric(float64(sumNone.cpu)/calls, "none-cpu-ns/call")
	b.ReportMetric(float64(sumPol.cpu)/calls, "policy-cpu-ns/call")
}

// BenchmarkAdmit is the policy's share of BenchmarkPolicyRounds alone: admit of one
// routed tools/call under benchPolicy (20 rules and a rate limit), from the scanned
// message to the verdict, for an anonymous session and for an authenticated one.
// cpu-ns/op is the process's CPU time per call, which a loaded machine distorts less
// than the wall time.
func BenchmarkAdmit(b *testing.B) {
	for _, pr := range []*auth.Principal{nil, {Subject: "svc", Scopes: []string{"tools"}}} {
		name := "anonymous"
		if pr != nil {
			name = "principal"
		}
		b.Run(name, func(b *testing.B) {
			p := &policer{}
			p.eng.Store(&engines{main: benchPolicy(b)})
			x := &transport.Exchange{Principal: pr}
			if err := codec.Scan([]byte(benchCall), &x.Msg); err != nil {
				b.Fatal(err)
			}
			bk := &backend{cfg: BackendConfig{Name: "a"}}
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				if !p.admit(nil, nil, x, bk) {
					b.Fatal("refused")
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkListPolicyRounds is BenchmarkListPolicy's two listings of 1,000 tools
// (unfiltered, and filtered to the 10% a principal may use) in interleaved rounds;
// ratio and cpu-ratio are the median of the unfiltered listing's time over the
// filtered one's.
func BenchmarkListPolicyRounds(b *testing.B) {
	lb := newListBench(b)
	lb.listAll(b, nil)
	lb.listAll(b, lb.e)
	const rounds = 16
	n := max(b.N/(2*rounds), 1)
	run := func(p *phase, filtered bool) {
		e := lb.e
		if !filtered {
			e = nil
		}
		c0, t0 := cpuTime(), time.Now()
		for range n {
			lb.listAll(b, e)
		}
		p.wall += time.Since(t0)
		p.cpu += cpuTime() - c0
	}
	b.ReportAllocs()
	b.ResetTimer()
	sumU, sumF := interleave(b, rounds,
		func(p *phase) { run(p, false) },
		func(p *phase) { run(p, true) })
	lists := float64(rounds * n)
	b.ReportMetric(float64(sumU.wall)/lists, "unfiltered-ns/list")
	b.ReportMetric(float64(sumF.wall)/lists, "filtered-ns/list")
	b.ReportMetric(float64(sumU.cpu)/lists, "unfiltered-cpu-ns/list")
	b.ReportMetric(float64(sumF.cpu)/lists, "filtered-cpu-ns/list")
}

// interleave runs a and c for rounds rounds, alternating which goes first, and
// reports ratio and cpu-ratio: the median over the rounds of a's time over c's, by
// wall and by CPU time. It returns each side's totals.
func interleave(b *testing.B, rounds int, a, c func(*phase)) (sumA, sumC phase) {
	var wall, cpu []float64
	for r := range rounds {
		var pa, pc phase
		if r%2 == 0 {
			a(&pa)
			c(&pc)
		} else {
			c(&pc)
			a(&pa)
		}
		wall = append(wall, float64(pa.wall)/float64(pc.wall))
		cpu = append(cpu, float64(pa.cpu)/float64(max(pc.cpu, 1)))
		sumA.wall, sumA.cpu = sumA.wall+pa.wall, sumA.cpu+pa.cpu
		sumC.wall, sumC.cpu = sumC.wall+pc.wall, sumC.cpu+pc.cpu
	}
	b.ReportMetric(median(wall), "ratio")
	b.ReportMetric(median(cpu), "cpu-ratio")
	return sumA, sumC
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
