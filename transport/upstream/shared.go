package upstream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fastjson"

	"github.com/mcprouter/mcprouter/codec"
)

// handshake keeps copies of the last initialize request and initialized notification a
// Conn carried, so that the Conn can establish a new session by itself when the backend
// loses the old one. The copies are small (an initialize is a few hundred bytes) and
// written once per session, so a mutex is fine.
type handshake struct {
	mu          sync.Mutex
	init        []byte
	initialized []byte
	version     string
	seq         uint64
}

// observe records msg if it is one of the two handshake messages.
func (h *handshake) observe(msg []byte, m *codec.Message) {
	switch {
	case m.Kind == codec.KindRequest && isMethod(m, "initialize"):
		h.mu.Lock()
		h.init = append(h.init[:0], msg...)
		h.initialized = h.initialized[:0] // a new handshake starts
		h.mu.Unlock()
	case m.Kind == codec.KindNotification && isMethod(m, "notifications/initialized"):
		h.mu.Lock()
		h.initialized = append(h.initialized[:0], msg...)
		h.mu.Unlock()
	}
}

// scan scans msg, an outgoing message, into m and records it when it is one of the
// handshake messages. It returns m, or nil when msg does not scan (a batch, or
// something the backend will judge): such a message is sent as it is.
func (h *handshake) scan(msg []byte, m *codec.Message) *codec.Message {
	if codec.Scan(msg, m) != nil {
		return nil
	}
	h.observe(msg, m)
	return m
}

func (h *handshake) setVersion(v string) {
	h.mu.Lock()
	h.version = v
	h.mu.Unlock()
}

// forget drops the recorded handshake, so that the next session is initialized by the
// router rather than replayed.
func (h *handshake) forget() {
	h.mu.Lock()
	h.init = h.init[:0]
	h.initialized = h.initialized[:0]
	h.mu.Unlock()
}

// renewal is what a Conn sends to establish a new session: the recorded initialize with
// its id replaced by a private one (so that its reply can be told apart from anything
// the router awaits), and the recorded initialized notification (nil if the router had not
// sent it yet: it will).
type renewal struct {
	init        []byte
	id          []byte // the private id token, JSON-quoted
	initialized []byte
	version     string
}

// renewal builds the next renewal; ok is false when no initialize was recorded.
func (h *handshake) renewal() (r renewal, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.init) == 0 {
		return r, false
	}
	h.seq++
	r.id = strconv.AppendUint([]byte(`"mcprouter-renew-`), h.seq, 10)
	r.id = append(r.id, '"')
	var m codec.Message
	if err := codec.Scan(h.init, &m); err != nil {
		return r, false
	}
	r.init = codec.AppendReplaceID(nil, h.init, &m, r.id)
	if len(h.initialized) > 0 {
		r.initialized = append([]byte(nil), h.initialized...)
	}
	r.version = h.version
	return r, true
}

// check validates the backend's reply to a renewal initialize: it must be a result, and
// when a revision had been negotiated the backend must choose the same one again, since
// the router and its clients already speak it.
func (r *renewal) check(reply []byte) error {
	var m codec.Message
	if err := codec.Scan(reply, &m); err != nil {
		return fmt.Errorf("%w: renewal reply does not parse: %w", ErrProtocol, err)
	}
	if m.Kind != codec.KindResult {
		return fmt.Errorf("%w: backend refused the renewal initialize: %s", ErrProtocol, excerpt(m.Error))
	}
	if r.version != "" {
		if v := fastjson.GetString(m.Result, "protocolVersion"); v != r.version {
			return fmt.Errorf("%w: renewed session negotiated revision %q, not %q", ErrProtocol, v, r.version)
		}
	}
	return nil
}

// waiters routes the replies to a Conn's own requests (renewals) away from the Sink.
// The count lets the delivery path skip the scan when nothing is awaited, which is
// nearly always.
type waiters struct {
	n  atomic.Int32
	mu sync.Mutex
	m  map[string]chan []byte
}

