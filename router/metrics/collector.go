package metrics

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/router/fleet"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Namespace prefixes every metric of the router.
const Namespace = "mcprouter"

// descs are the descriptions of every metric the Collector exports. The names are
// the contract with dashboards/ (a test there checks that every metric a dashboard
// queries is exported).
type descs struct {
	all []*prometheus.Desc // every one of the below, for Describe

	buildInfo *prometheus.Desc

	requests        *prometheus.Desc
	routerDuration  *prometheus.Desc
	backendDuration *prometheus.Desc
	inFlight        *prometheus.Desc
	messages        *prometheus.Desc
	dropped         *prometheus.Desc
	panics          *prometheus.Desc
	codecErrors     *prometheus.Desc
	ready           *prometheus.Desc

	sessions        *prometheus.Desc
	sessionsInit    *prometheus.Desc
	sessionsExpired *prometheus.Desc
	budgetUsed      *prometheus.Desc

	httpRequests *prometheus.Desc
	httpRejected *prometheus.Desc
	openStreams  *prometheus.Desc
	sseEvents    *prometheus.Desc
	sseBytes     *prometheus.Desc
	sseWritten   *prometheus.Desc
	sseQueued    *prometheus.Desc
	sseCutOffs   *prometheus.Desc
	sseEvictions *prometheus.Desc
	sseResumes   *prometheus.Desc
	sseGone      *prometheus.Desc
	sseKeepAlive *prometheus.Desc

	shards         *prometheus.Desc
	queued         *prometheus.Desc
	shardQueueMax  *prometheus.Desc
	workersRunning *prometheus.Desc
	workersWaiting *prometheus.Desc
	workersCap     *prometheus.Desc
	workersLive    *prometheus.Desc
	overloads      *prometheus.Desc

	backendUp         *prometheus.Desc
	backendInstances  *prometheus.Desc
	backendHealthy    *prometheus.Desc
	backendInFlight   *prometheus.Desc
	instanceUp        *prometheus.Desc
	instanceEjections *prometheus.Desc
	instanceConnects  *prometheus.Desc
	instanceRenewals  *prometheus.Desc
	instanceRestarts  *prometheus.Desc
	instancePiped     *prometheus.Desc
	instancePooled    *prometheus.Desc
	instanceSaturated *prometheus.Desc
	schedWait         *prometheus.Desc
	forwarded         *prometheus.Desc
	sendFailures      *prometheus.Desc
	timeouts          *prometheus.Desc
	failovers         *prometheus.Desc
	cancellations     *prometheus.Desc
	refreshes         *prometheus.Desc
	subscriptions     *prometheus.Desc
	clientSessions    *prometheus.Desc
	clientSessWaiting *prometheus.Desc
	clientSessRefused *prometheus.Desc
	srvReqExpired     *prometheus.Desc
	unmatched         *prometheus.Desc
	srvReqDropped     *prometheus.Desc
	fanOut            *prometheus.Desc
	fanOutDuration    *prometheus.Desc

	natsConnected   *prometheus.Desc
	natsDisconnects *prometheus.Desc
	natsReconnects  *prometheus.Desc
	natsErrors      *prometheus.Desc
	natsMsgs        *prometheus.Desc
	natsBytes       *prometheus.Desc

	endpoint endpointDescs // endpoints.go
}

