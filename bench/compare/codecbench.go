package compare

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// BenchLine is one result line of `go test -bench` output.
type BenchLine struct {
	// Name is the benchmark name without the -GOMAXPROCS suffix.
	Name       string
	Iterations int64
	// Metrics maps a unit ("ns/op", "B/op", "allocs/op", "MB/s", custom ones such as
	// "cpu-ns/op") to its value.
	Metrics map[string]float64
}

// maxBenchLines bounds how many result lines ParseBench keeps (a runaway output must not
// exhaust memory).
const maxBenchLines = 100000

// ParseBench reads `go test -bench` output and returns its result lines in order; every
// other line (goos, pkg, PASS, logs) is skipped. A line that starts like a result but does
// not parse as one is skipped too: benchmark output may interleave with a benchmark's own
// logging.
func ParseBench(r io.Reader) ([]BenchLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var out []BenchLine
	for sc.Scan() && len(out) < maxBenchLines {
		if l, ok := parseBenchLine(sc.Bytes()); ok {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// parseBenchLine parses "BenchmarkX/y-2  1000  123 ns/op  0 B/op ...".
func parseBenchLine(line []byte) (BenchLine, bool) {
	f := bytes.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !bytes.HasPrefix(f[0], []byte("Benchmark")) {
		return BenchLine{}, false
	}
	n, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || n <= 0 {
		return BenchLine{}, false
	}
	l := BenchLine{Name: stripProcs(string(f[0])), Iterations: n, Metrics: make(map[string]float64, (len(f)-2)/2)}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(string(f[i]), 64)
		if err != nil {
			return BenchLine{}, false
		}
		l.Metrics[string(f[i+1])] = v
	}
	return l, true
}

// stripProcs removes the "-N" GOMAXPROCS suffix the testing package appends.
func stripProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

// BenchSummary is the median of each metric of one benchmark over its repeated runs.
type BenchSummary struct {
	Name    string
	Runs    int
	Metrics map[string]float64
}

// Summarize groups lines by name (in first-seen order) and takes the median of every
// metric over the runs of each benchmark.
func Summarize(lines []BenchLine) []BenchSummary {
	var order []string
	byName := map[string][]BenchLine{}
	for _, l := range lines {
		if _, ok := byName[l.Name]; !ok {
			order = append(order, l.Name)
		}
		byName[l.Name] = append(byName[l.Name], l)
	}
	out := make([]BenchSummary, 0, len(order))
	for _, name := range order {
		runs := byName[name]
		s := BenchSummary{Name: name, Runs: len(runs), Metrics: map[string]float64{}}
		units := map[string]bool{}
		for _, r := range runs {
			for u := range r.Metrics {
				units[u] = true
			}
		}
		for u := range units {
			var vals []float64
			for _, r := range runs {
				if v, ok := r.Metrics[u]; ok {
					vals = append(vals, v)
				}
			}
			s.Metrics[u] = median(vals)
		}
		out = append(out, s)
	}
	return out
}

// median of vals (the mean of the two middle values for an even count); 0 when empty.
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	v := slices.Clone(vals)
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// EnvelopeRow is one library on one message of BenchmarkEnvelope.
type EnvelopeRow struct {
	Message, Lib string
	Summary      BenchSummary
	// Speedup is this library's time divided by the codec's on the same message (in CPU
	// time when the benchmark reports it, wall time otherwise): how many times faster the
	// codec is. 1 for the codec itself; 0 when the codec row is missing.
	Speedup float64
}

// costUnit is the metric that ranks the envelope benchmarks: the benchmark thread's CPU
// time when reported (descheduling on a shared machine does not inflate it), else wall.
func costUnit(s BenchSummary) string {
	if _, ok := s.Metrics["cpu-ns/op"]; ok {
		return "cpu-ns/op"
	}
	return "ns/op"
}

// EnvelopeRows arranges BenchmarkEnvelope/<lib>/<message> summaries by message (in
// first-seen order), the codec first, then the others in their order.
func EnvelopeRows(sums []BenchSummary) []EnvelopeRow {
	var msgs []string
	byMsg := map[string][]EnvelopeRow{}
	for _, s := range sums {
		rest, ok := strings.CutPrefix(s.Name, "BenchmarkEnvelope/")
		if !ok {
			continue
		}
		lib, msg, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		if _, seen := byMsg[msg]; !seen {
			msgs = append(msgs, msg)
		}
		byMsg[msg] = append(byMsg[msg], EnvelopeRow{Message: msg, Lib: lib, Summary: s})
	}
	var out []EnvelopeRow
	for _, m := range msgs {
		rows := byMsg[m]
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Lib == "codec" && rows[j].Lib != "codec" })
		if rows[0].Lib == "codec" {
			u := costUnit(rows[0].Summary)
			base := rows[0].Summary.Metrics[u]
			for i := range rows {
				if v, ok := rows[i].Summary.Metrics[u]; ok && base > 0 {
					rows[i].Speedup = v / base
				}
			}
		}
		out = append(out, rows...)
	}
	return out
}
