// Package router gives MCP meaning to the messages the transports carry: the session
// lifecycle and version negotiation, the methods the router answers itself, and (through
// the Fleet seam) forwarding to backends. It never touches a socket: it reads Exchanges
// and answers through them.
package router

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/workers"
)

// Config configures a Router. Zero values take the defaults.
type Config struct {
	// Name and Version are the serverInfo the router announces. Default "mcprouter", "dev".
	Name    string
	Version string
	// Instructions, when set, is returned in the InitializeResult.
	Instructions string
	// Workers sizes the dispatcher (shards, queues, pool).
	Workers workers.Config
	// Logger receives the router's logs. Default slog.Default().
	Logger *slog.Logger
	// Fleet forwards what the router does not answer itself; nil means no backends.
	Fleet Fleet
	// Observer receives a measurement of every finished client request (metrics); nil
	// records nothing. See observe.go.
	Observer Observer
	// Store, when set, keeps session records so that sessions survive their instance.
	Store SessionStore
	// Stateless decides whether a request claiming 2026-07-28 is served statelessly
	// (stateless.go): StatelessAuto (the default), StatelessOn or StatelessOff.
	Stateless string
	// Tracer, when set, starts the trace of every client request as it arrives (it sets
	// x.Trace; the tracing package's); nil traces nothing and costs nothing.
	Tracer interface{ Start(x *transport.Exchange) }
	// RunOnCaller lets a session's request on Streamable HTTP be forwarded on the HTTP
	// request's own goroutine, when its shard is idle and the Fleet is a CallerFleet
	// that says the forward can run there (inline.go says when): a hand-off to a pool
	// worker and the wake-up of the request's goroutine fewer per call.
	RunOnCaller bool
	// ReplyTimeout is how long the transport waits for a request's answer
	// (transport.HTTPConfig.ReplyTimeout; 0 takes the transport's default, 10m): a
	// forward runs on the request's goroutine only when the fleet ends it within that
	// time.
	ReplyTimeout time.Duration
}

// SessionStore keeps session records outside the process (JetStream key-value).
type SessionStore interface {
	Save(id string, rec []byte) error
	Load(id string) ([]byte, bool)
	Delete(id string)
}

// Router is the MCP layer: it implements transport.Handler. It owns the dispatcher, the
// router's side of each session (Session: revision, client capabilities, principal) and
// the writes of session records; the backends are the Fleet's.
//
// Who calls it: the transports, on the goroutine that read a message (HandleMessage
// never blocks: it hands a job to the dispatcher, or runs it on the caller when the
// fleet allows, inline.go) and when a session opens or closes; the app, to close it.
// Which goroutines run it: a job's Prepare runs on its session's shard goroutine, in the
// session's order (lifecycle methods, notifications, the fleet's Prepare), and its Run
// on a pool worker (the fleet's forwarding); session records are written on goroutines
// of their own (persist_writer.go).
type Router struct {
	cfg   Config
	log   *slog.Logger
	disp  *workers.Dispatcher
	fleet Fleet
	rr    atomic.Uint64 // spreads sessionless messages over shards
	errs  errorMapper   // dispatcher and fleet errors to JSON-RPC errors
	// inline is the Fleet as a CallerFleet when Config.RunOnCaller is set (inline.go).
	inline CallerFleet

	saving recordWriter   // session records queued or being written (Close waits for them)
	tap    *tap           // request log and Config.Observer; nil when neither wants anything
	modern statelessState // what stateless requests are judged and decorated with

	// Stats are cheap counters read by metrics.
	Stats Stats
}

// Stats counts what the router did.
type Stats struct {
	Messages    atomic.Uint64
	Requests    atomic.Uint64 // messages that are requests (in flight = Requests - answered)
	Overloaded  atomic.Uint64 // messages refused by backpressure
	Panics      atomic.Uint64
	Initialized atomic.Uint64
	Dropped     atomic.Uint64 // notifications lost to overload
	Adopted     atomic.Uint64 // sessions carried on from another instance
}

