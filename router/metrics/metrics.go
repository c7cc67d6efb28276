// Package metrics is mcprouter's instrumentation: what operators scrape from the admin
// listener's /metrics (Prometheus text format) and what its live status page shows.
//
// Two kinds of figures, two costs:
//
//   - Per-request figures (requests by method, backend and outcome; router time and
//     backend time histograms) are recorded on the hot path by RequestDone, the
//     router.Observer: a few atomic additions into preallocated cells, no lock, no
//     allocation, no label lookup.
//   - Everything else (sessions, streams, queues, workers, backend health) already
//     exists as atomics in the components; the Collector reads them at scrape time, so
//     the hot path pays nothing for them.
//
// Metrics are registered into a registry that is passed in (Register), never a global.
package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/natsbus"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// Options configure Metrics.
type Options struct {
	// Backends are the backends' names in configuration order (fleet.BackendNames): the
	// index a router.Observer receives names one of them.
	Backends []string
	// Spare is how many backends added at run time (a configuration reload) get their
	// own figures, named by Name; those past it count as the router's. Each costs one
	// cell per method.
	Spare int
	// Name names a backend index past Backends (fleet.Fleet.BackendName); "" or nil
	// counts it as the router's.
	Name func(i int) string
	// Version is reported in mcprouter_build_info and on the status page.
	Version string
}

// Sources are the components whose counters the Collector reads at scrape time. Any
// may be nil (a router without backends has no Fleet); their metrics are then absent
// or zero.
type Sources struct {
	Router   *router.Router
	HTTP     *transport.HTTPServer
	Sessions *transport.Registry
	// Streams are the counters shared by every SSE stream (sse.StreamConfig.Stats).
	Streams *sse.Stats
	Fleet   *fleet.Fleet
	// Bus is the NATS connection (cluster notifications, sessions, NATS backends).
	Bus *natsbus.Bus
	// Ready reports whether the router should receive traffic (the admin /readyz);
	// nil means always.
	Ready func() bool
}

// Metrics records per-request figures and exports every metric of a router. It
// implements router.Observer and prometheus.Collector.
type Metrics struct {
	opts     Options
	started  time.Time
	backends int // len(opts.Backends)
	// cells[method*(backends+1) + backend+1]: one per (method, backend or none).
	cells []cell
	// fanout is the delivery latency of resource updates: from the moment the router
	// received the update from its backend to its hand-off to each subscribed session.
	fanout histogram
	src    atomic.Pointer[Sources]
	descs  descs
	now    func() int64 // router.Now; tests replace it
	// endpoints counts requests per MCP endpoint (endpoints.go); nil without virtual
	// servers. epMu serialises its replacements. epSrc lists the endpoints at scrape
	// time (WatchEndpoints).
	endpoints atomic.Pointer[endpointTable]
	epMu      sync.Mutex
	epSrc     atomic.Pointer[func() []Endpoint]
}

// cell holds the per-request figures of one (method, backend) pair. Cells are written
// by every request of that pair, from any goroutine.
type cell struct {
	outcomes [router.NumOutcomes]atomic.Uint64
	router   histogram // time inside the router
	backend  histogram // time waiting for the backend (backend cells only)
	_        [64]byte  // keeps neighbouring cells' hot counters off this cache line
}

// New returns Metrics for a router with the given backends. Call Watch with the
// components once they exist, and Register to export.
func New(opts Options) *Metrics {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	m := &Metrics{opts: opts, started: time.Now(), backends: len(opts.Backends) + max(opts.Spare, 0), now: router.Now}
	m.cells = make([]cell, int(router.NumMethods)*(m.backends+1))
	m.descs = newDescs()
	return m
}

// Watch sets the components the Collector reads. It may be called again (the latest
// wins), and concurrently with scrapes.
func (m *Metrics) Watch(s Sources) { m.src.Store(&s) }

func (m *Metrics) sources() *Sources {
	if s := m.src.Load(); s != nil {
		return s
	}
	return &Sources{}
}

// cellIndex maps a method and a backend index (router.NoBackend for none) to a cell.
// An index beyond the configured backends counts as none.
func (m *Metrics) cellIndex(meth router.Method, backend int) int {
	if backend < 0 || backend >= m.backends {
		backend = router.NoBackend
	}
	if meth >= router.NumMethods {
		meth = router.MethodOther
	}
	return int(meth)*(m.backends+1) + backend + 1
}

// RequestDone implements router.Observer: it counts the request under its method,
// backend and outcome, and records router time (total minus backend time) and backend
// time. No lock, no allocation.
func (m *Metrics) RequestDone(x *transport.Exchange, backend int, o router.Outcome, start, backendNs int64) {
	now := m.now()
	meth := router.MethodOther
	if x.Msg.Flags&codec.MethodEscaped == 0 {
		meth = router.MethodOf(x.Msg.Method)
	}
	c := &m.cells[m.cellIndex(meth, backend)]
	if o >= router.NumOutcomes {
		o = router.OutcomeError
	}
	c.outcomes[o].Add(1)
	m.countEndpoint(x, o)
	if start != 0 {
		c.router.observe(now - start - backendNs)
	}
	if backend >= 0 && backendNs > 0 {
		c.backend.observe(backendNs)
	}
}

// methodOfCell and backendOfCell invert cellIndex.
func (m *Metrics) methodOfCell(i int) router.Method { return router.Method(i / (m.backends + 1)) }
func (m *Metrics) backendOfCell(i int) int          { return i%(m.backends+1) - 1 }

// backendName labels a backend index; requests the router answered itself get
// "router".
func (m *Metrics) backendName(i int) string {
	switch {
	case i < 0 || i >= m.backends:
		return noBackendLabel
	case i < len(m.opts.Backends):
		return m.opts.Backends[i]
	case m.opts.Name != nil:
		if name := m.opts.Name(i); name != "" {
			return name
		}
	}
	return noBackendLabel
}

// noBackendLabel is the backend label of requests the router answered itself.
const noBackendLabel = "router"

// finished sums every request counted so far, all cells and outcomes.
func (m *Metrics) finished() uint64 {
	var n uint64
	for i := range m.cells {
		for o := range m.cells[i].outcomes {
			n += m.cells[i].outcomes[o].Load()
		}
	}
	return n
}

// inFlight is the number of requests received and not yet answered. The finished
// count is read first: every request it includes was counted as received before it
// finished, so the difference never goes negative.
func (m *Metrics) inFlight(r *router.Router) int64 {
	done := m.finished()
	if r == nil {
		return 0
	}
	got := r.Stats.Requests.Load()
	if got < done {
		return 0
	}
	return int64(got - done)
}

// FanOutDelivered implements router.Observer: one resource update reached one session
// ns nanoseconds after the router received it from the backend.
func (m *Metrics) FanOutDelivered(ns int64) { m.fanout.observe(ns) }
