package fleet

import (
	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/router"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/upstream"
)

// Observability: finished requests reported to the router's Observer (by whoever
// settles them, on that party's goroutine, while the exchange is still valid), and
// read-only views of the backends for metrics collectors, which read them at scrape time
// on their own goroutine so the forwarding path pays nothing for them.

// SetObserver sets what finished client requests are reported to: normally
// Router.Observer(). Call it before Start; nil (the default) takes no timestamps.
func (f *Fleet) SetObserver(o router.Observer) { f.rep.obs = o }

// reporter reports finished requests to the router's Observer. It is set once before
// Start (SetObserver) and read by the parts that finish requests, on their goroutines:
// the forwarder, routing (answers without a backend) and the subscriptions' fan-out.
type reporter struct {
	obs router.Observer // nil: nothing reported, no timestamps taken
}

// on reports whether requests are observed, so that timestamps are worth taking.
func (r *reporter) on() bool { return r.obs != nil }

// done reports a forwarded request as finished, while its exchange is still valid.
// Backend time runs from the send to the backend's answer, or to now when none came
// (timeouts, lost connections, cancellations).
func (r *reporter) done(e *entry, o router.Outcome) {
	if r.obs == nil || e.kind != clientRequest || e.x.Msg.Kind != codec.KindRequest {
		return
	}
	var backendNs int64
	if e.sent != 0 {
		end := e.recv
		if end == 0 {
			end = router.Now()
		}
		backendNs = max(end-e.sent, 0)
	}
	r.obs.RequestDone(e.x, e.backend.index, o, e.start, backendNs)
}

// local reports a request the fleet answered during Prepare, without a backend
// (merged lists, unknown names).
func (r *reporter) local(x *transport.Exchange, o router.Outcome) {
	r.localFrom(x, o, router.Started(x))
}

// localFrom is local for a request answered after Prepare returned (on a goroutine of
// the fleet's), whose start was read during Prepare: router.Started reads the router's
// job, which goes back to its pool when Prepare returns.
func (r *reporter) localFrom(x *transport.Exchange, o router.Outcome, start int64) {
	if r.obs != nil && x.Msg.Kind == codec.KindRequest {
		r.obs.RequestDone(x, router.NoBackend, o, start, 0)
	}
}

// replyErr answers x with an error made by the fleet, without a backend, and reports it;
// false: nothing left for Run.
func (r *reporter) replyErr(x *transport.Exchange, code int, msg string) bool {
	return r.replyErrFrom(x, router.Started(x), code, msg)
}

// replyErrFrom is replyErr after Prepare returned, with the start read during it.
func (r *reporter) replyErrFrom(x *transport.Exchange, start int64, code int, msg string) bool {
	bp := getBuf()
	*bp = codec.AppendError((*bp)[:0], x.Msg.ID, code, msg, nil)
	r.localFrom(x, router.OutcomeError, start)
	x.Reply(*bp)
	putBuf(bp)
	return false
}

// reply answers x with a result made by the fleet, without a backend, and reports it.
func (r *reporter) reply(x *transport.Exchange, result []byte) bool {
	bp := getBuf()
	*bp = codec.AppendResult((*bp)[:0], x.Msg.ID, result)
	r.local(x, router.OutcomeOK)
	x.Reply(*bp)
	putBuf(bp)
	return false
}

// outcomeOfCode classifies the errors the fleet makes about backends.
func outcomeOfCode(code int) router.Outcome {
	switch code {
	case codec.CodeBackendTimeout:
		return router.OutcomeTimeout
	case codec.CodeBackendBusy:
		return router.OutcomeOverloaded
	case codec.CodeBackendUnavailable:
		return router.OutcomeUnavailable
	}
	return router.OutcomeError
}

// BackendNames returns the configured backends' names in configuration order: the
// index an Observer receives names an element of it.
func (f *Fleet) BackendNames() []string {
	bs := f.set.all()
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.cfg.Name
	}
	return names
}

// InstanceStats describes one backend instance for metrics.
type InstanceStats struct {
	Backend string // the backend's name
	Index   int    // the backend's index in the configuration
	Addr    string // the instance: a URL, or the command and its instance number
	Healthy bool   // taking requests (connected and passing health checks)
	// Outstanding is the number of client requests sent to it and not yet answered.
	Outstanding int64
	// Ejections counts times it was taken out of load balancing by failed health checks.
	Ejections uint64
	// Connects counts upstream sessions established to it (the first one included).
	Connects uint64
	// Renewals counts upstream sessions re-established transparently after the
	// backend lost them (a restart).
	Renewals uint64
	// Restarts counts restarts of its child process (stdio backends; 0 otherwise).
	Restarts uint64
	// Pipelining is how its POSTs went, pipelined or on the pool and why, and what
	// pipeline: auto sees of the router's own wait for a CPU; HTTP reports whether it
	// is known (a Streamable HTTP instance whose shared session is up). It is read
	// from the shared session, and counts the per-client sessions' POSTs too when they
	// share its upstream.PipeStats (the router gives each replica one).
	Pipelining upstream.PipeFigures
	HTTP       bool
}

// EachInstance calls fn for every backend instance, in configuration order. It takes
// no lock that the forwarding path takes.
func (f *Fleet) EachInstance(fn func(InstanceStats)) {
	for _, b := range f.set.all() {
		for _, in := range b.instances {
			st := InstanceStats{
				Backend:     b.cfg.Name,
				Index:       b.index,
				Addr:        in.dialer.Addr,
				Healthy:     in.usable(),
				Outstanding: in.outstanding.Load(),
				Ejections:   in.Ejections.Load(),
				Connects:    in.Reconnect.Load(),
				Renewals:    in.Renewed.Load(),
			}
			if c := in.conn.Load(); c != nil && c.conn != nil {
				if n, ok := upstream.Restarts(c.conn); ok {
					st.Restarts = uint64(max(n, 0))
				}
				st.Pipelining, st.HTTP = upstream.Pipelining(c.conn)
			}
			fn(st)
		}
	}
}

// Subscriptions is the number of (backend, URI) pairs subscribed upstream on behalf of
// client sessions: one upstream subscription serves every subscriber.
func (f *Fleet) Subscriptions() int { return f.subs.upstreamCount() }
