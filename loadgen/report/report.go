// Package report holds the result of an mcpload run and renders it: the JSON document
// (the stable, scriptable form), a terminal table, a self-contained HTML page with
// inline SVG charts, and a side-by-side comparison of two JSON documents.
//
// All latencies are in microseconds. "Corrected" latencies are measured from the time
// a request was meant to be sent (coordinated omission corrected); "uncorrected" ones
// from the time it was actually sent. In closed loop both are the same.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// FormatVersion is bumped when a field changes meaning.
const FormatVersion = 1

// Report is the outcome of one run.
type Report struct {
	Tool          string `json:"tool"` // "mcpload"
	FormatVersion int    `json:"format_version"`
	Started       string `json:"started"` // RFC 3339
	Target        Target `json:"target"`
	Config        Config `json:"config"`
	Requests      int64  `json:"requests"`
	Errors        int64  `json:"errors"`
	// Excluded counts the operations made outside the measured window (during the
	// ramp and the warm-up); they are in no other figure.
	Excluded  int64   `json:"excluded_requests"`
	ErrorRate float64 `json:"error_rate"` // errors / requests, 0..1
	DurationS float64 `json:"duration_s"`
	// ThroughputRPS is the measured operations (successful or not) divided by the time
	// from the opening of the window to the completion of the last of them, or by the
	// window if that is longer: in open loop against a target that cannot keep up it
	// is the rate achieved, not the rate offered.
	ThroughputRPS float64 `json:"throughput_rps"`
	// Latency covers successful primary operations.
	Latency            Latency `json:"latency_us"`
	LatencyUncorrected Latency `json:"latency_uncorrected_us"`
	// Slow counts the successful primary operations at or over the slow threshold
	// (--slow); nil when none was given.
	Slow          *Slow            `json:"slow,omitempty"`
	ErrorsByClass map[string]int64 `json:"errors_by_class"`
	// FirstErrors holds, per error class (the keys of ErrorsByClass, over every
	// operation), the message of the first failure of that class: what went wrong,
	// not only how often.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
	// ByMethod and ByTool break the figures down; ByMethod also lists the non-primary
	// operations (initialize, subscriptions, ...). ByTool is keyed by tool, or by the
	// label of a mix entry that has one (of any method).
	ByMethod map[string]*Stats `json:"by_method"`
	ByTool   map[string]*Stats `json:"by_tool,omitempty"`
	Series   []Second          `json:"series"`
	// Distribution is the corrected and uncorrected percentile curves of the primary
	// operations, for charts and comparisons.
	Distribution []Point      `json:"distribution"`
	Sessions     SessionStats `json:"sessions"`
	Fanout       *Fanout      `json:"fanout,omitempty"`
	Generator    Generator    `json:"generator"`
	Assertions   []Assertion  `json:"assertions,omitempty"`
}

// Target says what was measured.
type Target struct {
	URL       string   `json:"url,omitempty"`
	Command   []string `json:"command,omitempty"`
	Transport string   `json:"transport"`
	Protocol  string   `json:"protocol"` // negotiated by the first session
	Server    string   `json:"server,omitempty"`
}

// Config records the workload parameters.
type Config struct {
	Mode      string   `json:"mode"`   // steady, churn, fanout
	Pacing    string   `json:"pacing"` // closed or open
	Sessions  int      `json:"sessions"`
	Rate      float64  `json:"rate,omitempty"` // intended operations per second (open loop)
	DurationS float64  `json:"duration_s"`
	WarmupS   float64  `json:"warmup_s"`
	RampS     float64  `json:"ramp_s"`
	TimeoutS  float64  `json:"timeout_s"`
	Stream    bool     `json:"stream"`
	Mix       []string `json:"mix"`
	Scenario  string   `json:"scenario,omitempty"`
}

// Latency summarises a latency distribution in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	P9999 float64 `json:"p9999"`
	Max   float64 `json:"max"`
}