// New starts a router with its dispatcher.
func New(cfg Config) (*Router, error) {
	if cfg.Name == "" {
		cfg.Name = "mcprouter"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Router{cfg: cfg, log: cfg.Logger, fleet: cfg.Fleet, tap: newTap(cfg.Logger, cfg.Observer, cfg.Fleet)}
	r.modern = newStatelessState(&cfg)
	if cf, ok := cfg.Fleet.(CallerFleet); ok && cfg.RunOnCaller {
		r.inline = cf
		if r.cfg.ReplyTimeout <= 0 {
			r.cfg.ReplyTimeout = 10 * time.Minute // transport.HTTPConfig's default
		}
	}
	wc := cfg.Workers
	userHook := wc.PanicHook
	wc.PanicHook = func(p *workers.PanicError) {
		r.Stats.Panics.Add(1)
		r.log.Error("handler panic", "panic", p.Value, "stack", string(p.Stack))
		if userHook != nil {
			userHook(p)
		}
	}
	d, err := workers.New(wc)
	if err != nil {
		return nil, err
	}
	r.disp = d
	if rf, ok := cfg.Fleet.(RelayFleet); ok {
		rf.SetRelayHandler(r) // retries other instances send to this one (RelayFleet)
	}
	return r, nil
}

// Close stops taking messages and waits (until ctx ends) for those in flight to finish.
func (r *Router) Close(ctx context.Context) error {
	if sf, ok := r.fleet.(StatelessFleet); ok {
		// Listen streams never finish on their own: they end with their result. Nor
		// do calls parked for a retry that this process will not be there to take.
		sf.EndListeners()
		sf.EndParked()
	}
	err := r.disp.Close(ctx)
	// Session records being written must land before the process goes: they are what
	// lets the sessions carry on elsewhere.
	r.saving.flush()
	select {
	case <-r.saving.Zero():
	case <-ctx.Done():
	}
	return err
}

// Dispatcher exposes the dispatcher for metrics.
func (r *Router) Dispatcher() *workers.Dispatcher { return r.disp }

// Session is the router's state of one client session.
//
// Its fields are ordered so that it fits the 64-byte size class (TestRouterSessionSize):
// one is held per session, 100,000 of them on a busy router.
type Session struct {
	version string
	// client is what the client sent at initialize (nil: neither field), shared with
	// the sessions of the same kind of client (keepClient): a pointer where the two
	// slices took 48 bytes of every session and put it in the 112-byte class.
	client *clientFields
	t      atomic.Pointer[transport.Session]
	r      *Router

	saves saver // the writes of its record, one at a time

	// flags: sessStateless marks the session of one stateless (2026-07-28) request,
	// made for it from its _meta and dropped with it (stateless.go); principal is then
	// its sender's. sessPooled marks such a session that goes back to its pool when its
	// request finishes (statelessCall.Unused) unless someone Keeps it. Atomic, 4 bytes in
	// the padding before principal: a Session is no larger for it.
	flags     atomic.Uint32
	principal *auth.Principal
}

// The bits of Session.flags.
const (
	sessStateless uint32 = 1 << iota
	sessPooled
)

// Version is the negotiated revision.
func (s *Session) Version() string { return s.version }

// clientFields are the raw capabilities and clientInfo objects of a client's
// initialize (or a stateless request's _meta), side by side in b: the capabilities are
// its first n bytes. Immutable once made: sessions of one kind of client share one.
type clientFields struct {
	b []byte
	n int
}

// newClientFields copies caps and info into one allocation; nil when both are empty.
func newClientFields(caps, info []byte) *clientFields {
	if len(caps)+len(info) == 0 {
		return nil
	}
	b := make([]byte, 0, len(caps)+len(info))
	b = append(b, caps...)
	return &clientFields{b: append(b, info...), n: len(caps)}
}

// caps is the capabilities object, nil when none (or c is nil); it ends at its
// capacity, so that an append copies.
func (c *clientFields) caps() []byte {
	if c == nil || c.n == 0 {
		return nil
	}
	return c.b[:c.n:c.n]
}

// info is the clientInfo object, nil when none (or c is nil).
func (c *clientFields) info() []byte {
	if c == nil || c.n == len(c.b) {
		return nil
	}
	return c.b[c.n:]
}

// size is the bytes of both objects.
func (c *clientFields) size() int {
	if c == nil {
		return 0
	}
	return len(c.b)
}

// keepClient keeps the client's capabilities and clientInfo (the decoded params are
// dropped after initialize): those the last session kept when they are equal
// (sharedClient), else a copy in one allocation, which the next session may share.
func (s *Session) keepClient(caps, info []byte) {
	if len(caps)+len(info) == 0 {
		return
	}
	if c := sharedClient(caps, info); c != nil { // persist.go
		s.client = c
		return
	}
	s.client = newClientFields(caps, info)
	knownClient.Store(s.client)
}

// sessionOverhead approximates what a session costs beyond its client fields: the
// router's and the transport's session structures and their map entries.
const sessionOverhead = 1 << 10

// recordBytes is what the session's record costs the memory budget.
func (s *Session) recordBytes() int64 {
	return int64(sessionOverhead + s.client.size())
}

// ClientCapabilities is the raw capabilities object the client sent at initialize.
func (s *Session) ClientCapabilities() []byte { return s.client.caps() }

// ClientInfo is the raw clientInfo object the client sent at initialize: what a
// 2026-07-28 backend is shown of the client in each request's _meta.
func (s *Session) ClientInfo() []byte { return s.client.info() }

// Principal is who the session belongs to, with the newest token it presented (the
// transport refuses the session to anyone else); nil without authentication, or before
// the transport has attached its side. For backends' per-principal credentials and for
// policy.
func (s *Session) Principal() *auth.Principal {
	if t := s.t.Load(); t != nil {
		return t.Principal()
	}
	return s.principal
}

// Stateless reports whether s stands for one stateless (2026-07-28) request rather than
// a session: it has no transport session, nothing is kept for it, and what its backend
// sends that belongs to no request has nowhere to go.
func (s *Session) Stateless() bool { return s.flags.Load()&sessStateless != 0 }

// Keep makes s outlive its request, for a holder that keeps it after the request is
// answered (the owner of an upstream session, a retry waiting for another instance, a
// backend's request to the client being judged): the Session of a plain stateless call
// otherwise goes back to its pool once the call is answered, and is the next call's
// (statelessCall). Keep must be called while the request is in flight, before it is
// answered: by the request's own goroutine, or under a lock its answer takes (the
// in-flight table's), so that the answer sees it. It returns s; nil and sessions that
// are not pooled (every session's but a plain stateless call's) are left as they are.
func (s *Session) Keep() *Session {
	if s != nil && s.flags.Load()&sessPooled != 0 {
		s.flags.And(^sessPooled)
	}
	return s
}

// TransportSession is the transport's side of the session (its streams and outputs); nil
// until the transport has attached one.
func (s *Session) TransportSession() *transport.Session { return s.t.Load() }

// Persist saves the session's record again (its subscriptions changed, or it ended). A
// stateless request's Session has no record.
// The write happens later, on the session's one writer (see saver); Router.Close waits
// for it.
func (s *Session) Persist() {
	if s.r == nil || s.r.cfg.Store == nil || s.Stateless() || !s.saves.begin() {
		return
	}
	s.r.saving.push(s.r, s)
}

func sessionOf(ts *transport.Session) *Session {
	if ts == nil {
		return nil
	}
	s, _ := ts.State().(*Session)
	return s
}

// AcceptSessionless lets initialize through without Mcp-Session-Id, and a server/discover
// that does not claim 2026-07-28 (those that do are served statelessly, see Stateless),
// which the router answers with -32601 as a 2025 server would, so that the client falls
// back to initialize.
func (r *Router) AcceptSessionless(m *codec.Message, _ string) bool {
	return m.Kind == codec.KindRequest && (string(m.Method) == "initialize" || string(m.Method) == "server/discover")
}

// HandleMessage hands x to the dispatcher, keyed by session so that one session's
// messages are prepared in order.
func (r *Router) HandleMessage(x *transport.Exchange) {
	r.Stats.Messages.Add(1)
	if x.Msg.Kind == codec.KindRequest {
		r.Stats.Requests.Add(1)
	}
	var key uint64
	if x.Session != nil {
		key = workers.KeyOfString(x.Session.ID())
	} else {
		key = r.rr.Add(1)
	}
	if r.cfg.Tracer != nil {
		r.cfg.Tracer.Start(x)
	}
	j := getJob()
	j.r, j.x = r, x
	if r.tap != nil {
		j.start = Now()
	}
	x.Tag = j // for Started, until the fleet puts its own state there
	var err error
	if r.runsOnCaller(x) { // inline.go
		err = r.disp.DispatchRun(key, j)
	} else {
		err = r.disp.Dispatch(key, j)
	}
	if err != nil {
		r.Stats.Overloaded.Add(1)
		j.fail(err)
	}
}

// SessionClosed releases what the session held. A session handed over by a shutdown
// keeps its record, so that its client carries on with another instance.
func (r *Router) SessionClosed(ts *transport.Session) {
	s := sessionOf(ts)
	if s == nil {
		return
	}
	if r.fleet != nil {
		r.fleet.SessionClosed(s)
	}
	// A session closed before initialize attached it (its budget share refused, or
	// evicted meanwhile) is attached here: its record's deletion gives back the place
	// its store kept for it (a page slot, named with its id). Not one handed over: a
	// session resolved from another instance's record and then not registered here
	// (transport's release) keeps that record as it is.
	if !ts.HandedOver() {
		s.t.CompareAndSwap(nil, ts)
	}
	s.Persist() // the record goes, after any write still running
}
