package fanout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Options say what to measure. The zero value of each field takes its default.
type Options struct {
	// Sessions are the sizes to measure, ascending: for each, that many sessions are
	// subscribed (and as many raw NATS subscriptions exist). Sessions are added from one
	// size to the next, not recreated. Default 1, 100, 1000, 10000.
	Sessions []int
	// Updates measured per size. Default 10.
	Updates int
	// Warmup updates per size, sent and waited for but not measured (the first update
	// after new sessions joined finds cold buffers and goroutines). Default 1; negative
	// means none.
	Warmup int
	// Concurrency bounds the sessions being set up at once. Default 64.
	Concurrency int
	// Timeout bounds the wait for one update's deliveries and every request. Default 10s.
	Timeout time.Duration
	// Gap is a pause after each update, so that work an update leaves behind (event log
	// appends, buffers returned) does not land on the next measurement. Default 50ms;
	// negative means none.
	Gap time.Duration
	// URI is the resource the sessions subscribe to. Default memo://board (the reference
	// backend's).
	URI string
	// CPUProfile, when set, is a file that receives a CPU profile of the servers' process
	// during the measured updates of the largest size.
	CPUProfile string
	// ClientCPUProfile, when set, is a file that receives a CPU profile of this (the
	// clients') process over the same span. With servers in this process, set only one
	// of the two: both would profile the same process.
	ClientCPUProfile string
	// NoFloor skips the TCP floor (floor.go): after the router and NATS sizes, the GET
	// streams are closed and the same sizes are measured on bare TCP connections.
	NoFloor bool
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
}

