package loadgen

import (
	"math"
	"runtime"
	"time"

	"github.com/mcprouter/mcprouter/loadgen/report"
	"github.com/mcprouter/mcprouter/loadgen/stats"
)

// saturation is the share of the usable CPU above which a second counts as saturated.
const saturation = 0.9

// monitor ticks about once a second: it collects the interval figures for the live view
// and the time series, and samples the process's own CPU time to detect saturation.
// Ticks are aligned on the start of the measured window so that each series point is
// one whole second of it.
func (r *run) monitor(progress func(Progress), stop <-chan struct{}) {
	var iv stats.Interval
	const second = int64(time.Second)
	avail := float64(min(runtime.GOMAXPROCS(0), runtime.NumCPU())) * 100
	last := r.now()
	lastCPU, lastWait := processCPU(), runqueueWait()
	var cum, cumErr int64
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	next := last + second
	ready := r.ready
	for {
		if mf := r.measureFrom.Load(); mf != never {
			if last < mf {
				next = min(next, mf) // one short tick so that the series starts on the window
			} else {
				next = mf + ((last-mf)/second+1)*second // the next whole second of the window
			}
		}
		timer.Reset(time.Duration(next - r.now()))
		final := false
		select {
		case <-timer.C:
		case <-ready:
			// The clock just started: plan the ticks on the measured window.
			ready = nil
			timer.Stop()
			continue
		case <-stop:
			final = true
		}
		now := r.now()
		cpu, wait := processCPU(), runqueueWait()
		r.rec.TakeInterval(&iv)
		wall := now - last
		if wall <= 0 {
			wall = 1
		}
		cpuPct := 100 * float64(cpu-lastCPU) / float64(wall)
		waitPct := 100 * float64(wait-lastWait) / float64(wall)
		rps := float64(iv.Completed) * 1e9 / float64(wall)
		mf, end := r.measureFrom.Load(), r.end.Load()
		measured := mf != never && last >= mf-int64(time.Millisecond) && last < end
		if measured {
			cum += iv.Completed
			cumErr += iv.Errors
			pct := iv.Latency.ValueAtPercentiles([]float64{50, 90, 99})
			r.series = append(r.series, report.Second{
				T: round3(float64(now-mf) / 1e9), Done: iv.Completed, Errors: iv.Errors, RPS: round3(rps),
				P50: us(pct[50]), P90: us(pct[90]), P99: us(pct[99]), Max: us(iv.Latency.Max()), CPU: round3(cpuPct),
			})
			// A short final tick says little about saturation.
			if wall >= second/2 {
				r.cpuSeconds++
				r.cpuSum += cpuPct
				r.cpuMax = max(r.cpuMax, cpuPct)
				r.waitSum += waitPct
				// The generator is CPU-bound when the CPU it used plus the time its threads
				// waited for a CPU fill the CPUs it may use: whether its own work or other
				// processes keep it from running, it cannot act on time.
				if cpuPct+waitPct >= saturation*avail {
					r.saturatedSeconds++
				}
			}
		}
		if progress != nil {
			p := Progress{Elapsed: time.Duration(now), RPS: rps, Completed: iv.Completed, Errors: iv.Errors, Requests: cum, TotalErrors: cumErr,
				Sessions: r.live.Load(), CPU: cpuPct,
				P50: time.Duration(iv.Latency.ValueAtPercentile(50)), P99: time.Duration(iv.Latency.ValueAtPercentile(99))}
			if iv.Errors > 0 {
				p.LastErrorClass, p.LastError = r.errs.latest()
			}
			switch {
			case r.t0.Load() == never:
				p.Phase = "connecting"
			case now < mf:
				p.Phase, p.Remaining = "warm-up", time.Duration(end-now)
			case now < end:
				p.Phase, p.Remaining = "measuring", time.Duration(end-now)
			default:
				p.Phase = "draining"
			}
			progress(p)
		}
		if final {
			return
		}
		last, lastCPU, lastWait = now, cpu, wait
		next = now + second
	}
}

func us(ns int64) float64 { return round3(float64(ns) / 1e3) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