func newDescs() descs {
	var all []*prometheus.Desc
	d := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
		all = append(all, desc)
		return desc
	}
	ds := descs{
		buildInfo: d("build_info", "Always 1; the labels say which router build runs.", "version", "goversion"),

		requests:        d("requests_total", "Client requests finished, by method, backend (\"router\" when the router answered itself) and outcome (ok, error, timeout, overloaded, unavailable, cancelled).", "method", "backend", "outcome"),
		routerDuration:  d("request_router_duration_seconds", "Time a request spent inside the router (receipt to answer, minus the time waiting for a backend): dispatcher queue, worker wait, rewrites.", "method"),
		backendDuration: d("request_backend_duration_seconds", "Time from sending a request to a backend until its answer (or until the router gave up).", "backend", "method"),
		inFlight:        d("requests_in_flight", "Client requests received and not yet answered."),
		messages:        d("messages_total", "JSON-RPC messages received from clients (requests, notifications, responses)."),
		dropped:         d("notifications_dropped_total", "Client notifications dropped because the dispatcher was overloaded."),
		panics:          d("handler_panics_total", "Panics recovered while handling a message."),
		codecErrors:     d("codec_errors_total", "Client messages the codec rejected over HTTP, by JSON-RPC class (parse: -32700, invalid_request: -32600).", "class"),
		ready:           d("ready", "1 when the router reports ready (every backend has a healthy instance), else 0."),

		sessions:        d("sessions", "Live client sessions, by transport (streamable, sse, stdio) and negotiated protocol revision (\"none\" before initialize).", "transport", "revision"),
		sessionsInit:    d("sessions_initialized_total", "Sessions initialized (initialize answered)."),
		sessionsExpired: d("sessions_expired_total", "Sessions ended by idle expiry."),
		budgetUsed:      d("sessions_budget_used_bytes", "Bytes retained for clients (resumption rings, reply streams, queued events, session records) against the sessions' memory budget."),

		httpRequests: d("http_requests_total", "HTTP requests on the MCP endpoints."),
		httpRejected: d("http_rejected_total", "HTTP requests answered with an error status before reaching the router (headers, session, size, origin)."),
		openStreams:  d("sse_open_streams", "Open SSE responses (POST reply streams, GET streams, legacy streams)."),
		sseEvents:    d("sse_events_total", "SSE events published."),
		sseBytes:     d("sse_event_bytes_total", "Encoded bytes of SSE events published."),
		sseWritten:   d("sse_written_bytes_total", "Bytes written and flushed to SSE clients."),
		sseQueued:    d("sse_queued_bytes", "Bytes of SSE events waiting for their client's connection (backlog before the slow-consumer cut-off)."),
		sseCutOffs:   d("sse_slow_consumer_cutoffs_total", "SSE clients cut off for falling too far behind (their events stay for resumption)."),
		sseEvictions: d("sse_evictions_total", "SSE events evicted from resumption rings."),
		sseResumes:   d("sse_resumes_total", "SSE streams resumed with Last-Event-ID."),
		sseGone:      d("sse_resumes_gone_total", "SSE resumptions refused because the events were evicted."),
		sseKeepAlive: d("sse_keepalives_total", "SSE keep-alive comments written."),

		shards:         d("dispatcher_shards", "Dispatcher shards (each keeps its sessions' order)."),
		queued:         d("dispatcher_queued_jobs", "Messages accepted by the dispatcher and not yet prepared, over all shards."),
		shardQueueMax:  d("dispatcher_shard_queue_max_jobs", "Queue depth of the deepest shard."),
		workersRunning: d("workers_running", "Worker pool slots busy running a job (mostly forwarding to backends)."),
		workersWaiting: d("workers_waiting_jobs", "Prepared jobs waiting for a free worker."),
		workersCap:     d("workers_capacity", "Worker pool slots in total."),
		workersLive:    d("workers_goroutines", "Live worker goroutines, busy or idle."),
		overloads:      d("overload_rejections_total", "Messages refused by backpressure because a dispatcher queue was full."),

		backendUp:         d("backend_up", "1 when the backend has at least one healthy instance, else 0.", "backend"),
		backendInstances:  d("backend_instances", "Configured instances of the backend.", "backend"),
		backendHealthy:    d("backend_healthy_instances", "Instances of the backend taking requests.", "backend"),
		backendInFlight:   d("backend_in_flight_requests", "Client requests sent to the backend and not yet answered.", "backend"),
		instanceUp:        d("backend_instance_up", "1 when the instance takes requests (connected, passing health checks), else 0.", "backend", "instance"),
		instanceEjections: d("backend_ejections_total", "Times the instance was ejected from load balancing by failed health checks.", "backend", "instance"),
		instanceConnects:  d("backend_connects_total", "Upstream sessions established to the instance (the first one included).", "backend", "instance"),
		instanceRenewals:  d("backend_session_renewals_total", "Upstream sessions re-initialized transparently after the backend lost them (restart).", "backend", "instance"),
		instanceRestarts:  d("backend_restarts_total", "Restarts of the instance's child process (stdio backends).", "backend", "instance"),
		instancePiped:     d("backend_pipelined_calls_total", "Calls (POSTs) to the instance sent on a pipelined HTTP/1.1 connection (Streamable HTTP backends).", "backend", "instance"),
		instancePooled:    d("backend_pooled_calls_total", "Calls (POSTs) to the instance sent on the ordinary connection pool, by why they were not pipelined: off (pipeline: off, or the backend closes connections after one response), few_in_flight (too few other calls in flight to share a write), not_short (the call's kind is not known to be short), full (every pipelined connection at its depth, window or budget).", "backend", "instance", "reason"),
		instanceSaturated: d("backend_pipeline_saturated", "1 while pipeline: auto counts the router as saturated for the instance (scheduler_wait_seconds at or over its 1 ms short bound: every kind without a recent slow call is pipelined, up to the depth), else 0; only with pipeline: auto.", "backend", "instance"),
		schedWait:         d("scheduler_wait_seconds", "The router's own wait for a CPU as pipeline: auto sees it: the 90th percentile of its goroutines' scheduling latency over the last 100 ms sample (Go runtime); only with a pipeline: auto backend."),
		forwarded:         d("backend_forwarded_total", "Requests sent to backends."),
		sendFailures:      d("backend_send_failures_total", "Requests that could not be sent to a backend."),
		timeouts:          d("backend_timeouts_total", "Requests that a backend did not answer in time."),
		failovers:         d("backend_failovers_total", "Requests sent again to another replica: refused by an instance, or lost before any answer and safe to repeat (read-only methods, tools annotated readOnlyHint or idempotentHint)."),
		cancellations:     d("backend_cancellations_total", "Forwarded requests cancelled by their client."),
		refreshes:         d("backend_catalog_refreshes_total", "Backend catalog (tools, prompts, resources) refreshes."),
		subscriptions:     d("upstream_subscriptions", "Resource subscriptions held upstream, each serving every subscribed client session."),
		clientSessions:    d("upstream_client_sessions", "Upstream sessions the router opened for some clients only, open (per-client backends: one per client session or 2026 principal, stdio: child processes; 2026 clients whose declared capabilities differ from the router's: one per capability set), against limits.max_upstream_sessions."),
		clientSessWaiting: d("upstream_client_sessions_waiting", "Requests waiting for a per-client upstream session beyond limits.max_upstream_sessions."),
		clientSessRefused: d("upstream_client_sessions_refused_total", "Requests refused as overloaded after waiting limits.upstream_session_wait for a per-client upstream session."),
		unmatched:         d("backend_unmatched_responses_total", "Responses from backends that matched no request in flight (an id never sent, a second answer, an answer after its timeout or cancellation), dropped."),
		srvReqExpired:     d("server_requests_expired_total", "Backend requests to clients (sampling, roots, elicitation) the client did not answer within limits.server_request_timeout."),
		srvReqDropped:     d("server_requests_dropped_total", "Backend requests to clients answered with an error because the client session ended first."),
		fanOut:            d("fanout_deliveries_total", "Resource update notifications delivered to client sessions."),
		fanOutDuration:    d("fanout_delivery_seconds", "Time from the router receiving a resource update from its backend to handing it to each subscribed session's stream, across instances (NATS) included."),

		natsConnected:   d("nats_connected", "1 while the router's NATS connection is up, else 0."),
		natsDisconnects: d("nats_disconnects_total", "NATS connection losses."),
		natsReconnects:  d("nats_reconnects_total", "NATS reconnections."),
		natsErrors:      d("nats_async_errors_total", "Asynchronous NATS errors (slow consumers, permission violations)."),
		natsMsgs:        d("nats_messages_total", "NATS messages on the router's connection, by direction (in, out).", "direction"),
		natsBytes:       d("nats_bytes_total", "NATS payload bytes on the router's connection, by direction (in, out).", "direction"),
	}
	ds.endpoint = newEndpointDescs(d)
	ds.all = all
	return ds
}

