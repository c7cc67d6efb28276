package cluster

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcprouter/mcprouter/bench/compare"
	"github.com/mcprouter/mcprouter/loadgen"
)

// Usage is what a process holds at one moment, from /proc (and, for a router, its
// metrics).
type Usage struct {
	RSS        int64 // resident bytes
	FDs        int   // open descriptors
	Threads    int
	Goroutines int // -1 when the process exposes no metrics
	// Heap is the Go heap's allocated bytes (go_memstats_heap_alloc_bytes), -1 when
	// the process exposes no metrics. Its floor over a few samples is close to the live
	// heap after a collection: what a leak raises. Resident memory follows the heap's
	// peaks instead (the collector lets the heap grow to twice the live bytes, and the
	// runtime gives freed pages back lazily), so one burst raises it for a while.
	Heap int64
	// CPU is the CPU time (user and system) the process has used so far, its running
	// and reaped children's included (a router's stdio backends): a figure that grows,
	// read at two moments for a rate.
	CPU time.Duration
	// RunqueueWait is how long the process's threads have waited, runnable, for a CPU
	// so far (schedstat): it grows fast when other processes take the CPUs.
	RunqueueWait time.Duration
}

func (u Usage) String() string {
	g, h := "-", ""
	if u.Goroutines >= 0 {
		g = strconv.Itoa(u.Goroutines)
	}
	if u.Heap >= 0 {
		h = fmt.Sprintf(", heap %.1f MiB", float64(u.Heap)/(1<<20))
	}
	return fmt.Sprintf("rss %.1f MiB%s, fds %d, goroutines %s", float64(u.RSS)/(1<<20), h, u.FDs, g)
}

// ReadUsage reads pid's usage; metricsURL, when not empty, is scraped for
// go_goroutines and go_memstats_heap_alloc_bytes.
func ReadUsage(pid int, metricsURL string) (Usage, error) {
	u := Usage{Goroutines: -1, Heap: -1}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		switch {
		case k == "VmRSS" && len(f) > 0:
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			u.RSS = kb << 10
		case k == "Threads" && len(f) > 0:
			u.Threads, _ = strconv.Atoi(f[0])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return u, err
	}
	u.FDs = len(fds)
	if u.CPU, err = compare.ProcCPU(pid); err != nil {
		return u, err
	}
	u.RunqueueWait = loadgen.RunqueueWait(pid)
	if metricsURL != "" {
		if m, err := Metrics(metricsURL, "go_goroutines", "go_memstats_heap_alloc_bytes"); err == nil {
			u.Goroutines, u.Heap = int(m[0]), int64(m[1])
		}
	}
	return u, nil
}

// Metric reads one unlabelled series from a Prometheus text endpoint.
func Metric(url, name string) (float64, error) {
	m, err := Metrics(url, name)
	if err != nil {
		return 0, err
	}
	return m[0], nil
}

// Metrics reads unlabelled series from a Prometheus text endpoint in one scrape, in
// the order of names; an error when one is missing.
func Metrics(url string, names ...string) ([]float64, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make([]float64, len(names))
	found := 0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && found < len(names) {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if i := slices.Index(names, name); ok && i >= 0 {
			if out[i], err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				return nil, err
			}
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if found < len(names) {
		return nil, fmt.Errorf("%s: not every one of %v", url, names)
	}
	return out, nil
}

// Children returns the PIDs of pid's child processes (a router's stdio backends).
func Children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
