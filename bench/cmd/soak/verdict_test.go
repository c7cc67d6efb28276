package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/bench/internal/cluster"
	"github.com/mcprouter/mcprouter/loadgen/report"
)

// half is what a synthetic run shows in its first or its second minute.
type half struct {
	rate, p99, directP99 float64 // calls/s served, p99 (µs) of the routed and direct calls
	routerCPU, webCPU    float64 // CPU per call (µs) of the routers (together) and the backend
	wait                 float64 // the routers' run-queue wait, ms per second (together)
	rss, heap            int64   // each router's resident memory and Go heap floor, MiB
}

// synthetic is a 2-minute run: a first minute, then a second one, with steady figures
// in each (the compared windows are the first and last 30s).
func synthetic(first, second half) *verdict {
	start := time.Unix(1_000_000, 0)
	v := &verdict{duration: 2 * time.Minute, start: start, routers: []string{"router0", "router1"}, backend: "web0",
		calls: &report.Report{}, churn: &report.Report{}, probe: &report.Report{}}
	var rCPU, wCPU, wait time.Duration
	for s := range 121 {
		h := first
		if s > 60 {
			h = second
		}
		if s > 0 {
			v.calls.Series = append(v.calls.Series, report.Second{T: float64(s), Done: int64(h.rate), RPS: h.rate, P99: h.p99})
			v.probe.Series = append(v.probe.Series, report.Second{T: float64(s), Done: 50, RPS: 50, P99: h.directP99})
			rCPU += time.Duration(h.routerCPU*h.rate/2) * time.Microsecond
			wCPU += time.Duration(h.webCPU*h.rate) * time.Microsecond
			wait += time.Duration(h.wait/2) * time.Millisecond
		}
		u := cluster.Usage{RSS: h.rss << 20, Heap: h.heap << 20, FDs: 80, Goroutines: 100, CPU: rCPU, RunqueueWait: wait}
		v.samples = append(v.samples, cluster.Sample{At: start.Add(time.Duration(s) * time.Second), Usage: map[string]cluster.Usage{
			"router0": u, "router1": u, "web0": {RSS: 18 << 20, Heap: -1, FDs: 40, Goroutines: -1, CPU: wCPU}}})
	}
	return v
}

// TestDriftChecks: each drift check passes when what moved is the machine (its
// reference moved as much, or the routers starved) and fails when the routers drifted.
func TestDriftChecks(t *testing.T) {
	steady := half{rate: 4000, p99: 12000, directP99: 8000, routerCPU: 110, webCPU: 22, wait: 1000, rss: 45, heap: 12}
	with := func(f func(*half)) half { h := steady; f(&h); return h }
	for _, tc := range []struct {
		name   string
		second half
		fail   []string // the checks that fail, by the start of their name
	}{
		{"steady", steady, nil},
		{"neighbours slow everything", with(func(h *half) { h.p99, h.directP99 = 30000, 20000 }), nil},
		{"busy machine: cheaper calls everywhere", with(func(h *half) { h.routerCPU, h.webCPU = 75, 15 }), nil},
		{"quiet machine: dearer calls everywhere", with(func(h *half) { h.routerCPU, h.webCPU = 150, 30 }), nil},
		{"routers starved", with(func(h *half) { h.rate, h.p99, h.directP99, h.wait = 3600, 800000, 30000, 2500 }), nil},
		{"routers dearer", with(func(h *half) { h.routerCPU = 150 }), []string{"router CPU per call"}},
		{"routers slower", with(func(h *half) { h.p99 = 30000 }), []string{"p99"}},
		{"routers behind", with(func(h *half) { h.rate = 3600 }), []string{"throughput"}},
		{"resident memory follows a heap peak", with(func(h *half) { h.rss = 48 }), nil},
		{"heap floor grows", with(func(h *half) { h.heap = 15 }), []string{"router0 flat", "router1 flat"}},
		{"resident memory keeps growing", with(func(h *half) { h.rss = 52 }), []string{"router0 flat", "router1 flat"}},
		{"routers dearer and starved", with(func(h *half) { h.routerCPU, h.rate, h.p99, h.wait = 150, 3600, 800000, 2500 }),
			[]string{"throughput", "router CPU per call", "p99"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var failed []string
			for _, c := range synthetic(steady, tc.second).checks() {
				if !c.Pass {
					failed = append(failed, c.What+": "+c.Figure)
				}
			}
			if len(failed) != len(tc.fail) {
				t.Fatalf("failed %q, want those starting %q", failed, tc.fail)
			}
			for i, want := range tc.fail {
				if !strings.HasPrefix(failed[i], want) {
					t.Errorf("failed %q, want those starting %q", failed, tc.fail)
				}
			}
		})
	}
}
