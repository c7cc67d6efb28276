package loadgen

import (
	"bytes"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/mcprouter/mcprouter/codec"
	"github.com/mcprouter/mcprouter/loadgen/client"
	"github.com/mcprouter/mcprouter/loadgen/report"
	"github.com/mcprouter/mcprouter/loadgen/stats"
)

// fanout runs fan-out mode: Sessions subscribers hold their server-to-client stream
// open and subscribe to one resource (on the stateless revision: each holds a
// subscriptions/listen stream for it); one more session (the publisher) sends the
// trigger call at Fanout.Rate on an open-loop schedule, starting once every subscriber
// is in place. Each subscriber's notifications/resources/updated are matched to the
// triggers in order (its first notification to the first trigger, and so on), and the
// delivery latency is measured from the trigger's intended send time (corrected) and
// from its actual send time (uncorrected).
//
// In-order matching stays right however slow the deliveries get. A server that drops
// or merges updates makes later deliveries match earlier triggers, which overstates
// their latency (never understates it) and shows up as missing deliveries.
type fanout struct {
	r    *run
	uri  []byte
	subs int

	// trig[i] is trigger i, written by the publisher before it publishes sent = i+1.
	trig     []trigger
	sent     atomic.Int64
	per      []subscriber
	active   atomic.Int64 // subscribers whose subscription succeeded
	triggers atomic.Int64 // measured triggers sent
	// measured deliveries; duplicates are second notifications for one trigger
	delivered, duplicates atomic.Int64
	done                  chan struct{} // closed when subscribers may leave
}

type trigger struct {
	intended, sent int64
	measured       bool
}

// subscriber is one subscriber's delivery record, updated from its stream reader.
type subscriber struct {
	lastSeq atomic.Int64
	n, sum  atomic.Int64 // measured deliveries and their total corrected latency
	max     atomic.Int64
}

func newFanout(r *run) *fanout {
	f := &fanout{r: r, uri: []byte(r.cfg.Fanout.URI), subs: r.cfg.Sessions, done: make(chan struct{})}
	f.per = make([]subscriber, f.subs)
	for i := range f.per {
		f.per[i].lastSeq.Store(-1)
	}
	return f
}

// onNotification is the client hook; it runs on the subscriber's stream reader.
func (f *fanout) onNotification(session int, m *codec.Message, at time.Time) {
	if session >= f.subs || string(m.Method) != "notifications/resources/updated" || !bytes.Equal(m.URI, f.uri) {
		return
	}
	st := &f.per[session]
	seq := st.lastSeq.Load() + 1
	if seq >= f.sent.Load() {
		f.duplicates.Add(1) // more updates than triggers: not ours, or sent twice
		return
	}
	st.lastSeq.Store(seq)
	tr := &f.trig[seq]
	done := int64(at.Sub(f.r.base))
	if tr.measured {
		f.delivered.Add(1)
		lat := done - tr.intended
		st.n.Add(1)
		st.sum.Add(lat)
		for {
			cur := st.max.Load()
			if lat <= cur || st.max.CompareAndSwap(cur, lat) {
				break
			}
		}
	}
	f.r.rec.Record(session, stats.Sample{Op: f.r.deliveryOp, Intended: tr.intended, Sent: tr.sent, Done: done, Measured: tr.measured})
}

func (f *fanout) execute() {
	r := f.r
	r.pendingDials.Store(int64(f.subs + 1))
	sub, err := compileOp(OpSpec{Method: "resources/subscribe", URI: r.cfg.Fanout.URI, Pages: 1})
	if err != nil {
		panic(err) // the URI was validated; a failure here is a bug
	}
	sub.stat = r.subscribeOp
	trig, err := compileOp(r.cfg.Fanout.Trigger)
	if err != nil {
		r.noteSessionError(err)
		return
	}
	trig.stat = r.triggerOp

	var wg sync.WaitGroup
	for i := range f.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.subscriber(i, sub)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.publisher(trig)
	}()
	wg.Wait()
	if !r.stopped.Load() {
		r.stopAt.Store(r.now())
	}
}

