package metrics

import (
	"encoding/json"
	"math"
	"sort"
	"time"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Status is one update of the admin listener's live status page, sent as JSON over SSE
// once a second. Rates are per second over the interval since the previous update of
// the same feed; percentiles are over that interval too, estimated from the latency
// histograms (so their resolution is the bucket layout's). Durations are milliseconds.
//
// The page (transport/admin/status.html) reads these field names.
type Status struct {
	Time     int64           `json:"time"`     // unix milliseconds
	Uptime   float64         `json:"uptime"`   // seconds since the metrics started
	Version  string          `json:"version"`  // router build
	Interval float64         `json:"interval"` // seconds the rates are computed over
	Ready    bool            `json:"ready"`
	Requests RequestStatus   `json:"requests"`
	Latency  LatencyStatus   `json:"latency"`
	Methods  []MethodStatus  `json:"methods"` // busiest first, idle methods omitted
	Sessions SessionStatus   `json:"sessions"`
	Streams  StreamStatus    `json:"streams"`
	Workers  WorkerStatus    `json:"workers"`
	Backends []BackendStatus `json:"backends"` // configuration order
}

// RequestStatus sums every client request.
type RequestStatus struct {
	Total     uint64             `json:"total"`     // finished since start
	Rate      float64            `json:"rate"`      // finished per second
	ErrorRate float64            `json:"errorRate"` // finished per second with any outcome but ok
	InFlight  int64              `json:"inFlight"`
	Outcomes  map[string]float64 `json:"outcomes"` // rate per outcome
}

// Quantiles summarize one latency distribution over the interval.
type Quantiles struct {
	Count uint64  `json:"count"` // observations in the interval; 0 means no figures
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
}

// LatencyStatus splits request latency between the router and the backends.
type LatencyStatus struct {
	Router  Quantiles `json:"router"`
	Backend Quantiles `json:"backend"`
}

// MethodStatus is the traffic of one method.
type MethodStatus struct {
	Method    string  `json:"method"`
	Rate      float64 `json:"rate"`
	ErrorRate float64 `json:"errorRate"`
}

// SessionStatus counts live sessions.
type SessionStatus struct {
	Total       int            `json:"total"`
	ByTransport map[string]int `json:"byTransport"`
	ByRevision  map[string]int `json:"byRevision"`
}

// StreamStatus describes the SSE streams.
type StreamStatus struct {
	Open        int64   `json:"open"`
	QueuedBytes int64   `json:"queuedBytes"`
	EventRate   float64 `json:"eventRate"`
	CutOffs     uint64  `json:"cutOffs"` // since start
	CutOffRate  float64 `json:"cutOffRate"`
}

// WorkerStatus describes the dispatcher and its worker pool.
type WorkerStatus struct {
	Running      int     `json:"running"`
	Capacity     int     `json:"capacity"`
	Waiting      int     `json:"waiting"` // prepared, waiting for a worker
	Queued       int     `json:"queued"`  // accepted, not yet prepared
	OverloadRate float64 `json:"overloadRate"`
}

// BackendStatus is one backend's health and traffic.
type BackendStatus struct {
	Name      string    `json:"name"`
	Healthy   int       `json:"healthy"`
	Instances int       `json:"instances"`
	InFlight  int64     `json:"inFlight"`
	Rate      float64   `json:"rate"`
	ErrorRate float64   `json:"errorRate"`
	Latency   Quantiles `json:"latency"` // backend time
	Ejections uint64    `json:"ejections"`
	Restarts  uint64    `json:"restarts"`
	// Pipelined is the share of its HTTP instances' calls sent on a pipelined
	// connection over the interval, 0 to 1 (0 without calls).
	Pipelined float64 `json:"pipelined"`
}

// StatusFeed computes successive Status updates: it keeps the previous readings to
// turn counters into rates. The admin listener runs one, once per second, and keeps
// its recent updates for every viewer of the status page. Not safe for concurrent use.
type StatusFeed struct {
	m    *Metrics
	prev reading
}

// reading is the raw counters a Status is computed from.
type reading struct {
	at        time.Time
	methods   [router.NumMethods][router.NumOutcomes]uint64
	backends  []backendReading
	routerH   histSnapshot
	backendH  histSnapshot
	events    uint64
	cutOffs   uint64
	overloads uint64
	// pipes are the HTTP instances' calls, pipelined and on the pool
	// (fleet.InstanceStats.Pipelining), per instance: an instance whose figures are
	// missing from one reading (its shared session down) is left out of that
	// interval's share instead of taking its calls out of its backend's sum. nil
	// before the first update.
	pipes map[pipeKey]pipeCount
}

type backendReading struct {
	outcomes [router.NumOutcomes]uint64
	hist     histSnapshot
}

// pipeKey names an instance from one reading to the next.
type pipeKey struct {
	backend int // its backend's index
	addr    string
}

// pipeCount is an instance's calls, pipelined and on the pool.
type pipeCount struct{ piped, pooled uint64 }

// NewStatusFeed starts a feed; its first update covers the time since the metrics
// started.
func (m *Metrics) NewStatusFeed() *StatusFeed {
	return &StatusFeed{m: m, prev: reading{at: m.started, backends: make([]backendReading, m.backends)}}
}

func (m *Metrics) read(now time.Time) reading {
	r := reading{at: now, backends: make([]backendReading, m.backends)}
	for i := range m.cells {
		c := &m.cells[i]
		meth, b := m.methodOfCell(i), m.backendOfCell(i)
		var rh histSnapshot
		rh.load(&c.router)
		r.routerH.add(&rh)
		for o := range c.outcomes {
			v := c.outcomes[o].Load()
			r.methods[meth][o] += v
			if b >= 0 {
				r.backends[b].outcomes[o] += v
			}
		}
		if b >= 0 {
			var bh histSnapshot
			bh.load(&c.backend)
			r.backends[b].hist.add(&bh)
			r.backendH.add(&bh)
		}
	}
	src := m.sources()
	if st := src.Streams; st != nil {
		r.events = st.Events.Load()
		r.cutOffs = st.CutOffs.Load()
	}
	if rt := src.Router; rt != nil {
		r.overloads = rt.Stats.Overloaded.Load()
	}
	return r
}

// Next returns the update for now.
func (f *StatusFeed) Next() Status { return f.next(time.Now()) }

// AppendJSON appends the next update as one line of JSON.
func (f *StatusFeed) AppendJSON(dst []byte) []byte {
	b, err := json.Marshal(f.Next())
	if err != nil { // only plain numbers and strings: cannot happen
		return append(dst, "{}"...)
	}
	return append(dst, b...)
}

func (f *StatusFeed) next(now time.Time) Status {
	m := f.m
	cur := m.read(now)
	prev := &f.prev
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	rate := func(a, b uint64) float64 {
		if a < b {
			return 0
		}
		return float64(a-b) / secs
	}
	src := m.sources()
	st := Status{
		Time:     now.UnixMilli(),
		Uptime:   now.Sub(m.started).Seconds(),
		Version:  m.opts.Version,
		Interval: secs,
		Ready:    src.Ready == nil || src.Ready(),
		Requests: RequestStatus{Outcomes: map[string]float64{}, InFlight: m.inFlight(src.Router)},
		Methods:  []MethodStatus{},
		Backends: []BackendStatus{},
		Sessions: SessionStatus{ByTransport: map[string]int{}, ByRevision: map[string]int{}},
	}

	var outcomes, prevOutcomes [router.NumOutcomes]uint64
	for meth := range cur.methods {
		var total, errs, pTotal, pErrs uint64
		for o := range cur.methods[meth] {
			v, p := cur.methods[meth][o], prev.methods[meth][o]
			outcomes[o] += v
			prevOutcomes[o] += p
			total += v
			pTotal += p
			if o != int(router.OutcomeOK) {
				errs += v
				pErrs += p
			}
		}
		if total > pTotal {
			st.Methods = append(st.Methods, MethodStatus{
				Method: router.Method(meth).String(), Rate: rate(total, pTotal), ErrorRate: rate(errs, pErrs),
			})
		}
	}
	sort.SliceStable(st.Methods, func(i, j int) bool { return st.Methods[i].Rate > st.Methods[j].Rate })
	var total, pTotal, errs, pErrs uint64
	for o := range outcomes {
		total += outcomes[o]
		pTotal += prevOutcomes[o]
		if o != int(router.OutcomeOK) {
			errs += outcomes[o]
			pErrs += prevOutcomes[o]
		}
		st.Requests.Outcomes[router.Outcome(o).String()] = rate(outcomes[o], prevOutcomes[o])
	}
	st.Requests.Total = total
	st.Requests.Rate = rate(total, pTotal)
	st.Requests.ErrorRate = rate(errs, pErrs)
	rd, bd := cur.routerH.sub(&prev.routerH), cur.backendH.sub(&prev.backendH)
	st.Latency = LatencyStatus{Router: quantiles(&rd), Backend: quantiles(&bd)}

	https, regs := m.servers(src)
	for k, n := range countAllSessions(regs) {
		st.Sessions.Total += n
		st.Sessions.ByTransport[k.transport] += n
		st.Sessions.ByRevision[k.revision] += n
	}
	st.Streams.Open = sumHTTP(https).openStreams
	if s := src.Streams; s != nil {
		st.Streams.QueuedBytes = max(s.Queued.Load(), 0)
	}
	st.Streams.CutOffs = cur.cutOffs
	st.Streams.EventRate = rate(cur.events, prev.events)
	st.Streams.CutOffRate = rate(cur.cutOffs, prev.cutOffs)

	if r := src.Router; r != nil {
		ds := r.Dispatcher().Stats()
		st.Workers = WorkerStatus{Running: ds.Busy, Capacity: ds.PoolCap}
		for _, s := range ds.Shards {
			st.Workers.Queued += s.Queued
			st.Workers.Waiting += s.Ready
		}
	}
	st.Workers.OverloadRate = rate(cur.overloads, prev.overloads)

	for i, name := range m.opts.Backends { // the page shows the backends the router started with
		b, pb := &cur.backends[i], &prev.backends[i]
		var t, pt, e, pe uint64
		for o := range b.outcomes {
			t += b.outcomes[o]
			pt += pb.outcomes[o]
			if o != int(router.OutcomeOK) {
				e += b.outcomes[o]
				pe += pb.outcomes[o]
			}
		}
		h := b.hist.sub(&pb.hist)
		st.Backends = append(st.Backends, BackendStatus{
			Name: name, Rate: rate(t, pt), ErrorRate: rate(e, pe), Latency: quantiles(&h),
		})
	}
	if fl := src.Fleet; fl != nil {
		addInstances(&st, &cur, prev, fl.EachInstance)
	}
	f.prev = cur
	return st
}

// addInstances adds what each reports of the backends' instances to st, and their
// calls, pipelined and pooled, to cur.
func addInstances(st *Status, cur, prev *reading, each func(func(fleet.InstanceStats))) {
	cur.pipes = map[pipeKey]pipeCount{}
	each(func(in fleet.InstanceStats) {
		if in.Index < 0 || in.Index >= len(st.Backends) {
			return
		}
		b := &st.Backends[in.Index]
		b.Instances++
		if in.Healthy {
			b.Healthy++
		}
		b.InFlight += in.Outstanding
		b.Ejections += in.Ejections
		b.Restarts += in.Restarts
		key := pipeKey{in.Index, in.Addr}
		if in.HTTP {
			cur.pipes[key] = pipeCountOf(&in.Pipelining)
		} else if c, ok := prev.pipes[key]; ok {
			cur.pipes[key] = c // unknown while its session is down: its counters go on
		}
	})
	for i, share := range pipelinedShares(cur.pipes, prev.pipes, len(st.Backends)) {
		st.Backends[i].Pipelined = share
	}
}

// pipeCountOf sums an instance's calls, pipelined and pooled.
func pipeCountOf(p *upstream.PipeFigures) pipeCount {
	c := pipeCount{piped: p.Pipelined}
	for _, n := range p.Pooled {
		c.pooled += n
	}
	return c
}

// pipelinedShares is each backend's share of its instances' calls since prev that
// were pipelined, over the instances in both readings; 0 without such calls. An
// instance new since prev counts from zero when prev is the feed's first reading (nil),
// and from this reading on otherwise; one whose counters went back (an instance
// replaced under the same address by a reload) counts from this reading on.
func pipelinedShares(cur, prev map[pipeKey]pipeCount, backends int) []float64 {
	piped, all := make([]uint64, backends), make([]uint64, backends)
	for k, c := range cur {
		p, ok := prev[k]
		if !ok && prev != nil || c.piped < p.piped || c.pooled < p.pooled {
			continue
		}
		piped[k.backend] += c.piped - p.piped
		all[k.backend] += c.piped - p.piped + c.pooled - p.pooled
	}
	shares := make([]float64, backends)
	for i := range shares {
		if all[i] > 0 {
			shares[i] = float64(piped[i]) / float64(all[i])
		}
	}
	return shares
}

// quantiles summarizes an interval's histogram in milliseconds.
func quantiles(h *histSnapshot) Quantiles {
	n := h.count()
	if n == 0 {
		return Quantiles{}
	}
	ms := func(q float64) float64 {
		v := h.quantile(q)
		if math.IsNaN(v) {
			return 0
		}
		return v * 1e3
	}
	return Quantiles{Count: n, P50: ms(0.50), P90: ms(0.90), P99: ms(0.99)}
}