func (o *Options) defaults() error {
	if len(o.Sessions) == 0 {
		o.Sessions = []int{1, 100, 1000, 10000}
	}
	if !slices.IsSorted(o.Sessions) || o.Sessions[0] < 1 {
		return fmt.Errorf("fanout: sessions %v must be positive and ascending", o.Sessions)
	}
	if o.Updates <= 0 {
		o.Updates = 10
	}
	if o.Warmup == 0 {
		o.Warmup = 1
	}
	o.Warmup = max(o.Warmup, 0)
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Gap == 0 {
		o.Gap = 50 * time.Millisecond
	}
	o.Gap = max(o.Gap, 0)
	if o.URI == "" {
		o.URI = "memo://board"
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return nil
}

// SizeResult is one size's figures, router and raw NATS side by side.
type SizeResult struct {
	Sessions int    `json:"sessions"`
	Router   Result `json:"router"`
	NATS     Result `json:"nats"`
	// Floor is the TCP floor's figures (zero with Options.NoFloor).
	Floor Result `json:"floor"`
	// Setup is how long adding this size's new sessions took (initialize, initialized,
	// subscribe and GET, Options.Concurrency at a time).
	Setup time.Duration `json:"setup"`
}

// Report is a whole run.
type Report struct {
	Sizes      []SizeResult `json:"sizes"`
	Updates    int          `json:"updates"`
	Warmup     int          `json:"warmup"`
	GOMAXPROCS int          `json:"gomaxprocs"`
	NumCPU     int          `json:"num_cpu"`
	// Payload is the bytes every receiver gets (the router's notification; the raw
	// NATS side publishes the same bytes).
	Payload string `json:"payload"`
	// Server is the routers' counters at the end.
	Server ServerStats `json:"server"`
	// StreamErrors counts GET streams that ended before the run did.
	StreamErrors uint64 `json:"stream_errors"`
	// Stray counts deliveries beyond the updates sent (duplicates); 0 in a sound run.
	Stray    uint64        `json:"stray"`
	Duration time.Duration `json:"duration"`
	// InProcess: the servers ran in the clients' process.
	InProcess bool `json:"in_process"`
	// Floor: the TCP floor was measured.
	Floor bool `json:"floor"`
}

// payload is what the reference backend sends, and so what every session receives.
func payload(uri string) []byte {
	b := []byte(`{"jsonrpc":"2.0","method":"` + updateMethod + `","params":{"uri":`)
	b = codec.AppendString(b, uri)
	return append(b, "}}"...)
}

// Run measures the fan-out of target at each size: router sessions and raw NATS
// subscriptions, one update at a time, alternating between the two sides so that both
// see the same conditions; then, unless Options.NoFloor, the TCP floor at the same
// sizes, once the GET streams are closed. It closes every stream, connection and
// subscription it opened and leaves target running (the sessions stay on the routers).
func Run(ctx context.Context, target Target, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	ep := target.Endpoints()
	if len(ep.Routers) == 0 || ep.NATS == "" {
		return nil, errors.New("fanout: the target has no router or no NATS endpoint")
	}
	start := time.Now()
	perRound := opts.Warmup + opts.Updates
	maxRounds := len(opts.Sessions) * perRound
	h := &harness{
		opts:      opts,
		router:    newTracker(start, maxRounds),
		raw:       newTracker(start, maxRounds),
		floorT:    newTracker(start, maxRounds),
		floorAddr: ep.Floor,
		msg:       payload(opts.URI),
	}
	defer h.close()
	for _, u := range ep.Routers {
		e, err := newEndpoint(u, opts.Concurrency+4, opts.Timeout)
		if err != nil {
			return nil, err
		}
		h.eps = append(h.eps, e)
	}
	if err := h.connectNATS(ep.NATS); err != nil {
		return nil, err
	}
	rep := &Report{
		Updates: opts.Updates, Warmup: opts.Warmup,
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Payload: string(h.msg),
		InProcess: target.InProcess(),
	}
	largest := opts.Sessions[len(opts.Sessions)-1]
	for _, n := range opts.Sessions {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := h.grow(ctx, n); err != nil {
			return nil, err
		}
		setup := time.Since(t0)
		opts.Logf("%d sessions and subscriptions ready (setup %v)", n, setup.Round(time.Millisecond))
		profile := (opts.CPUProfile != "" || opts.ClientCPUProfile != "") && n == largest
		sr, err := h.measure(ctx, target, n, profile)
		if err != nil {
			return nil, err
		}
		sr.Setup = setup
		rep.Sizes = append(rep.Sizes, sr)
		opts.Logf("%d: router p50 %v p99 %v %.0f/s (misses %d) | NATS p50 %v p99 %v %.0f/s (misses %d)",
			n, sr.Router.P50, sr.Router.P99, sr.Router.PerSec, sr.Router.Misses,
			sr.NATS.P50, sr.NATS.P99, sr.NATS.PerSec, sr.NATS.Misses)
	}
	st, err := settledStats(ctx, target, h.router.got.Load())
	if err != nil {
		return nil, err
	}
	rep.Server = st
	rep.StreamErrors = h.streamErrs.Load()
	if !opts.NoFloor && ep.Floor != "" {
		// The sessions and their streams go first, on both ends: one process may not
		// hold both sets of sockets.
		t0 := time.Now()
		if err := h.releaseStreams(ctx, target); err != nil {
			return nil, err
		}
		opts.Logf("%d GET streams closed on both ends (%v)", len(h.sessions), time.Since(t0).Round(time.Millisecond))
		for i, n := range opts.Sessions {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := h.growFloor(n); err != nil {
				return nil, err
			}
			res, err := h.measureFloor(ctx, target, n)
			if err != nil {
				return nil, err
			}
			rep.Sizes[i].Floor = res
			opts.Logf("%d: TCP floor p50 %v p99 %v %.0f/s (misses %d)", n, res.P50, res.P99, res.PerSec, res.Misses)
		}
		rep.StreamErrors = h.streamErrs.Load()
		rep.Floor = true
	}
	rep.Stray = h.router.stray.Load() + h.raw.stray.Load() + h.floorT.stray.Load()
	rep.Duration = time.Since(start)
	return rep, nil
}

// settledStats reads the routers' counters once their fan-out count covers the got
// deliveries the sessions received, waiting up to two seconds: a fan-out counts its
// sessions after its last write, which a client may have read before, so a reading
// right after the last round can be short by that round. It must be taken here, before
// anything else makes the routers fan out (releaseStreams' touches).
func settledStats(ctx context.Context, target Target, got uint64) (ServerStats, error) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		st, err := target.Stats()
		if err != nil || st.FanOut >= got || time.Now().After(deadline) || ctx.Err() != nil {
			return st, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// harness is the client side of one run.
type harness struct {
	opts   Options
	eps    []*endpoint
	router *tracker
	raw    *tracker
	msg    []byte

	sessions   []*session
	readers    sync.WaitGroup
	streamErrs atomic.Uint64
	closing    atomic.Bool // the run is over: connections ending are no errors
	// streamsClosed: the GET streams were closed on purpose (before the floor).
	streamsClosed atomic.Bool

	subConns []*nats.Conn // the raw side's subscribers, spread over two connections
	pubConn  *nats.Conn
	subs     []*nats.Subscription
	subject  string
	callID   int
	prof     cpuProfile // the clients' CPU profile

	floorT    *tracker
	floorAddr string
	floor     []*floorClient
	floorPub  net.Conn
}

// connectNATS opens the raw side's connections: two for the subscribers (as two router
// instances have one each) and one for the publisher (the owner instance's).
func (h *harness) connectNATS(url string) error {
	h.subject = "fanout.raw"
	for i := 0; i < 3; i++ {
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("fanout-raw-%d", i)), nats.Timeout(h.opts.Timeout),
			nats.NoReconnect())
		if err != nil {
			return fmt.Errorf("fanout: NATS: %w", err)
		}
		if i < 2 {
			h.subConns = append(h.subConns, nc)
		} else {
			h.pubConn = nc
		}
	}
	return nil
}

