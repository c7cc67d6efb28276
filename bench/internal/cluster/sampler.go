package cluster

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Sample is every measured process's usage at one moment.
type Sample struct {
	At    time.Time
	Usage map[string]Usage
}

// Sampler reads the usage of a fixed set of processes at a period until stopped.
type Sampler struct {
	mu      sync.Mutex
	samples []Sample
	stop    chan struct{}
	done    chan struct{}
}

// StartSampler samples refs every period.
func StartSampler(refs map[string]ProcRef, period time.Duration) *Sampler {
	s := &Sampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := func() {
		smp := Sample{At: time.Now(), Usage: Snapshot(refs)}
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
	}
	go func() {
		defer close(s.done)
		sample()
		ctxtime.Every(s.stop, period, sample)
	}()
	return s
}

// Stop ends the sampling and returns the samples.
func (s *Sampler) Stop() []Sample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// Level is the level of process name's usage over the samples taken in [from, to):
// the mean resident memory, and the least descriptors, goroutines and heap seen.
// Calls in flight, connecting sessions and a machine that slows everything down
// raise the peaks of the counts (each in-flight connection is a descriptor and a
// goroutine or two), allocations between two collections the heap's; what leaks
// raises their floor.
func Level(samples []Sample, name string, from, to time.Time) (Usage, int) {
	var rss int64
	m := Usage{Goroutines: -1, Heap: -1}
	n := 0
	for _, s := range samples {
		u, ok := s.Usage[name]
		if !ok || s.At.Before(from) || !s.At.Before(to) {
			continue
		}
		rss += u.RSS
		if n == 0 || u.FDs < m.FDs {
			m.FDs = u.FDs
		}
		if n == 0 || u.Threads < m.Threads {
			m.Threads = u.Threads
		}
		if u.Goroutines >= 0 && (m.Goroutines < 0 || u.Goroutines < m.Goroutines) {
			m.Goroutines = u.Goroutines
		}
		if u.Heap >= 0 && (m.Heap < 0 || u.Heap < m.Heap) {
			m.Heap = u.Heap
		}
		n++
	}
	if n > 0 {
		m.RSS = rss / int64(n)
	}
	return m, n
}

// Delta is what process name spent between the first sample taken at or after from
// and the last taken at or before to: CPU time, run-queue wait, and the time between
// those samples (all 0 when fewer than two samples fall in [from, to]).
func Delta(samples []Sample, name string, from, to time.Time) (cpu, wait, span time.Duration) {
	var first, last *Sample
	for i := range samples {
		s := &samples[i]
		if _, ok := s.Usage[name]; !ok || s.At.Before(from) || s.At.After(to) {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
	}
	if first == nil || last == first {
		return 0, 0, 0
	}
	a, b := first.Usage[name], last.Usage[name]
	return b.CPU - a.CPU, b.RunqueueWait - a.RunqueueWait, last.At.Sub(first.At)
}

// WriteSamples writes the samples as tab-separated lines (seconds since the first
// sample, process, resident KiB, descriptors, goroutines, heap KiB, then CPU seconds and
// run-queue wait seconds so far) for a look at how each figure
// moved over the run: a bound being filled levels off, a leak does not.
func WriteSamples(path string, samples []Sample) error {
	var b strings.Builder
	b.WriteString("t_s\tprocess\trss_kib\tfds\tgoroutines\theap_kib\tcpu_s\trunq_s\n")
	for _, s := range samples {
		for _, name := range slices.Sorted(maps.Keys(s.Usage)) {
			u := s.Usage[name]
			fmt.Fprintf(&b, "%.0f\t%s\t%d\t%d\t%d\t%d\t%.2f\t%.2f\n", s.At.Sub(samples[0].At).Seconds(), name, u.RSS>>10, u.FDs, u.Goroutines, u.Heap>>10,
				u.CPU.Seconds(), u.RunqueueWait.Seconds())
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
