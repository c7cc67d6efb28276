package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/report"
	"github.com/mcprouter/mcprouter/loadgen/stats"
)

// Progress is the live view of a run, delivered about once a second.
type Progress struct {
	Elapsed   time.Duration // since Run started
	Phase     string        // "connecting", "warm-up", "measuring" or "draining"
	Remaining time.Duration // until the measured window closes (0 before it is known)
	// Over the last interval (every operation, warm-up included):
	RPS       float64       // completions per second
	P50, P99  time.Duration // corrected latency of successful operations
	Completed int64         // operations completed, failed or not
	Errors    int64         // of which failed
	// LastErrorClass is the class of the latest failure and LastError the first
	// message of that class ("" when nothing failed yet): what the live view shows
	// when most calls fail.
	LastErrorClass, LastError string
	// Cumulative over the measured window:
	Requests, TotalErrors int64
	Sessions              int64   // sessions open now
	CPU                   float64 // the generator's own CPU over the interval, 100 = one core
}

// never is the "not yet known" value of the run's time marks.
const never = int64(math.MaxInt64)

// sessionDialer opens sessions; *client.Dialer is the real one, tests substitute
// in-memory sessions.
type sessionDialer interface {
	Dial(index int, deadline time.Time) (client.Session, error)
	Options() client.Options
	Close()
}

type run struct {
	cfg    Config
	dialer sessionDialer
	sleep  func(time.Duration) // the pacer's sleep
	rec    *stats.Recorder
	mix    []*compiledOp
	cum    []int // cumulative mix weights
	// Indexes of the recorder's non-mix operations (-1 when unused).
	connectOp, closeOp, cycleOp, subscribeOp, triggerOp, deliveryOp int

	base time.Time // run clock origin, and the run's start

	// Time marks in nanoseconds on the run clock, set once every session is open.
	t0, measureFrom, end atomic.Int64
	ready                chan struct{}
	pendingDials         atomic.Int64

	stopOnce sync.Once
	stopCh   chan struct{}
	stopped  atomic.Bool
	stopAt   atomic.Int64

	tickets chan ticket // open loop: fed by the pacer
	seq     atomic.Uint64

	opened, failed, reconnects, streams, live atomic.Int64
	moved                                     atomic.Int64 // sessions' moves to another instance
	mu                                        sync.Mutex
	firstErr                                  string
	info                                      client.Info

	fan  *fanout
	errs firstErrors

	// Written by the monitor goroutine, read after it ends.
	series           []report.Second
	cpuSum           float64
	waitSum          float64 // run-queue wait, percent of wall time, summed over seconds
	cpuMax           float64
	cpuSeconds       int
	saturatedSeconds int

	cpuStart, cpuEnd time.Duration // process CPU time at the start and the end of the run
}

// Run executes cfg and returns the report. progress, if not nil, is called about once
// a second from a separate goroutine. Cancelling ctx ends the run early; the report
// then covers what was measured.
func Run(ctx context.Context, cfg Config, progress func(Progress)) (*report.Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var fan *fanout
	opts := cfg.Target
	r := newRun(cfg)
	if cfg.Mode == Fanout {
		fan = newFanout(r)
		opts.OnNotification = fan.onNotification
	}
	d, err := client.NewDialer(opts)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return r.execute(ctx, d, fan, preciseSleep, progress)
}

func newRun(cfg Config) *run {
	r := &run{cfg: cfg, ready: make(chan struct{}), stopCh: make(chan struct{}), tickets: make(chan ticket)}
	r.t0.Store(never)
	r.measureFrom.Store(never)
	r.end.Store(never)
	r.stopAt.Store(never)
	return r
}

// execute runs a validated configuration with the given dialer and pacer sleep.
func (r *run) execute(ctx context.Context, d sessionDialer, fan *fanout, sleep func(time.Duration), progress func(Progress)) (*report.Report, error) {
	if err := r.compile(); err != nil {
		return nil, err
	}
	r.dialer, r.fan, r.sleep = d, fan, sleep
	r.base = time.Now()
	r.cpuStart = processCPU()
	stopWatch := context.AfterFunc(ctx, r.stop)
	defer stopWatch()
	monDone := make(chan struct{})
	monStop := make(chan struct{})
	go func() {
		defer close(monDone)
		r.monitor(progress, monStop)
	}()

	switch r.cfg.Mode {
	case Fanout:
		r.fan.execute()
	default:
		r.executeSessions()
	}
	close(monStop)
	<-monDone
	r.cpuEnd = processCPU()
	if r.opened.Load() == 0 {
		return nil, fmt.Errorf("no session could be established: %s", r.firstErr)
	}
	return r.buildReport(), nil
}

