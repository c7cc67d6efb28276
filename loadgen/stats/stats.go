// Package stats records mcpload's measurements: per operation, an HdrHistogram of
// latencies corrected for coordinated omission (measured from the intended send time)
// and one of uncorrected latencies (measured from the actual send), counts, errors by
// class, and a per-interval histogram for the live view and the time series.
//
// Recording is sharded: each worker records into the shard its index selects, under
// that shard's mutex, so recording costs a few nanoseconds of uncontended locking plus
// three histogram increments and never allocates once a shard has seen an operation.
// Snapshots merge the shards.
package stats

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mcprouter/mcprouter/loadgen/client"
)

// Histogram geometry: nanoseconds from 1 ns to 10 minutes at 3 significant digits
// (0.1% resolution at every scale, about 200 KiB per histogram).
const (
	Lowest  = 1
	Highest = int64(10 * time.Minute)
	Sigfigs = 3
)

// NewHistogram returns an empty histogram with mcpload's geometry.
func NewHistogram() *hdr.Histogram { return hdr.New(Lowest, Highest, Sigfigs) }

// Op names one kind of recorded operation.
type Op struct {
	Method string // JSON-RPC method, or a pseudo-method such as "session" or "delivery"
	Name   string // tool or prompt name or resource URI template, if any
	// Primary operations make up the run's headline figures (requests, throughput,
	// latency); the others (handshakes, subscriptions, triggers) are reported by
	// method only.
	Primary bool
	// Entry is the key of the report's per-entry breakdown (by_tool) the operation is
	// listed under: its mix entry's label, or its tool; empty for the others.
	Entry string
}

// ErrKey is an error class with its code (HTTP status or JSON-RPC code).
type ErrKey struct {
	Class client.Class
	Code  int
}

// String gives the key as reported: "http_503", "jsonrpc_-32601", "timeout".
func (k ErrKey) String() string {
	switch k.Class {
	case client.ClassHTTP, client.ClassJSONRPC:
		return k.Class.String() + "_" + itoa(k.Code)
	}
	return k.Class.String()
}

func itoa(v int) string {
	var b [24]byte
	i := len(b)
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Sample is one completed operation. Times are nanoseconds on the run's monotonic
// clock.
type Sample struct {
	Op       int   // index into the recorder's operations
	Intended int64 // when it should have been sent (= Sent in closed loop)
	Sent     int64 // when it was sent
	Done     int64 // when its reply (or failure) arrived
	Err      ErrKey
	// Measured is false during ramp and warm-up: the sample then feeds only the live
	// view, not the totals.
	Measured bool
	// Paced marks the samples that an open-loop pacer scheduled (one per ticket); only
	// they count towards the pacing figures. Late says the send started later than
	// intended by more than the threshold; Starved says it was late because no session
	// was free at the intended time.
	Paced, Late, Starved bool
	// Pages is the number of pages a paginated list walk fetched.
	Pages int
}

// Recorder collects samples. Its methods are safe for concurrent use.
type Recorder struct {
	ops    []Op
	shards []shard
}

type shard struct {
	mu  sync.Mutex
	ops []opData
	iv  *hdr.Histogram // this interval's corrected latencies of primary ops, measured or not
	ivN int64          // operations completed this interval
	ivE int64          // of which failed
	// Open-loop pacing quality over measured samples.
	sends, late, starved int64
	excluded             int64    // primary operations outside the measured window
	lastDone             int64    // latest completion of a measured primary operation
	_                    [64]byte // keep shards on separate cache lines
}

type opData struct {
	corr, unc *hdr.Histogram
	errCorr   *hdr.Histogram // corrected latencies of failed operations: a failure took time too
	n, errs   int64
	byErr     map[ErrKey]int64
	pages     int64
	dropped   int64 // values outside the histogram range
}

// New returns a recorder for ops with n shards (at least 1).
func New(ops []Op, n int) *Recorder {
	if n < 1 {
		n = 1
	}
	r := &Recorder{ops: append([]Op(nil), ops...), shards: make([]shard, n)}
	for i := range r.shards {
		r.shards[i].ops = make([]opData, len(ops))
		r.shards[i].iv = NewHistogram()
	}
	return r
}

// Record adds s to the shard chosen by hint (any integer; workers pass their index).
func (r *Recorder) Record(hint int, s Sample) {
	if hint < 0 {
		hint = -hint
	}
	sh := &r.shards[hint%len(r.shards)]
	corrected := s.Done - min(s.Intended, s.Sent)
	sh.mu.Lock()
	if r.ops[s.Op].Primary {
		if !s.Measured {
			sh.excluded++
		} else if s.Done > sh.lastDone {
			sh.lastDone = s.Done
		}
		sh.ivN++
		if s.Err.Class != client.ClassNone {
			sh.ivE++
		} else {
			_ = sh.iv.RecordValue(clamp(corrected))
		}
	}
	if s.Measured {
		d := &sh.ops[s.Op]
		d.n++
		d.pages += int64(s.Pages)
		if s.Paced {
			sh.sends++
			if s.Late || s.Starved {
				sh.late++
			}
			if s.Starved {
				sh.starved++
			}
		}
		if s.Err.Class != client.ClassNone {
			d.errs++
			if d.byErr == nil {
				d.byErr = make(map[ErrKey]int64)
			}
			d.byErr[s.Err]++
			if d.errCorr == nil {
				d.errCorr = NewHistogram()
			}
			_ = d.errCorr.RecordValue(clamp(corrected))
		} else {
			if d.corr == nil {
				d.corr, d.unc = NewHistogram(), NewHistogram()
			}
			if d.corr.RecordValue(clamp(corrected)) != nil {
				d.dropped++
			}
			_ = d.unc.RecordValue(clamp(s.Done - s.Sent))
		}
	}
	sh.mu.Unlock()
}

func clamp(v int64) int64 {
	if v < Lowest {
		return Lowest
	}
	if v > Highest {
		return Highest
	}
	return v
}

// Interval is what happened since the previous call to TakeInterval.
type Interval struct {
	Latency   *hdr.Histogram // corrected latencies of successful operations
	Completed int64
	Errors    int64
}

// TakeInterval merges and resets every shard's interval data into iv (which it resets
// first); pass the same Interval each time to reuse its histogram.
func (r *Recorder) TakeInterval(iv *Interval) {
	if iv.Latency == nil {
		iv.Latency = NewHistogram()
	}
	iv.Latency.Reset()
	iv.Completed, iv.Errors = 0, 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		iv.Latency.Merge(sh.iv)
		sh.iv.Reset()
		iv.Completed += sh.ivN
		iv.Errors += sh.ivE
		sh.ivN, sh.ivE = 0, 0
		sh.mu.Unlock()
	}
}

