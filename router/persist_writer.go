package router

import (
	"sync"

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

// recordWriter is the queue of sessions whose record is to be written, and its writers:
// at most recordWriters goroutines, started when work arrives and ended when none is
// left, so that an idle router runs none. A session is in the queue at most once (its
// saver says whether it is queued or being written), so the queue is bounded by the
// sessions. Its Counter counts the queued and written sessions: Router.Close waits for
// none.
type recordWriter struct {
	ctxtime.Counter

	mu      sync.Mutex
	queue   []*Session // queue[head:] waits, oldest first
	head    int
	running int // writer goroutines
}

// push queues s, whose saver has just begun, and starts a writer if fewer than
// recordWriters run.
func (w *recordWriter) push(r *Router, s *Session) {
	w.Add()
	w.mu.Lock()
	w.queue = append(w.queue, s)
	start := w.running < recordWriters
	if start {
		w.running++
	}
	w.mu.Unlock()
	if start {
		go w.run(r)
	}
}

// next takes the oldest queued session; nil when none is left, and the writer that
// asked then ends.
func (w *recordWriter) next() *Session {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head == len(w.queue) {
		w.running--
		// The queue's storage grew with the backlog; an empty queue gives it back.
		w.queue, w.head = nil, 0
		return nil
	}
	s := w.queue[w.head]
	w.queue[w.head] = nil
	w.head++
	return s
}

// requeue puts s back at the end of the queue: it changed while it was written. A
// session changing again and again thus waits its turn behind the others.
func (w *recordWriter) requeue(s *Session) {
	w.mu.Lock()
	w.queue = append(w.queue, s)
	w.mu.Unlock()
}

// run is one writer: it writes the queued sessions' records until none is left.
func (w *recordWriter) run(r *Router) {
	for s := w.next(); s != nil; s = w.next() {
		s.saves.take()
		r.save(s)
		if s.saves.again() {
			w.requeue(s)
			continue
		}
		w.Done()
	}
}