func (f *fanout) subscriber(i int, sub *compiledOp) {
	r := f.r
	w, ok := r.startWorker(i)
	if ok {
		t := r.now()
		key := f.subscribe(w, sub)
		r.rec.Record(i, stats.Sample{Op: sub.stat, Intended: t, Sent: t, Done: r.now(), Err: key, Measured: true})
		if key.Class == 0 {
			f.active.Add(1)
		}
	}
	r.dialFinished()
	if !ok {
		return
	}
	select {
	case <-f.done:
	case <-r.stopCh:
	}
	w.close(false, false)
}

// subscribe makes w's session a subscriber: resources/subscribe on a session revision
// (the updates arrive on its GET stream), a subscriptions/listen stream on the
// stateless revision.
func (f *fanout) subscribe(w *worker, sub *compiledOp) stats.ErrKey {
	if f.r.cfg.Target.Protocol != client.Version20260728 {
		key, _ := w.exec(sub)
		return key
	}
	l, ok := w.sess.(client.Listener)
	if !ok {
		return f.r.failure(sub.stat, errors.New("the session cannot hold subscriptions/listen streams"))
	}
	return f.r.failure(sub.stat, l.Listen([]string{string(f.uri)}, time.Now().Add(f.r.cfg.Timeout)))
}

func (f *fanout) publisher(trig *compiledOp) {
	r := f.r
	defer close(f.done)
	w := r.newWorker(f.subs)
	err := w.dial(true)
	r.dialFinished()
	if err != nil {
		r.failed.Add(1)
		return
	}
	defer w.close(false, false)
	select {
	case <-r.ready:
	case <-r.stopCh:
		return
	}
	t0, end := r.t0.Load(), r.end.Load()
	f.trig = make([]trigger, int(math.Ceil(float64(end-t0)/1e9*r.cfg.Fanout.Rate))+1)
	p := newPacer(r.now, r.sleep, t0, end, r.cfg.Fanout.Rate, r.stopCh)
	go p.run()
	for t := range p.out {
		if t.seq >= int64(len(f.trig)) {
			break // rounding: the schedule never has more tickets than the window holds
		}
		sent := r.now()
		measured := t.intended >= r.measureFrom.Load()
		f.trig[t.seq] = trigger{intended: t.intended, sent: sent, measured: measured}
		f.sent.Store(t.seq + 1)
		if measured {
			f.triggers.Add(1)
		}
		key, _ := w.exec(trig)
		late := sent-t.intended > int64(r.cfg.LateThreshold)
		r.rec.Record(f.subs, stats.Sample{Op: trig.stat, Intended: t.intended, Sent: sent, Done: r.now(), Err: key,
			Measured: measured, Paced: true, Late: late, Starved: late && t.blocked})
	}
	// Wait for the deliveries still in flight, polling: they arrive on other goroutines.
	deadline := r.now() + int64(r.cfg.Fanout.Grace)
	for r.now() < deadline && !r.stopped.Load() && f.delivered.Load() < f.expected() {
		r.sleepUntil(r.now() + int64(10*time.Millisecond))
	}
}

func (f *fanout) expected() int64 { return f.triggers.Load() * f.active.Load() }

// summary builds the report section.
func (f *fanout) summary(deliveries stats.OpTotals) *report.Fanout {
	out := &report.Fanout{
		URI: string(f.uri), Subscribers: int(f.active.Load()), Triggers: f.triggers.Load(),
		Expected: f.expected(), Delivered: f.delivered.Load(), Duplicates: f.duplicates.Load(),
		Latency:            report.Summarize(deliveries.Corrected),
		LatencyUncorrected: report.Summarize(deliveries.Uncorrected),
	}
	out.Missing = max(out.Expected-out.Delivered, 0)
	means, maxes := hdr.New(stats.Lowest, stats.Highest, stats.Sigfigs), hdr.New(stats.Lowest, stats.Highest, stats.Sigfigs)
	for i := range f.per {
		st := &f.per[i]
		if n := st.n.Load(); n > 0 {
			_ = means.RecordValue(max(st.sum.Load()/n, 1))
			_ = maxes.RecordValue(max(st.max.Load(), 1))
		}
	}
	out.PerSessionMean = report.Summarize(means)
	out.PerSessionMax = report.Summarize(maxes)
	return out
}
