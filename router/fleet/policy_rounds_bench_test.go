//go:build unix

package fleet

import (
	"slices"
	"testing"
	"time"
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
	var sumNone, sumPol phase
	var wall, cpu []float64
	b.ReportAllocs()
	b.ResetTimer()
	for r := range rounds {
		var pn, pp phase
		if r%2 == 0 {
			pn.run(b, none, n)
			pp.run(b, pol, n)
		} else {
			pp.run(b, pol, n)
			pn.run(b, none, n)
		}
		wall = append(wall, float64(pn.wall)/float64(pp.wall))
		cpu = append(cpu, float64(pn.cpu)/float64(max(pp.cpu, 1)))
		sumNone.wall, sumNone.cpu = sumNone.wall+pn.wall, sumNone.cpu+pn.cpu
		sumPol.wall, sumPol.cpu = sumPol.wall+pp.wall, sumPol.cpu+pp.cpu
	}
	calls := float64(rounds * n)
	b.ReportMetric(float64(sumNone.wall)/calls, "none-ns/call")
	b.ReportMetric(float64(sumPol.wall)/calls, "policy-ns/call")
	b.ReportMetric(float64(sumNone.cpu)/calls, "none-cpu-ns/call")
	b.ReportMetric(float64(sumPol.cpu)/calls, "policy-cpu-ns/call")
	b.ReportMetric(median(wall), "ratio")
	b.ReportMetric(median(cpu), "cpu-ratio")
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
	var sumU, sumF phase
	var wall, cpu []float64
	b.ReportAllocs()
	b.ResetTimer()
	for r := range rounds {
		var pu, pf phase
		if r%2 == 0 {
			run(&pu, false)
			run(&pf, true)
		} else {
			run(&pf, true)
			run(&pu, false)
		}
		wall = append(wall, float64(pu.wall)/float64(pf.wall))
		cpu = append(cpu, float64(pu.cpu)/float64(max(pf.cpu, 1)))
		sumU.wall, sumU.cpu = sumU.wall+pu.wall, sumU.cpu+pu.cpu
		sumF.wall, sumF.cpu = sumF.wall+pf.wall, sumF.cpu+pf.cpu
	}
	lists := float64(rounds * n)
	b.ReportMetric(float64(sumU.wall)/lists, "unfiltered-ns/list")
	b.ReportMetric(float64(sumF.wall)/lists, "filtered-ns/list")
	b.ReportMetric(float64(sumU.cpu)/lists, "unfiltered-cpu-ns/list")
	b.ReportMetric(float64(sumF.cpu)/lists, "filtered-cpu-ns/list")
	b.ReportMetric(median(wall), "ratio")
	b.ReportMetric(median(cpu), "cpu-ratio")
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}