// grow adds sessions and raw subscriptions up to n of each.
func (h *harness) grow(ctx context.Context, n int) error {
	from := len(h.sessions)
	if from >= n {
		return nil
	}
	added := make([]*session, n-from)
	errs := make(chan error, 1)
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < min(h.opts.Concurrency, len(added)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(added) {
					return
				}
				idx := from + i
				s := &session{idx: idx, ep: h.eps[idx%len(h.eps)]}
				if err := s.open(h.opts.URI, h.opts.Timeout); err != nil {
					select {
					case errs <- fmt.Errorf("session %d: %w", idx, err):
					default:
					}
					cancel()
					return
				}
				added[i] = s
			}
		}()
	}
	wg.Wait()
	// Every opened stream is kept, even after a failure, so that close ends it.
	for _, s := range added {
		if s != nil {
			h.router.join(&s.rcv, s.idx)
			h.sessions = append(h.sessions, s)
			h.readers.Add(1)
			go func() { defer h.readers.Done(); s.run(h.router, &h.streamErrs, &h.streamsClosed) }()
		}
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Indexes must be dense: session i is receiver i.
	slices.SortFunc(h.sessions, func(a, b *session) int { return a.idx - b.idx })

	for i := len(h.subs); i < n; i++ {
		r := &receiver{}
		h.raw.join(r, i)
		tr := h.raw
		sub, err := h.subConns[i%len(h.subConns)].Subscribe(h.subject, func(*nats.Msg) { tr.deliver(r, tr.now()) })
		if err != nil {
			return fmt.Errorf("fanout: NATS subscription %d: %w", i, err)
		}
		// The pending limits are per subscription; one message at a time is all the
		// benchmark sends, the defaults are ample.
		h.subs = append(h.subs, sub)
	}
	for _, nc := range h.subConns {
		if err := nc.FlushTimeout(h.opts.Timeout); err != nil {
			return fmt.Errorf("fanout: NATS: %w", err)
		}
	}
	return nil
}

// measure sends the warm-up and measured updates for n receivers on each side,
// alternating router and NATS update by update.
func (h *harness) measure(ctx context.Context, target Target, n int, profile bool) (SizeResult, error) {
	sr := SizeResult{Sessions: n}
	var routerSamples, rawSamples []sample
	var rtts []time.Duration
	for u := 0; u < h.opts.Warmup+h.opts.Updates; u++ {
		if err := ctx.Err(); err != nil {
			return sr, err
		}
		measured := u >= h.opts.Warmup
		if profile && u == h.opts.Warmup {
			if err := h.startProfiles(target); err != nil {
				return sr, err
			}
		}

		// Router: t0, the touch call, then the wait for every session's receipt.
		s0, c0, err := h.cpu(target)
		if err != nil {
			return sr, err
		}
		rd := h.router.start(n)
		rd.t0 = h.router.now()
		rtt, err := h.touchAt(rd.t0)
		if err != nil {
			return sr, err
		}
		h.router.wait(rd, h.opts.Timeout)
		h.pause()
		smp, err := h.finish(target, rd, s0, c0)
		if err != nil {
			return sr, err
		}
		if measured {
			routerSamples = append(routerSamples, smp)
			rtts = append(rtts, rtt)
		}

		// Raw NATS: the same bytes on one subject with n subscriptions.
		if s0, c0, err = h.cpu(target); err != nil {
			return sr, err
		}
		rd = h.raw.start(n)
		rd.t0 = h.raw.now()
		if err := h.pubConn.Publish(h.subject, h.msg); err != nil {
			return sr, fmt.Errorf("fanout: NATS publish: %w", err)
		}
		h.raw.wait(rd, h.opts.Timeout)
		h.pause()
		if smp, err = h.finish(target, rd, s0, c0); err != nil {
			return sr, err
		}
		if measured {
			rawSamples = append(rawSamples, smp)
		}
	}
	if profile {
		if err := h.stopProfiles(target); err != nil {
			return sr, err
		}
	}
	sr.Router = summarize(n, routerSamples, rtts)
	sr.NATS = summarize(n, rawSamples, nil)
	return sr, nil
}

// cpu reads the CPU time of the servers' process and of this one (0 when the servers
// run here: the servers' figure is then the total).
func (h *harness) cpu(target Target) (srv, cli time.Duration, err error) {
	srv, err = target.CPU()
	if !target.InProcess() {
		cli = processCPU()
	}
	return srv, cli, err
}