// add registers id (a raw JSON token) and returns the channel its reply will come on.
func (w *waiters) add(id []byte) <-chan []byte {
	ch := make(chan []byte, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string]chan []byte)
	}
	w.m[string(id)] = ch
	w.n.Add(1)
	w.mu.Unlock()
	return ch
}

func (w *waiters) remove(id []byte) {
	w.mu.Lock()
	if _, ok := w.m[string(id)]; ok {
		delete(w.m, string(id))
		w.n.Add(-1)
	}
	w.mu.Unlock()
}

// intercept takes msg if it is the reply to an awaited id, handing a copy to the waiter.
func (w *waiters) intercept(msg []byte) bool {
	if w.n.Load() == 0 {
		return false
	}
	var m codec.Message
	if codec.Scan(msg, &m) != nil || (m.Kind != codec.KindResult && m.Kind != codec.KindError) {
		return false
	}
	w.mu.Lock()
	ch, ok := w.m[string(m.ID)]
	if ok {
		delete(w.m, string(m.ID))
		w.n.Add(-1)
	}
	w.mu.Unlock()
	if ok {
		ch <- append([]byte(nil), msg...) // capacity 1 and removed from the map: never blocks
	}
	return ok
}

// deliver hands msg to the Conn's waiters or, if none wants it, to the Sink.
// deliverRelated delivers a message that came on the reply stream of the request reqID:
// with that id to a RelatedSink, as a plain message otherwise.
func deliverRelated(s Sink, w *waiters, reqID, msg []byte) {
	if w.intercept(msg) {
		return
	}
	if rs, ok := s.(RelatedSink); ok {
		rs.Related(reqID, msg)
		return
	}
	s.Message(msg)
}

func deliver(s Sink, w *waiters, msg []byte) {
	if !w.intercept(msg) {
		s.Message(msg)
	}
}

// backoff is capped exponential backoff with jitter, so that many instances restarting
// at once do not retry in lockstep.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

// next returns the delay before the next attempt: in [d/2, d] where d doubles from min
// up to max.
func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur < b.max:
		b.cur *= 2
	}
	if b.cur > b.max {
		b.cur = b.max
	}
	half := b.cur / 2
	if half <= 0 {
		return b.cur
	}
	return half + rand.N(half+1)
}

func (b *backoff) reset() { b.cur = 0 }

// excerpt bounds b for an error message.
func excerpt(b []byte) string {
	if len(b) > maxExcerpt {
		return string(b[:maxExcerpt]) + "..."
	}
	return string(b)
}

// maxPooledBuf is the largest buffer kept in a pool; larger ones are left to the GC so
// that one huge message does not pin memory.
const maxPooledBuf = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// lifecycle is the part of every Conn that says whether it is alive: Done, Err and
// the context that stops its goroutines.
type lifecycle struct {
	ctx    context.Context // canceled when the Conn dies
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	err    error
}

func (l *lifecycle) init() {
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.done = make(chan struct{})
}

// kill marks the Conn dead with err; it reports whether this call did it.
func (l *lifecycle) kill(err error) bool {
	did := false
	l.once.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		l.cancel()
		close(l.done)
		did = true
	})
	return did
}

// Done implements Conn.
func (l *lifecycle) Done() <-chan struct{} { return l.done }

// Err implements Conn.
func (l *lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// closer makes Close idempotent: the first call does the work, the later ones return
// at once. closeMu also guards whatever a Conn must not start once closed (the GET
// stream of HTTPConn).
type closer struct {
	closeMu sync.Mutex
	closed  bool
}

// beginClose marks the Conn closed; it reports false when an earlier Close did.
func (c *closer) beginClose() bool {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	return true
}

// deadErr is what operations on a dead connection or instance return: err, the error
// that ended it, or ErrClosed when it was closed without one.
func deadErr(err error) error {
	if err != nil {
		return err
	}
	return ErrClosed
}
