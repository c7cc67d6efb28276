package upstream

import (
	"sync/atomic"
	"time"
)

// PoolReason says why a POST took the ordinary pool rather than a pipelined connection.
// Each POST that takes the pool is counted under exactly one: the first check that
// turned it away, in the order a call meets them (enter: PoolOff without a pipeline,
// PoolFewInFlight; do: PoolNotShort; pick: PoolOff once pipelining stopped, PoolFull).
type PoolReason uint8

const (
	// PoolOff: the Conn does not pipeline (pipeline: off), or stopped because the
	// backend closes its connections after one response.
	PoolOff PoolReason = iota
	// PoolFewInFlight: too few other calls were in flight to share its write (fewer
	// than 2, or fewer than 8 while recent pipelined writes carried under 1.5 calls
	// each; see pipeline.enter). Only in PipelineShort mode.
	PoolFewInFlight
	// PoolNotShort: its kind is not known to be short: seen fewer than 1,000 times in
	// a row without a slow call (new, or slow now and then), or typically over the
	// bound. Only in PipelineShort mode.
	PoolNotShort
	// PoolFull: no pipelined connection could take it: each was at its depth, past its
	// window or budget, or closing.
	PoolFull
	// NumPoolReasons is the number of reasons.
	NumPoolReasons
)

// poolReasonNames are the reasons' names, as metrics label them.
var poolReasonNames = [NumPoolReasons]string{"off", "few_in_flight", "not_short", "full"}

// String returns the reason's name: off, few_in_flight, not_short or full.
func (r PoolReason) String() string {
	if r < NumPoolReasons {
		return poolReasonNames[r]
	}
	return "unknown"
}

// poolErr is do's answer when it sent nothing and the call is to take the pool, for
// the reason it is.
type poolErr PoolReason

func (e poolErr) Error() string {
	return "upstream: not pipelined: " + PoolReason(e).String()
}

// do's refusals. errPipelineFull keeps its name from when it was the only one.
var (
	errPipelineOff  error = poolErr(PoolOff)
	errNotShort     error = poolErr(PoolNotShort)
	errPipelineFull error = poolErr(PoolFull)
)

// PipeStats counts how an HTTP backend's POSTs went: on a pipelined connection, or on
// the pool and why (HTTPOptions.PipeStats). Each POST is counted once, when it is
// queued on a pipelined connection or handed to the pool (before the pool dials, so a
// pooled POST whose dial fails counts too); a retry counts again, and a POST that
// fails before either (a pipelined connection that cannot be opened, a closed Conn)
// counts in neither. The call path pays one atomic addition; an operator
// reads the counters at scrape time (Pipelining). Safe for concurrent use.
type PipeStats struct {
	pipelined atomic.Uint64
	pooled    [NumPoolReasons]atomic.Uint64
}

// NewPipeStats returns counters at zero.
func NewPipeStats() *PipeStats { return new(PipeStats) }

// Pipelined returns the POSTs queued on a pipelined connection.
func (s *PipeStats) Pipelined() uint64 { return s.pipelined.Load() }

// Pooled returns the POSTs that took the pool for reason r.
func (s *PipeStats) Pooled(r PoolReason) uint64 {
	if r >= NumPoolReasons {
		return 0
	}
	return s.pooled[r].Load()
}

// pipe counts a POST queued on a pipelined connection; nil counts nothing.
func (s *PipeStats) pipe() {
	if s != nil {
		s.pipelined.Add(1)
	}
}

// pool counts a POST sent on the pool for reason r; nil counts nothing.
func (s *PipeStats) pool(r PoolReason) {
	if s != nil {
		s.pooled[r].Add(1)
	}
}

// poolReasonOf returns the reason err (from do) sends a call to the pool; false when
// err is a failure of the call itself.
func poolReasonOf(err error) (PoolReason, bool) {
	r, ok := err.(poolErr) // do returns them as they are, never wrapped
	return PoolReason(r), ok
}

// PipeFigures is what Pipelining reports of a Conn: its backend's counters (shared by
// the Conns that share its PipeStats) and, in PipelineShort mode (pipeline: auto),
// the router's wait for a CPU as the mode sees it.
type PipeFigures struct {
	Pipelined uint64
	Pooled    [NumPoolReasons]uint64
	// Short is true in PipelineShort mode; SchedWait and Saturated are its figures.
	Short bool
	// SchedWait is the router's own recent wait for a CPU: the 90th percentile of its
	// goroutines' scheduling latency over the last sampling period (100 ms), which
	// PipelineShort takes out of the call times it decides on.
	SchedWait time.Duration
	// Saturated is true when SchedWait reaches the short bound (1 ms by default): then
	// every kind without a recent slow call is pipelined, up to the depth.
	Saturated bool
}

// Pipelining returns the figures of c's POSTs: false when c does not POST through an
// HTTPConn (stdio, NATS, legacy HTTP+SSE). Reading SchedWait takes a new sample when
// the last is older than the sampling period, as the next call would: it is what the
// next call would decide on.
func Pipelining(c Conn) (PipeFigures, bool) {
	var h *HTTPConn
	switch t := c.(type) {
	case *HTTPConn:
		h = t
	case *StatelessConn:
		h = t.h
	default:
		return PipeFigures{}, false
	}
	s := h.opts.PipeStats
	if s == nil {
		return PipeFigures{}, false
	}
	f := PipeFigures{Pipelined: s.Pipelined()}
	for r := range NumPoolReasons {
		f.Pooled[r] = s.Pooled(r)
	}
	if p := h.pipe; p != nil && p.calls != nil {
		f.Short = true
		f.SchedWait = routerWait()
		f.Saturated = p.saturated(f.SchedWait)
	}
	return f, true
}