// now is the run clock: monotonic nanoseconds since the run started.
func (r *run) now() int64 { return int64(time.Since(r.base)) }

func (r *run) stop() {
	r.stopOnce.Do(func() {
		r.stopAt.Store(r.now())
		r.stopped.Store(true)
		close(r.stopCh)
	})
}

// sleepUntil waits until the run clock reads t, or the run stops. It reports whether
// the run is still going.
func (r *run) sleepUntil(t int64) bool {
	d := t - r.now()
	if d <= 0 {
		return !r.stopped.Load()
	}
	return !ctxtime.Wait(r.stopCh, time.Duration(d))
}

// dialFinished counts a session opening (or failing); the last one starts the clock:
// the warm-up begins when every session is open, or when the ramp ends if later.
func (r *run) dialFinished() {
	if r.pendingDials.Add(-1) != 0 {
		return
	}
	t0 := max(r.now(), int64(r.cfg.Ramp))
	r.t0.Store(t0)
	r.measureFrom.Store(t0 + int64(r.cfg.Warmup))
	r.end.Store(t0 + int64(r.cfg.Warmup) + int64(r.cfg.Duration))
	close(r.ready)
}

// noteSessionError remembers the first session failure for the report.
func (r *run) noteSessionError(err error) {
	r.mu.Lock()
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
	r.mu.Unlock()
}

func (r *run) noteInfo(info client.Info) {
	r.mu.Lock()
	if r.info.Protocol == "" {
		r.info = info
	}
	r.mu.Unlock()
}

// rampSlot is when session i starts connecting.
func (r *run) rampSlot(i int) int64 {
	if r.cfg.Ramp <= 0 || r.cfg.Sessions <= 1 {
		return 0
	}
	return int64(r.cfg.Ramp) * int64(i) / int64(r.cfg.Sessions)
}

// executeSessions runs steady or churn mode.
func (r *run) executeSessions() {
	n := r.cfg.Sessions
	r.pendingDials.Store(int64(n))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r.cfg.Mode == Churn {
				r.churnWorker(i)
			} else {
				r.steadyWorker(i)
			}
		}()
	}
	select {
	case <-r.ready:
		if r.cfg.Rate > 0 {
			if r.opened.Load() == 0 && r.cfg.Mode != Churn {
				close(r.tickets)
			} else {
				p := newPacer(r.now, r.sleep, r.t0.Load(), r.end.Load(), r.cfg.Rate, r.stopCh)
				p.out = r.tickets
				go p.run()
			}
		}
	case <-r.stopCh:
		// Stopped while connecting: open-loop workers wait on tickets, release them.
		go func() {
			<-r.ready
			if r.cfg.Rate > 0 {
				close(r.tickets)
			}
		}()
	}
	wg.Wait()
	if r.stopped.Load() {
		return
	}
	r.stopAt.Store(r.now())
}

// worker is one session's goroutine state.
type worker struct {
	r    *run
	idx  int
	sess client.Session
	env  TemplateEnv
	rep  client.Reply
	buf  []byte // params
	name []byte // Mcp-Name value
	page []byte // params of the next page
	// consecutive transport failures, to re-establish a dead session
	broken int
	// expired: the last call was refused because the server no longer knows the
	// session (404 on a request with a session id)
	expired bool
}

func (r *run) newWorker(i int) *worker {
	return &worker{r: r, idx: i, env: TemplateEnv{Session: i, Rand: newRand(r.cfg.Seed, uint64(i))}}
}

