package fanout

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// tracker records when each receiver got each update of one side of the comparison
// (router sessions, or raw NATS subscriptions).
//
// Updates are sent one at a time: the next one starts only when every receiver got the
// previous one or its wait timed out, and receivers join only between updates. So a
// receiver's k-th update is the tracker's round seen+k, where seen is the number of
// rounds that existed when it joined, and no message needs to carry a round number (the
// router's update is the same bytes every time). A late delivery still lands in its own
// round, after the round was closed, and is counted as a miss there.
type tracker struct {
	base   time.Time
	rounds []atomic.Pointer[round] // by round number; fixed length: no reallocation while receivers read it
	next   int                     // rounds started (owned by the driving goroutine)
	stray  atomic.Uint64           // deliveries past the last round (should stay 0)
	got    atomic.Uint64           // deliveries of any round, strays included
}

// round is one update: when it was sent and when each receiver got it.
type round struct {
	t0   int64          // ns since base when the update was sent
	end  int64          // ns since base when the wait for it ended
	recv []atomic.Int64 // ns since base of each receiver's receipt, 0 if none yet
	left atomic.Int64
	done chan struct{} // closed by the delivery that makes left 0
}

// receiver is one session or subscription as the tracker sees it. Only its own
// goroutine touches seen.
type receiver struct {
	idx  int
	seen int
}

func newTracker(base time.Time, maxRounds int) *tracker {
	return &tracker{base: base, rounds: make([]atomic.Pointer[round], maxRounds)}
}

// now is the monotonic time since base, in ns.
func (t *tracker) now() int64 { return int64(time.Since(t.base)) }

// join makes r a receiver from the next round on.
func (t *tracker) join(r *receiver, idx int) { r.idx, r.seen = idx, t.next }

// start opens the next round for n receivers (0..n-1). The caller sets t0 right before
// sending the update.
func (t *tracker) start(n int) *round {
	rd := &round{recv: make([]atomic.Int64, n), done: make(chan struct{})}
	rd.left.Store(int64(n))
	if n == 0 {
		close(rd.done)
	}
	t.rounds[t.next].Store(rd)
	t.next++
	return rd
}

// deliver records that r got its next update at time now (ns since base).
func (t *tracker) deliver(r *receiver, now int64) {
	k := r.seen
	r.seen++
	t.got.Add(1)
	if k >= len(t.rounds) {
		t.stray.Add(1)
		return
	}
	rd := t.rounds[k].Load()
	if rd == nil || r.idx >= len(rd.recv) {
		t.stray.Add(1)
		return
	}
	rd.recv[r.idx].Store(now)
	if rd.left.Add(-1) == 0 {
		close(rd.done)
	}
}

// wait blocks until every receiver got the round or timeout passed, and records when
// the wait ended.
func (t *tracker) wait(rd *round, timeout time.Duration) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-rd.done:
	case <-timer.C:
	}
	rd.end = t.now()
}

// sample is what one round measured.
type sample struct {
	latencies []time.Duration // receipt - t0 of each delivery
	misses    int
	perSec    float64 // deliveries / (last receipt - t0)
	serverCPU time.Duration
	clientCPU time.Duration
}

// collect reads a finished (or timed-out) round. Deliveries recorded after the wait
// ended count as misses, and so do receipts before t0 (impossible unless t0 was set
// late).
func (rd *round) collect() sample {
	s := sample{latencies: make([]time.Duration, 0, len(rd.recv))}
	var last int64
	for i := range rd.recv {
		at := rd.recv[i].Load()
		if at == 0 || at < rd.t0 || at > rd.end {
			s.misses++
			continue
		}
		s.latencies = append(s.latencies, time.Duration(at-rd.t0))
		last = max(last, at)
	}
	if n := len(s.latencies); n > 0 {
		span := max(last-rd.t0, 1)
		s.perSec = float64(n) / (float64(span) / 1e9)
	}
	return s
}

// Result is one side's figures at one size, over the measured updates.
type Result struct {
	Receivers  int           `json:"receivers"`
	Updates    int           `json:"updates"`    // measured updates
	Deliveries int           `json:"deliveries"` // in time, over all measured updates
	Misses     int           `json:"misses"`     // receipts missing when an update's wait ended
	P50        time.Duration `json:"p50"`        // over all deliveries
	P99        time.Duration `json:"p99"`
	Max        time.Duration `json:"max"`
	// PerSec is the median over updates of the update's deliveries per second:
	// deliveries / (last receipt - send time).
	PerSec float64 `json:"per_sec"`
	// SendRTT is, for the router, the median round trip of the touch call that caused
	// each update (client -> router -> backend and back); 0 for NATS, whose publish
	// does not wait.
	SendRTT time.Duration `json:"send_rtt"`
	// ServerCPU and ClientCPU are the CPU time (user and system) per delivery of the
	// servers' process (routers, NATS server, backend) and of the clients' process,
	// from just before each update until after the pause that follows it. With the
	// servers in the clients' process, ServerCPU is the total and ClientCPU is 0.
	// Unlike times, CPU per delivery hardly depends on what else the machine runs.
	ServerCPU time.Duration `json:"server_cpu"`
	ClientCPU time.Duration `json:"client_cpu"`
}

// summarize folds the samples of the measured updates into a Result.
func summarize(receivers int, samples []sample, rtts []time.Duration) Result {
	r := Result{Receivers: receivers, Updates: len(samples)}
	var all []time.Duration
	var srvCPU, cliCPU time.Duration
	rates := make([]float64, 0, len(samples))
	for _, s := range samples {
		all = append(all, s.latencies...)
		r.Misses += s.misses
		rates = append(rates, s.perSec)
		srvCPU += s.serverCPU
		cliCPU += s.clientCPU
	}
	r.Deliveries = len(all)
	if r.Deliveries > 0 {
		r.ServerCPU = srvCPU / time.Duration(r.Deliveries)
		r.ClientCPU = cliCPU / time.Duration(r.Deliveries)
	}
	slices.Sort(all)
	r.P50, r.P99 = percentile(all, 50), percentile(all, 99)
	if len(all) > 0 {
		r.Max = all[len(all)-1]
	}
	slices.Sort(rates)
	if len(rates) > 0 {
		r.PerSec = median(rates)
	}
	if len(rtts) > 0 {
		sorted := slices.Clone(rtts)
		slices.Sort(sorted)
		r.SendRTT = percentile(sorted, 50)
	}
	return r
}

// percentile of sorted values by the nearest-rank method: the smallest value such that
// at least p percent of the values are at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted)) * p / 100))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// median of sorted values (the mean of the two middle ones for an even count).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
