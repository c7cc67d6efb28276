package router

import (
	"cmp"
	"sync"
	"time"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// recordWriters is how many session records one router writes at once. Each write is a
// JetStream round trip; a router used to start one goroutine per changed session, and
// while opening 100,000 sessions on eight routers those goroutines (tens of thousands
// of them, each blocked in a write that the one JetStream was too loaded to answer) held
// 6-8 KiB of stack and buffers per session long after they ended, flooded the JetStream
// with writes until it answered "429 too many requests", and starved the upstream
// subscription leases that share it. A few writers per router keep as many writes in
// flight as a loaded JetStream can take; the queue waits instead, at one pointer per
// session.
const recordWriters = 4

// recordSettle is how long a session waits in the queue before its record is written:
// a session that opens initializes, then opens its stream and subscribes within a few
// round trips, and each step changed the record; written at once, it cost two or three
// JetStream writes per session opened (and as many messages replaced in the NATS
// server). Waiting lets the changes of the settle join one write. The price: a session
// whose instance dies within recordSettle of a change is carried on without that change
// (or, if it had no record yet, is unknown elsewhere and its client initializes again).
const recordSettle = 500 * time.Millisecond

// recordWriter is the queue of sessions whose record is to be written, and its writers:
// at most recordWriters goroutines, started when work arrives and ended when none is
// left, so that an idle router runs none. A session is in the queue at most once (its
// saver says whether it is queued or being written), so the queue is bounded by the
// sessions. Its Counter counts the queued and written sessions: Router.Close waits for
// none.
type recordWriter struct {
	ctxtime.Counter

	mu      sync.Mutex
	queue   []queued // queue[head:] waits, oldest first (so in the order they are due)
	head    int
	running int // writer goroutines

	settle  time.Duration // 0: recordSettle; tests change it before the first push
	wake    chan struct{} // closed by flush: nothing waits for its settle any more
	flushed bool          // flush has run
}

// queued is a session in the queue and when its record is due to be written.
type queued struct {
	s   *Session
	due time.Time
}

// push queues s, whose saver has just begun, and starts a writer if fewer than
// recordWriters run.
func (w *recordWriter) push(r *Router, s *Session) {
	w.Add()
	w.mu.Lock()
	w.queue = append(w.queue, queued{s, w.due()})
	start := w.running < recordWriters
	if start {
		w.running++
	}
	w.mu.Unlock()
	if start {
		go w.run(r)
	}
}

// flush writes every queued record as soon as a writer takes it, without waiting for
// its settle: the process is going (Router.Close), and the records are what lets its
// sessions carry on elsewhere.
func (w *recordWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.flushed {
		w.flushed = true
		close(w.wakeLocked())
	}
}

// wakeLocked is the channel flush closes, made by whoever first needs it; the caller
// holds w.mu.
func (w *recordWriter) wakeLocked() chan struct{} {
	if w.wake == nil {
		w.wake = make(chan struct{})
	}
	return w.wake
}

// wait waits until due, or until flush.
func (w *recordWriter) wait(due time.Time) {
	d := time.Until(due)
	if d <= 0 {
		return
	}
	w.mu.Lock()
	wake := w.wakeLocked()
	w.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	}
}

// due is when a session queued now is to be written: after its settle, rounded up to
// the next half settle, so that the sessions due within one half settle are due at
// once and go out in one batch. Each record is in a page of records of the same
// router's sessions (natsbus), and a page is written whole: due one by one, the
// sessions opening at a thousand a second were written in batches of a few, and each
// page was written again and again while it filled (5 to 7 times in the NATS server's
// allocation profile of a 20,000-session opening).
func (w *recordWriter) due() time.Time {
	settle := cmp.Or(w.settle, recordSettle)
	tick := max(settle/2, time.Millisecond)
	return time.Now().Add(settle).Truncate(tick).Add(tick)
}

// next takes the oldest queued session and when it is due; nil when none is left, and
// the writer that asked then ends.
func (w *recordWriter) next() (*Session, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head == len(w.queue) {
		w.running--
		// The queue's storage grew with the backlog; an empty queue gives it back.
		w.queue, w.head = nil, 0
		return nil, time.Time{}
	}
	q := w.queue[w.head]
	w.queue[w.head] = queued{}
	w.head++
	return q.s, q.due
}

// requeue puts s back at the end of the queue: it changed while it was written. A
// session changing again and again thus waits its turn behind the others, and settles
// again (a session that subscribes while its first record is written).
func (w *recordWriter) requeue(s *Session) {
	w.mu.Lock()
	w.queue = append(w.queue, queued{s, w.due()})
	w.mu.Unlock()
}

// batchStore is a SessionStore that writes many records in one go: each record is a
// JetStream round trip, and most of its cost is the system calls of the request and
// of its acknowledgement on both ends (a quarter of a router's CPU per session opened
// went to writing records one at a time); sent together, they share them.
type batchStore interface {
	// SaveAll writes recs[i] under ids[i], or deletes ids[i]'s record where recs[i] is
	// nil, and reports each write's error (nil: stored).
	SaveAll(ids []string, recs [][]byte) []error
}

// recordBatch bounds the records one writer sends at once to a batchStore.
const recordBatch = 256

// takeDue appends to batch the queued sessions that are due now (all of them once
// flushed), after the one the writer took, up to recordBatch in all.
func (w *recordWriter) takeDue(batch []*Session) []*Session {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(batch) < recordBatch && w.head < len(w.queue) && (w.flushed || !w.queue[w.head].due.After(now)) {
		batch = append(batch, w.queue[w.head].s)
		w.queue[w.head] = queued{}
		w.head++
	}
	return batch
}

// run is one writer: it writes the queued sessions' records until none is left, each
// once it is due. The queue is in the order the sessions are due (each waits the same
// settle from when it was queued), so a writer waiting for its session's turn holds
// back none that is due before it; the other writers take those after it. With a
// batchStore, the sessions due by then go with it, in one batch.
func (w *recordWriter) run(r *Router) {
	batcher, _ := r.cfg.Store.(batchStore)
	var batch []*Session
	for s, due := w.next(); s != nil; s, due = w.next() {
		w.wait(due)
		batch = append(batch[:0], s)
		if batcher != nil {
			batch = w.takeDue(batch)
		}
		r.saveAll(batch, batcher)
		for i, s := range batch {
			batch[i] = nil
			if s.saves.again() {
				w.requeue(s)
				continue
			}
			w.Done()
		}
	}
}

// saveAll writes the records of sessions, in one batch when the store takes batches
// and there are several (the records of sessions that ended are deleted in it); a
// record the batch did not store is tried again alone.
func (r *Router) saveAll(sessions []*Session, batcher batchStore) {
	if batcher == nil || len(sessions) == 1 {
		for _, s := range sessions {
			s.saves.take()
			r.save(s)
		}
		return
	}
	var (
		ids   = make([]string, 0, len(sessions))
		recs  = make([][]byte, 0, len(sessions))
		saved = make([]*Session, 0, len(sessions))
	)
	for _, s := range sessions {
		s.saves.take()
		if id, b, ok := r.snapshot(s); ok {
			ids, recs, saved = append(ids, id), append(recs, b), append(saved, s)
		}
	}
	if len(ids) == 0 {
		return
	}
	errs := batcher.SaveAll(ids, recs)
	for i, s := range saved {
		if recs[i] == nil { // deleted: the session ended
			continue
		}
		if errs[i] == nil {
			s.saves.wrote()
			continue
		}
		r.write(s, ids[i], recs[i], errs[i])
	}
}