// OpTotals are one operation's measured totals.
type OpTotals struct {
	Op          Op
	Corrected   *hdr.Histogram // successful operations only
	Uncorrected *hdr.Histogram
	// FailedCorrected holds the corrected latencies of the failed operations (from the
	// intended send to the error), kept apart so that failures that come back fast (or
	// slow) do not bend the figures of the successful ones.
	FailedCorrected *hdr.Histogram
	Count           int64 // every measured operation, failed or not
	Errors          int64
	ByErr           map[ErrKey]int64
	Pages           int64
	Dropped         int64
}

// Add merges o's figures into t, whose histograms and map must exist; o's may be nil
// (an operation a shard never recorded). The recorder merges its shards with it, the
// report the operations of a method or tool.
func (t *OpTotals) Add(o *OpTotals) {
	t.Count += o.Count
	t.Errors += o.Errors
	t.Pages += o.Pages
	t.Dropped += o.Dropped
	for k, v := range o.ByErr {
		t.ByErr[k] += v
	}
	for _, h := range [...][2]*hdr.Histogram{{t.Corrected, o.Corrected}, {t.Uncorrected, o.Uncorrected}, {t.FailedCorrected, o.FailedCorrected}} {
		if h[1] != nil {
			h[0].Merge(h[1])
		}
	}
}

// Pacing are the open-loop pacing counters over measured samples, and the number of
// primary operations that completed outside the measured window (ramp, warm-up).
type Pacing struct {
	Sends, Late, Starved int64
	Excluded             int64
	LastDone             int64 // latest completion of a measured primary operation
}

// Totals merges the shards into per-operation totals (in the recorder's op order) and
// the pacing counters. Call it after the run; it does not reset anything.
func (r *Recorder) Totals() ([]OpTotals, Pacing) {
	out := make([]OpTotals, len(r.ops))
	var p Pacing
	for i, op := range r.ops {
		out[i] = OpTotals{Op: op, Corrected: NewHistogram(), Uncorrected: NewHistogram(), FailedCorrected: NewHistogram(), ByErr: map[ErrKey]int64{}}
	}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for j := range sh.ops {
			d := &sh.ops[j]
			out[j].Add(&OpTotals{Corrected: d.corr, Uncorrected: d.unc, FailedCorrected: d.errCorr,
				Count: d.n, Errors: d.errs, ByErr: d.byErr, Pages: d.pages, Dropped: d.dropped})
		}
		p.Sends += sh.sends
		p.Late += sh.late
		p.Starved += sh.starved
		p.Excluded += sh.excluded
		p.LastDone = max(p.LastDone, sh.lastDone)
		sh.mu.Unlock()
	}
	return out, p
}