// Stats are the figures of one method or tool.
type Stats struct {
	Requests           int64            `json:"requests"`
	Errors             int64            `json:"errors"`
	ThroughputRPS      float64          `json:"throughput_rps"`
	Latency            Latency          `json:"latency_us"`
	LatencyUncorrected Latency          `json:"latency_uncorrected_us"`
	Slow               *Slow            `json:"slow,omitempty"`
	ErrorsByClass      map[string]int64 `json:"errors_by_class,omitempty"`
	// FirstErrors is the first message of each class of ErrorsByClass.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
	// ErrorLatency is the corrected latency of the failed operations (Latency covers
	// the successful ones only): a failure took time too.
	ErrorLatency *Latency `json:"error_latency_us,omitempty"`
	Pages        int64    `json:"pages,omitempty"`
	Primary      bool     `json:"primary"`
}

// Slow is how many successful operations took at least a threshold, by their
// corrected latency (the one the percentiles use), counted from the histogram: a value
// within its resolution (0.1%) of the threshold counts as at it.
type Slow struct {
	ThresholdUS float64 `json:"threshold_us"`
	Count       int64   `json:"count"`
	Pct         float64 `json:"pct"` // of the successful operations, 0..100
}

// CountSlow counts h's values (nanoseconds) at or over threshold; nil when threshold
// is not positive (no threshold given).
func CountSlow(h *hdr.Histogram, threshold int64) *Slow {
	if threshold <= 0 {
		return nil
	}
	s := &Slow{ThresholdUS: round3(float64(threshold) / 1e3)}
	if h == nil || h.TotalCount() == 0 {
		return s
	}
	// Distribution walks the buckets up to the largest value once; the bucket that
	// holds the threshold ends at or after it.
	for _, b := range h.Distribution() {
		if b.To >= threshold {
			s.Count += b.Count
		}
	}
	s.Pct = round3(100 * float64(s.Count) / float64(h.TotalCount()))
	return s
}

// Second is one point of the time series (completions during one second of the
// measured window; T is the end of the second, in seconds since the window opened).
type Second struct {
	T      float64 `json:"t"`
	Done   int64   `json:"requests"`
	Errors int64   `json:"errors"`
	RPS    float64 `json:"rps"`
	P50    float64 `json:"p50_us"`
	P90    float64 `json:"p90_us"`
	P99    float64 `json:"p99_us"`
	Max    float64 `json:"max_us"`
	CPU    float64 `json:"cpu_pct"` // the generator's own CPU, 100 = one core
}

// Point is one percentile of the distribution curves.
type Point struct {
	Percentile  float64 `json:"p"`
	Corrected   float64 `json:"us"`
	Uncorrected float64 `json:"uncorrected_us"`
}

// SessionStats describe session establishment.
type SessionStats struct {
	Target     int   `json:"target"`
	Opened     int64 `json:"opened"`
	Failed     int64 `json:"failed"`
	Reconnects int64 `json:"reconnects"`
	// Moved counts the moves of sessions to another instance of the target (several
	// URLs) when theirs stopped answering: the session carried on, it was not opened
	// again.
	Moved      int64   `json:"moved,omitempty"`
	Streams    int64   `json:"streams"` // GET streams held open
	Connect    Latency `json:"connect_us"`
	FirstError string  `json:"first_error,omitempty"`
}

// Fanout are the figures of fan-out mode.
type Fanout struct {
	URI         string  `json:"uri"`
	Subscribers int     `json:"subscribers"`
	Triggers    int64   `json:"triggers"`
	Expected    int64   `json:"expected"`
	Delivered   int64   `json:"delivered"`
	Missing     int64   `json:"missing"`
	Duplicates  int64   `json:"duplicates"`
	Latency     Latency `json:"latency_us"` // delivery latency from the intended trigger time
	// LatencyUncorrected is measured from the actual trigger send.
	LatencyUncorrected Latency `json:"latency_uncorrected_us"`
	// PerSession summarises each subscriber's mean and worst delivery latency across
	// subscribers, to show whether some sessions are served worse than others.
	PerSessionMean Latency `json:"per_session_mean_us"`
	PerSessionMax  Latency `json:"per_session_max_us"`
}