// dial opens the worker's session and records the connect operation.
func (w *worker) dial(measured bool) error {
	r := w.r
	t := r.now()
	s, err := r.dialer.Dial(w.idx, time.Now().Add(r.cfg.Timeout))
	done := r.now()
	r.rec.Record(w.idx, stats.Sample{Op: r.connectOp, Intended: t, Sent: t, Done: done, Err: r.failure(r.connectOp, err), Measured: measured})
	if err != nil {
		r.noteSessionError(err)
		return err
	}
	w.sess = s
	r.opened.Add(1)
	r.live.Add(1)
	info := s.Info()
	if info.StreamOpen {
		r.streams.Add(1)
	}
	r.noteInfo(info)
	return nil
}

func (w *worker) close(record, measured bool) error {
	if w.sess == nil {
		return nil
	}
	r := w.r
	r.moved.Add(w.sess.Info().Moves)
	t := r.now()
	err := w.sess.Close(time.Now().Add(r.cfg.Timeout))
	if record {
		r.rec.Record(w.idx, stats.Sample{Op: r.closeOp, Intended: t, Sent: t, Done: r.now(), Err: r.failure(r.closeOp, err), Measured: measured})
	}
	w.sess = nil
	r.live.Add(-1)
	return err
}

func (r *run) steadyWorker(i int) {
	w, ok := r.startWorker(i)
	r.dialFinished()
	if !ok {
		return
	}
	defer w.close(false, false)
	r.drive(w.runOp)
}

// startWorker makes session i's worker, waits for its ramp slot and opens its session.
// ok is false when the run stopped first or the dial failed (which is counted).
func (r *run) startWorker(i int) (w *worker, ok bool) {
	w = r.newWorker(i)
	if !r.sleepUntil(r.rampSlot(i)) {
		return w, false
	}
	if err := w.dial(true); err != nil {
		r.failed.Add(1)
		return w, false
	}
	return w, true
}

// drive calls op until the run ends. In open loop op runs once per ticket of the
// schedule, stamped with the ticket's intended time: late when it starts more than
// LateThreshold after it, starved when the pacer was blocked as well. In closed loop op
// runs back to back, each one intended when it is sent.
func (r *run) drive(op func(intended, sent int64, measured, paced, late, starved bool)) {
	if r.cfg.Rate > 0 {
		for t := range r.tickets {
			sent := r.now()
			late := sent-t.intended > int64(r.cfg.LateThreshold)
			op(t.intended, sent, t.intended >= r.measureFrom.Load(), true, late, late && t.blocked)
		}
		return
	}
	for !r.stopped.Load() {
		sent := r.now()
		if sent >= r.end.Load() {
			return
		}
		op(sent, sent, sent >= r.measureFrom.Load(), false, false, false)
	}
}

// runOp picks an operation from the mix, runs it and records it.
func (w *worker) runOp(intended, sent int64, measured, paced, late, starved bool) {
	r := w.r
	o := r.pick(w.env.Rand)
	key, pages := w.exec(o)
	r.rec.Record(w.idx, stats.Sample{Op: o.stat, Intended: intended, Sent: sent, Done: r.now(), Err: key,
		Measured: measured, Paced: paced, Late: late, Starved: starved, Pages: pages})
	w.afterError(key)
}

// afterError re-establishes the session when it is gone: at once when the server said
// so (404 on the session), after a few consecutive transport failures otherwise (the
// connection or process died), with a pause so a dead server is not hammered.
func (w *worker) afterError(key stats.ErrKey) {
	switch {
	case w.expired:
	case key.Class == client.ClassTransport:
		if w.broken++; w.broken < 3 {
			return
		}
		w.r.sleepUntil(w.r.now() + int64(100*time.Millisecond)*int64(min(w.broken, 10)))
	default:
		w.broken = 0
		return
	}
	r := w.r
	if r.cfg.Mode == Churn || r.stopped.Load() {
		return
	}
	w.close(false, false)
	if err := w.dial(true); err == nil {
		r.reconnects.Add(1)
		w.broken = 0
	}
}