// Register registers m and the Go runtime and process collectors into reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		m,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Describe implements prometheus.Collector: every description, including those of
// metrics not exported yet (no request seen, no fleet), so the registry checks them all.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs.all {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads every figure at scrape time.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	d := &m.descs
	src := m.sources()
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) { sendCounter(ch, desc, v, labels...) }
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) { sendGauge(ch, desc, v, labels...) }

	gauge(d.buildInfo, 1, m.opts.Version, runtime.Version())
	m.collectRequests(ch)
	gauge(d.inFlight, float64(m.inFlight(src.Router)))
	ready := src.Ready == nil || src.Ready()
	gauge(d.ready, b2f(ready))

	if r := src.Router; r != nil {
		counter(d.messages, r.Stats.Messages.Load())
		counter(d.dropped, r.Stats.Dropped.Load())
		counter(d.panics, r.Stats.Panics.Load())
		counter(d.sessionsInit, r.Stats.Initialized.Load())
		ds := r.Dispatcher().Stats()
		gauge(d.shards, float64(len(ds.Shards)))
		var queued, maxQ, waiting int
		for _, s := range ds.Shards {
			queued += s.Queued
			maxQ = max(maxQ, s.Queued)
			waiting += s.Ready
		}
		gauge(d.queued, float64(queued))
		gauge(d.shardQueueMax, float64(maxQ))
		gauge(d.workersWaiting, float64(waiting))
		gauge(d.workersRunning, float64(ds.Busy))
		gauge(d.workersCap, float64(ds.PoolCap))
		gauge(d.workersLive, float64(ds.Workers))
		counter(d.overloads, ds.Overloads)
	}

	https, regs := m.servers(src)
	if len(https) > 0 {
		h := sumHTTP(https)
		counter(d.httpRequests, h.requests)
		counter(d.httpRejected, h.rejected)
		gauge(d.openStreams, float64(h.openStreams))
		counter(d.codecErrors, h.parseErrors, "parse")
		counter(d.codecErrors, h.invalidRequests, "invalid_request")
	}
	if st := src.Streams; st != nil {
		s := st.Snapshot()
		counter(d.sseEvents, s.Events)
		counter(d.sseBytes, s.Bytes)
		counter(d.sseWritten, s.Written)
		gauge(d.sseQueued, float64(max(st.Queued.Load(), 0)))
		counter(d.sseCutOffs, s.CutOffs)
		counter(d.sseEvictions, s.Evictions)
		counter(d.sseResumes, s.Resumes)
		counter(d.sseGone, s.Gone)
		counter(d.sseKeepAlive, s.KeepAlives)
	}
	if len(regs) > 0 {
		var expired uint64
		for _, reg := range regs {
			expired += reg.Expired.Load()
		}
		counter(d.sessionsExpired, expired)
		// Every endpoint's registry draws on the one budget (sessions.budget_bytes):
		// read once, not summed, or it would count once per virtual server.
		gauge(d.budgetUsed, float64(regs[0].BudgetUsed()))
		for k, n := range countAllSessions(regs) {
			gauge(d.sessions, float64(n), k.transport, k.revision)
		}
	}
	if f := src.Fleet; f != nil {
		m.collectFleet(ch, f)
	}
	m.collectEndpoints(ch)
	if b := src.Bus; b != nil && b.NC != nil {
		gauge(d.natsConnected, b2f(b.Connected.Load()))
		counter(d.natsDisconnects, b.Disconnects.Load())
		counter(d.natsReconnects, b.Reconnects.Load())
		counter(d.natsErrors, b.AsyncErrors.Load())
		ns := b.NC.Stats()
		counter(d.natsMsgs, ns.InMsgs, "in")
		counter(d.natsMsgs, ns.OutMsgs, "out")
		counter(d.natsBytes, ns.InBytes, "in")
		counter(d.natsBytes, ns.OutBytes, "out")
	}
}