// Generator is mcpload's account of its own behaviour, so that a figure it prints can
// be trusted or dismissed.
type Generator struct {
	Pacing           string  `json:"pacing"` // closed or open
	IntendedRate     float64 `json:"intended_rate,omitempty"`
	LateThresholdUS  float64 `json:"late_threshold_us,omitempty"`
	Sends            int64   `json:"sends,omitempty"`
	LateSends        int64   `json:"late_sends"`
	LatePct          float64 `json:"late_pct"`
	StarvedSends     int64   `json:"starved_sends"` // late because every session was busy
	CPUAvgPct        float64 `json:"cpu_avg_pct"`   // 100 = one core
	CPUMaxPct        float64 `json:"cpu_max_pct"`
	CPUAvailablePct  float64 `json:"cpu_available_pct"` // 100 × usable cores
	SaturatedSeconds int     `json:"saturated_seconds"`
	// RunqueueWaitPct is how long the generator's threads were runnable but waiting
	// for a CPU, in percent of wall time (Linux): other processes competing for the
	// CPUs delay sends however idle the generator itself is.
	RunqueueWaitPct float64 `json:"runqueue_wait_pct"`
	CPUSaturated    bool    `json:"cpu_saturated"`
	GOMAXPROCS      int     `json:"gomaxprocs"`
	// CPUPerOpUS is the generator's own CPU time over the whole run divided by the
	// operations it completed (measured or not): its cost per operation, kernel time
	// included. 1e6 / CPUPerOpUS is what it could sustain on one core. (A target served
	// from the same process, as in tests, is counted too.)
	CPUPerOpUS  float64  `json:"cpu_per_op_us"`
	Trustworthy bool     `json:"trustworthy"`
	Warnings    []string `json:"warnings,omitempty"`
}

// Assertion is the outcome of one --assert expression.
type Assertion struct {
	Expr   string  `json:"expr"`
	Actual float64 `json:"actual"`
	Unit   string  `json:"unit"`
	Pass   bool    `json:"pass"`
}

// Percentiles of the distribution curves, dense in the tail where the interest is.
var curvePercentiles = []float64{0, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92.5, 95, 96, 97, 97.5, 98, 98.5, 99, 99.25, 99.5, 99.75, 99.9, 99.95, 99.99, 99.995, 99.999, 100}

// Summarize summarises a nanosecond histogram in microseconds.
func Summarize(h *hdr.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	v := h.ValueAtPercentiles([]float64{50, 75, 90, 95, 99, 99.9, 99.99})
	us := func(ns int64) float64 { return round3(float64(ns) / 1e3) }
	return Latency{
		Count: h.TotalCount(),
		Min:   us(h.Min()),
		Mean:  round3(h.Mean() / 1e3),
		P50:   us(v[50]),
		P75:   us(v[75]),
		P90:   us(v[90]),
		P95:   us(v[95]),
		P99:   us(v[99]),
		P999:  us(v[99.9]),
		P9999: us(v[99.99]),
		Max:   us(h.Max()),
	}
}

// Curve computes the distribution points of a corrected/uncorrected pair.
func Curve(corrected, uncorrected *hdr.Histogram) []Point {
	if corrected == nil || corrected.TotalCount() == 0 {
		return nil
	}
	c := corrected.ValueAtPercentiles(curvePercentiles)
	u := uncorrected.ValueAtPercentiles(curvePercentiles)
	pts := make([]Point, len(curvePercentiles))
	for i, p := range curvePercentiles {
		pts[i] = Point{Percentile: p, Corrected: round3(float64(c[p]) / 1e3), Uncorrected: round3(float64(u[p]) / 1e3)}
	}
	return pts
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteJSONFile writes r to path.
func (r *Report) WriteJSONFile(path string) error {
	return writeFile(path, r.WriteJSON)
}

// ReadJSONFile reads a report written by WriteJSONFile.
func ReadJSONFile(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Tool != "mcpload" {
		return nil, fmt.Errorf("%s: not an mcpload report", path)
	}
	return &r, nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