// exec sends one operation (all its pages for a list walk) and classifies the outcome.
func (w *worker) exec(o *compiledOp) (stats.ErrKey, int) {
	r := w.r
	if w.sess == nil {
		return stats.ErrKey{Class: client.ClassTransport}, 0
	}
	w.env.Seq = r.seq.Add(1) - 1
	req := client.Request{Method: o.method}
	if o.name != nil {
		w.name = o.name.Append(w.name[:0], &w.env)
		req.Name = w.name
	}
	switch {
	case o.uriParams:
		w.buf = append(w.buf[:0], `{"uri":`...)
		w.buf = codec.AppendQuote(w.buf, w.name)
		w.buf = append(w.buf, '}')
		req.Params = w.buf
	case o.params != nil:
		w.buf = o.params.Append(w.buf[:0], &w.env)
		req.Params = w.buf
	}
	deadline := time.Now().Add(r.cfg.Timeout)
	w.expired = false
	if err := w.sess.Call(&req, deadline, &w.rep); err != nil {
		w.expired = errors.Is(err, client.ErrSessionExpired)
		return r.failure(o.stat, err), 1
	}
	if o.tool && toolError(w.rep.Result) {
		k := stats.ErrKey{Class: client.ClassTool}
		r.errs.note(o.stat, k, func() string { return toolErrorMessage(w.rep.Result) })
		return k, 1
	}
	pages := 1
	for ; pages < o.pages; pages++ {
		cursor := nextCursor(w.rep.Result)
		if cursor == nil {
			break
		}
		w.page = appendMember(w.page[:0], req.Params, "cursor", cursor)
		next := client.Request{Method: o.method, Params: w.page}
		if err := w.sess.Call(&next, deadline, &w.rep); err != nil {
			w.expired = errors.Is(err, client.ErrSessionExpired)
			return r.failure(o.stat, err), pages + 1
		}
	}
	return stats.ErrKey{}, pages
}

// failure classifies a session error of operation op and keeps its message if it is
// the first of its class for op.
func (r *run) failure(op int, err error) stats.ErrKey {
	k := errKey(err)
	r.errs.note(op, k, func() string { return errorMessage(err) })
	return k
}

// errKey classifies a session error.
func errKey(err error) stats.ErrKey {
	if err == nil {
		return stats.ErrKey{}
	}
	var e *client.Error
	if errors.As(err, &e) {
		k := stats.ErrKey{Class: e.Class}
		if e.Class == client.ClassHTTP || e.Class == client.ClassJSONRPC {
			k.Code = e.Code
		}
		return k
	}
	return stats.ErrKey{Class: client.ClassTransport}
}

// churnWorker repeats session lifecycles: connect, ChurnCalls calls, close.
func (r *run) churnWorker(i int) {
	w := r.newWorker(i)
	ok := r.sleepUntil(r.rampSlot(i))
	r.dialFinished()
	if !ok {
		return
	}
	if r.cfg.Rate > 0 {
		<-r.ready
	}
	r.drive(w.cycle)
}

// cycle is one churn operation; it fails with the first failure of its steps.
func (w *worker) cycle(intended, sent int64, measured, paced, late, starved bool) {
	r := w.r
	var first stats.ErrKey
	if err := w.dial(measured); err != nil {
		r.failed.Add(1)
		first = errKey(err) // noted by dial
	} else {
		for range r.cfg.ChurnCalls {
			o := r.pick(w.env.Rand)
			t := r.now()
			key, pages := w.exec(o)
			r.rec.Record(w.idx, stats.Sample{Op: o.stat, Intended: t, Sent: t, Done: r.now(), Err: key, Measured: measured, Pages: pages})
			if first.Class == client.ClassNone {
				first = key
			}
		}
		if err := w.close(true, measured); err != nil && first.Class == client.ClassNone {
			first = errKey(err) // noted by close
		}
	}
	r.rec.Record(w.idx, stats.Sample{Op: r.cycleOp, Intended: intended, Sent: sent, Done: r.now(), Err: first,
		Measured: measured, Paced: paced, Late: late, Starved: starved})
	if !paced && first.Class != client.ClassNone && first.Class != client.ClassJSONRPC && first.Class != client.ClassTool {
		// In closed loop a server that refuses connections must not be spun on at full
		// speed. (Open loop keeps its schedule whatever happens.)
		w.r.sleepUntil(w.r.now() + int64(10*time.Millisecond))
	}
}

// defaultShards is the recorder's shard count when Config.Shards is zero.
func defaultShards() int { return 2 * runtime.GOMAXPROCS(0) }