// collectRequests exports the per-request cells: counters per outcome and the two
// histograms. Only series that have seen a request are exported, so an idle method or
// backend adds nothing to the scrape.
func (m *Metrics) collectRequests(ch chan<- prometheus.Metric) {
	d := &m.descs
	var perMethod [router.NumMethods]histSnapshot
	var seen [router.NumMethods]bool
	for i := range m.cells {
		c := &m.cells[i]
		meth, b := m.methodOfCell(i), m.backendOfCell(i)
		for o := range c.outcomes {
			if v := c.outcomes[o].Load(); v > 0 {
				ch <- prometheus.MustNewConstMetric(d.requests, prometheus.CounterValue, float64(v),
					meth.String(), m.backendName(b), router.Outcome(o).String())
			}
		}
		var rs histSnapshot
		rs.load(&c.router)
		if rs.count() > 0 {
			perMethod[meth].add(&rs)
			seen[meth] = true
		}
		if b >= 0 {
			var bs histSnapshot
			bs.load(&c.backend)
			if n := bs.count(); n > 0 {
				buckets, count := bs.cumulative()
				ch <- prometheus.MustNewConstHistogram(d.backendDuration, count, float64(bs.sum)/1e9, buckets,
					m.backendName(b), meth.String())
			}
		}
	}
	for meth := range perMethod {
		if !seen[meth] {
			continue
		}
		s := &perMethod[meth]
		buckets, count := s.cumulative()
		ch <- prometheus.MustNewConstHistogram(d.routerDuration, count, float64(s.sum)/1e9, buckets,
			router.Method(meth).String())
	}
}