// finish collects a round after its wait and the pause that follows it, with the CPU
// time both processes spent from just before the update to now: the pause lets work
// the update left behind (acknowledgements, buffers returned) count for it.
func (h *harness) finish(target Target, rd *round, s0, c0 time.Duration) (sample, error) {
	s1, c1, err := h.cpu(target)
	if err != nil {
		return sample{}, err
	}
	smp := rd.collect()
	smp.serverCPU, smp.clientCPU = s1-s0, c1-c0
	return smp, nil
}

func (h *harness) startProfiles(target Target) error {
	if h.opts.CPUProfile != "" {
		if err := target.StartCPUProfile(h.opts.CPUProfile); err != nil {
			return err
		}
	}
	if h.opts.ClientCPUProfile != "" {
		return h.prof.start(h.opts.ClientCPUProfile)
	}
	return nil
}

func (h *harness) stopProfiles(target Target) error {
	var err error
	if h.opts.CPUProfile != "" {
		err = target.StopCPUProfile()
	}
	if perr := h.prof.stop(); err == nil {
		err = perr
	}
	return err
}

func (h *harness) pause() {
	if h.opts.Gap > 0 {
		time.Sleep(h.opts.Gap)
	}
}

// measureFloor sends the warm-up and measured events of the TCP floor to n clients.
func (h *harness) measureFloor(ctx context.Context, target Target, n int) (Result, error) {
	var samples []sample
	line := append(slices.Clone(h.msg), '\n')
	for u := 0; u < h.opts.Warmup+h.opts.Updates; u++ {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		s0, c0, err := h.cpu(target)
		if err != nil {
			return Result{}, err
		}
		rd := h.floorT.start(n)
		rd.t0 = h.floorT.now()
		if _, err := h.floorPub.Write(line); err != nil {
			return Result{}, fmt.Errorf("fanout: floor publish: %w", err)
		}
		h.floorT.wait(rd, h.opts.Timeout)
		h.pause()
		smp, err := h.finish(target, rd, s0, c0)
		if err != nil {
			return Result{}, err
		}
		if u >= h.opts.Warmup {
			samples = append(samples, smp)
		}
	}
	return summarize(n, samples, nil), nil
}

// closeStreams closes the sessions' GET streams on the client side. Their readers end
// quietly.
func (h *harness) closeStreams() {
	h.streamsClosed.Store(true)
	for _, s := range h.sessions {
		s.conn.Close()
	}
}

// releaseStreams closes the GET streams and waits until the routers closed their ends
// too, so that their sockets are free for the floor.
//
// A router notices a stream whose client left only when a write to it fails, so updates
// are sent until every stream is gone: the first write to a closed connection draws a
// reset, the next one fails. (Ending the sessions with DELETE would also do, but with
// session persistence on it costs the routers a JetStream purge per session that scans
// the whole event stream: minutes at 10,000 sessions.) The sessions stay on the routers,
// without streams.
func (h *harness) releaseStreams(ctx context.Context, target Target) error {
	h.closeStreams()
	deadline := time.Now().Add(45 * time.Second) // a keep-alive period (15s) would do it too
	for i := 0; ; i++ {
		st, err := target.Stats()
		if err != nil {
			return err
		}
		if st.OpenStreams == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("fanout: %d router streams still open after their clients left", st.OpenStreams)
		}
		if i%10 == 0 {
			if err := h.touch(); err != nil {
				return err
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// touch calls the touch tool through the first session and checks the answer; it
// returns the call's round trip, measured from t0 (ns since the router tracker's base).
func (h *harness) touch() error {
	_, err := h.touchAt(h.router.now())
	return err
}

func (h *harness) touchAt(t0 int64) (time.Duration, error) {
	s := h.sessions[0]
	h.callID++
	body := touchBody(nil, 100+h.callID, h.opts.URI)
	status, _, reply, err := s.ep.post(s.sid, body, h.opts.Timeout, nil)
	rtt := time.Duration(h.router.now() - t0)
	if err == nil {
		err = expectResult("tools/call touch", status, reply, true)
	}
	return rtt, err
}

// close ends every GET stream and subscription and waits (bounded) for the readers.
func (h *harness) close() {
	h.prof.stop()
	h.closing.Store(true)
	h.closeStreams()
	for _, fc := range h.floor {
		fc.conn.Close()
	}
	if h.floorPub != nil {
		h.floorPub.Close()
	}
	for _, sub := range h.subs {
		sub.Unsubscribe()
	}
	for _, nc := range append(h.subConns, h.pubConn) {
		if nc != nil {
			nc.Close()
		}
	}
	for _, e := range h.eps {
		e.hc.CloseIdleConnections()
	}
	ctxtime.WaitGroup(&h.readers, 10*time.Second)
}
