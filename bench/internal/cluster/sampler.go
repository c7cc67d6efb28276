package cluster

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
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
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			smp := Sample{At: time.Now(), Usage: Snapshot(refs)}
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
			select {
			case <-t.C:
			case <-s.stop:
				return
			}
		}
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

// Mean is the mean usage of process name over the samples taken in [from, to).
func Mean(samples []Sample, name string, from, to time.Time) (Usage, int) {
	var sum Usage
	n, ng := 0, 0
	for _, s := range samples {
		u, ok := s.Usage[name]
		if !ok || s.At.Before(from) || !s.At.Before(to) {
			continue
		}
		sum.RSS += u.RSS
		sum.FDs += u.FDs
		sum.Threads += u.Threads
		if u.Goroutines >= 0 {
			sum.Goroutines += u.Goroutines
			ng++
		}
		n++
	}
	if n == 0 {
		return Usage{Goroutines: -1}, 0
	}
	m := Usage{RSS: sum.RSS / int64(n), FDs: sum.FDs / n, Threads: sum.Threads / n, Goroutines: -1}
	if ng > 0 {
		m.Goroutines = sum.Goroutines / ng
	}
	return m, n
}

// WriteSamples writes the samples as tab-separated lines (seconds since the first
// sample, process, resident KiB, descriptors, goroutines) for a look at how each figure
// moved over the run: a bound being filled levels off, a leak does not.
func WriteSamples(path string, samples []Sample) error {
	var b strings.Builder
	b.WriteString("t_s\tprocess\trss_kib\tfds\tgoroutines\n")
	for _, s := range samples {
		for _, name := range slices.Sorted(maps.Keys(s.Usage)) {
			u := s.Usage[name]
			fmt.Fprintf(&b, "%.0f\t%s\t%d\t%d\t%d\n", s.At.Sub(samples[0].At).Seconds(), name, u.RSS>>10, u.FDs, u.Goroutines)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