func (m *Metrics) collectFleet(ch chan<- prometheus.Metric, f *fleet.Fleet) {
	d := &m.descs
	counter := func(desc *prometheus.Desc, v uint64) { sendCounter(ch, desc, v) }
	gauge := func(desc *prometheus.Desc, v float64) { sendGauge(ch, desc, v) }
	m.collectInstances(ch, f.EachInstance)
	counter(d.forwarded, f.Stats.Forwarded.Load())
	counter(d.sendFailures, f.Stats.Failed.Load())
	counter(d.timeouts, f.Stats.TimedOut.Load())
	counter(d.failovers, f.Stats.Failovers.Load())
	counter(d.cancellations, f.Stats.Cancelled.Load())
	counter(d.refreshes, f.Stats.Refreshes.Load())
	counter(d.fanOut, f.Stats.FanOut.Load())
	var fs histSnapshot
	fs.load(&m.fanout)
	buckets, count := fs.cumulative()
	ch <- prometheus.MustNewConstHistogram(d.fanOutDuration, count, float64(fs.sum)/1e9, buckets)
	gauge(d.subscriptions, float64(f.Subscriptions()))
	gauge(d.clientSessions, float64(f.UpstreamSessions()))
	gauge(d.clientSessWaiting, float64(f.Stats.UpstreamQueued.Load()))
	counter(d.clientSessRefused, f.Stats.UpstreamRefused.Load())
	counter(d.srvReqExpired, f.Stats.ServerRequestsExpired.Load())
	counter(d.srvReqDropped, f.Stats.ServerRequestsDropped.Load())
	counter(d.unmatched, f.Stats.Unmatched.Load())
}

// collectInstances exports the figures of every backend instance each visits
// (fleet.Fleet.EachInstance), and their sums per backend.
func (m *Metrics) collectInstances(ch chan<- prometheus.Metric, each func(func(fleet.InstanceStats))) {
	d := &m.descs
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) { sendCounter(ch, desc, v, labels...) }
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) { sendGauge(ch, desc, v, labels...) }
	type agg struct {
		total, healthy int
		inFlight       int64
	}
	per := map[string]*agg{}
	var short bool // a pipeline: auto instance: wait is what it sees
	var wait time.Duration
	var order []string
	each(func(in fleet.InstanceStats) {
		a := per[in.Backend]
		if a == nil {
			a = &agg{}
			per[in.Backend] = a
			order = append(order, in.Backend)
		}
		a.total++
		up := 0.0
		if in.Healthy {
			a.healthy++
			up = 1
		}
		a.inFlight += in.Outstanding
		gauge(d.instanceUp, up, in.Backend, in.Addr)
		counter(d.instanceEjections, in.Ejections, in.Backend, in.Addr)
		counter(d.instanceConnects, in.Connects, in.Backend, in.Addr)
		counter(d.instanceRenewals, in.Renewals, in.Backend, in.Addr)
		counter(d.instanceRestarts, in.Restarts, in.Backend, in.Addr)
		if in.HTTP {
			m.collectPipelining(ch, in)
			short = short || in.Pipelining.Short
			wait = max(wait, in.Pipelining.SchedWait)
		}
	})
	for _, name := range order {
		a := per[name]
		up := 0.0
		if a.healthy > 0 {
			up = 1
		}
		gauge(d.backendUp, up, name)
		gauge(d.backendInstances, float64(a.total), name)
		gauge(d.backendHealthy, float64(a.healthy), name)
		gauge(d.backendInFlight, float64(a.inFlight), name)
	}
	if short {
		gauge(d.schedWait, wait.Seconds())
	}
}

// collectPipelining exports how an HTTP instance's calls went: pipelined, pooled by
// reason (every reason, 0 included, so that a share is never a ratio to nothing), and
// with pipeline: auto whether it counts the router as saturated.
func (m *Metrics) collectPipelining(ch chan<- prometheus.Metric, in fleet.InstanceStats) {
	d := &m.descs
	p := &in.Pipelining
	sendCounter(ch, d.instancePiped, p.Pipelined, in.Backend, in.Addr)
	for r := range upstream.NumPoolReasons {
		sendCounter(ch, d.instancePooled, p.Pooled[r], in.Backend, in.Addr, r.String())
	}
	if p.Short {
		sendGauge(ch, d.instanceSaturated, b2f(p.Saturated), in.Backend, in.Addr)
	}
}

// sendCounter sends a counter's value.
func sendCounter(ch chan<- prometheus.Metric, desc *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
}

// sendGauge sends a gauge's value.
func sendGauge(ch chan<- prometheus.Metric, desc *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// sessionKey groups sessions for the sessions gauge.
type sessionKey struct{ transport, revision string }

// countSessions counts live sessions by transport and revision. It walks the registry
// (a snapshot of its map), so it is for scrapes, not for the hot path.
func countSessions(reg *transport.Registry) map[sessionKey]int {
	out := map[sessionKey]int{}
	reg.Each(func(s *transport.Session) {
		v := s.Version()
		if v == "" {
			v = "none"
		}
		out[sessionKey{s.Carrier().String(), v}]++
	})
	return out
}
