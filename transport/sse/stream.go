package sse

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/transport/budget"
)

// Errors of Stream and Consumer. They are sentinels returned unwrapped, so both == and
// errors.Is work.
var (
	// ErrSlowConsumer: the consumer fell more than StreamConfig.QueueBytes behind, or
	// the ring had to evict events it had not taken yet. Its events stay in the ring
	// for a resumption.
	ErrSlowConsumer = errors.New("sse: consumer too slow, cut off")
	// ErrDetached: a newer Attach took the stream over, or Consumer.Close was called.
	ErrDetached = errors.New("sse: consumer detached")
	// ErrGone: the events after the requested position are no longer in the ring, or
	// the position was never issued by this stream.
	ErrGone = errors.New("sse: events to resume from are gone")
	// ErrClosed: the stream is closed (Publish), or closed with nothing left to send
	// (Attach).
	ErrClosed = errors.New("sse: stream closed")
	// ErrPumping: Pump was called twice on one Consumer.
	ErrPumping = errors.New("sse: consumer already pumped")
	// ErrOverBudget (budget.ErrOverBudget): Publish could not keep the event within the
	// session's memory share, even after evicting the session's oldest retained events.
	ErrOverBudget = budget.ErrOverBudget
)

// Defaults of StreamConfig and PumpOptions.
const (
	DefaultRingBytes  = 1 << 20
	DefaultRingEvents = 1024
	DefaultQueueBytes = 512 << 10
	DefaultKeepAlive  = 15 * time.Second
	DefaultMaxBatch   = 64 << 10
)

// StreamConfig bounds a Stream. The zero value means the defaults.
type StreamConfig struct {
	// RingBytes bounds the memory (buffer capacity, so a little more than the encoded
	// bytes) of the recent events a stream keeps for resumption. The newest event is
	// always kept, however large, unless it does not fit the session's budget share
	// (Account). Default 1 MiB.
	RingBytes int
	// RingEvents bounds the number of events kept. Default 1024.
	RingEvents int
	// QueueBytes is how far (in bytes of new events) a consumer may fall behind before
	// it is cut off. It should not exceed RingBytes: a consumer whose unsent events are
	// evicted is cut off anyway. Default 512 KiB (or RingBytes if that is smaller);
	// at most 1 GiB (maxQueueBytes).
	QueueBytes int
	// Stats receives the stream's counters; streams typically share one. Nil gives the
	// stream a private Stats (see Stream.Stats).
	Stats *Stats
	// Account, when set, is the session's share of the memory budget: every event kept
	// in the ring is reserved from it, the newest included (then an event larger than
	// what the session may hold is refused with budget.ErrOverBudget instead of being
	// kept whatever its size). Nil accounts nothing and keeps the newest event always.
	Account *budget.Account
}

// Validate reports a configuration that cannot be what was meant.
func (c StreamConfig) Validate() error {
	switch {
	case c.RingBytes < 0 || c.RingEvents < 0 || c.QueueBytes < 0:
		return errors.New("sse: negative stream bound")
	case c.QueueBytes > 0 && c.RingBytes > 0 && c.QueueBytes > c.RingBytes:
		return errors.New("sse: QueueBytes exceeds RingBytes: slow consumers would lose events instead of being cut off")
	}
	return nil
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.RingBytes <= 0 {
		c.RingBytes = DefaultRingBytes
	}
	if c.RingEvents <= 0 {
		c.RingEvents = DefaultRingEvents
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = min(DefaultQueueBytes, c.RingBytes)
	}
	c.QueueBytes = min(c.QueueBytes, maxQueueBytes)
	if c.Stats == nil {
		c.Stats = new(Stats)
	}
	return c
}

// Stats counts what streams do. All fields are updated atomically and may be read at
// any time; Snapshot reads them all.
type Stats struct {
	Events     atomic.Uint64 // events published
	Bytes      atomic.Uint64 // encoded bytes of events published
	Written    atomic.Uint64 // bytes written and flushed to consumers (replays and control blocks included)
	CutOffs    atomic.Uint64 // consumers cut off for being too slow
	Evictions  atomic.Uint64 // events evicted from rings
	Resumes    atomic.Uint64 // consumers attached after an explicit event id (Last-Event-ID)
	Gone       atomic.Uint64 // resumptions refused because the events were evicted or unknown
	KeepAlives atomic.Uint64 // keep-alive comments written
	// Queued is the bytes of events published to attached consumers and not yet taken
	// by their pumps, summed over the streams sharing these Stats: the backlog a slow
	// client builds before it is cut off at QueueBytes. A gauge, not a counter.
	Queued atomic.Int64
}

// StatsSnapshot is a plain copy of Stats.
type StatsSnapshot struct {
	Events, Bytes, Written, CutOffs, Evictions, Resumes, Gone, KeepAlives uint64
}

// Snapshot returns the current values.
func (s *Stats) Snapshot() StatsSnapshot {
	return StatsSnapshot{
		Events:     s.Events.Load(),
		Bytes:      s.Bytes.Load(),
		Written:    s.Written.Load(),
		CutOffs:    s.CutOffs.Load(),
		Evictions:  s.Evictions.Load(),
		Resumes:    s.Resumes.Load(),
		Gone:       s.Gone.Load(),
		KeepAlives: s.KeepAlives.Load(),
	}
}

// slot is one event kept in a ring: its body (event and data lines; the id line and the
// blank line that end it are written when it is sent, from its position in the ring).
type slot struct {
	b *[]byte
	// shared: a Shared's body, which other streams' rings may hold too. It is never
	// given back to the pool: the collector frees it once no ring holds it.
	shared bool
}

// ring is a circular buffer of event bodies, growing on demand up to the configured
// count so that the many short streams (one per POST) stay small.
type ring struct {
	slots []slot
	head  int // index of the oldest event
	n     int
	bytes int // capacity of the bodies held: the memory the ring pins
}

func (r *ring) at(i int) slot {
	j := r.head + i
	if j >= len(r.slots) {
		j -= len(r.slots)
	}
	return r.slots[j]
}

func (r *ring) push(e slot, limit int) {
	if r.n == len(r.slots) {
		// From one slot: most streams are a POST's, of one event, or a held one's,
		// of a few.
		size := min(max(1, 2*len(r.slots)), limit)
		slots := make([]slot, size)
		for i := 0; i < r.n; i++ {
			j := r.head + i
			if j >= len(r.slots) {
				j -= len(r.slots)
			}
			slots[i] = r.slots[j]
		}
		r.slots, r.head = slots, 0
	}
	j := r.head + r.n
	if j >= len(r.slots) {
		j -= len(r.slots)
	}
	r.slots[j] = e
	r.n++
	r.bytes += cap(*e.b)
}

func (r *ring) pop(acct *budget.Account) slot {
	e := r.slots[r.head]
	acct.Release(int64(cap(*e.b)))
	r.slots[r.head] = slot{}
	if r.head++; r.head == len(r.slots) {
		r.head = 0
	}
	r.n--
	r.bytes -= cap(*e.b)
	return e
}

// Stream is one SSE stream of one session: the standalone GET stream or the reply
// stream of one POST, identified by a uint32 within the session. Events are encoded
// once, at Publish (or once for many streams, Shared), and kept in a bounded ring; each
// is sent with an id "<stream>-<seq>", written from its position in the ring, so that a
// client that lost its connection can resume with Last-Event-ID: nothing lost, nothing
// duplicated, and never another stream's events (ids name their stream).
//
// At most one Consumer is attached at a time; it writes the events to one HTTP
// response with Pump. Publish never blocks and never waits for the consumer: a consumer
// that falls too far behind is cut off (its pump returns ErrSlowConsumer) and its
// events stay in the ring for a resumption.
//
// All methods are safe for concurrent use. The lock guards memory only: no I/O and no
// callback runs under it.
type Stream struct {
	// Fields are ordered so that the struct fits a smaller size class: every session
	// holds one stream at least for its whole life.
	// The bounds are the process's streams' one configuration, shared (sharedConfig):
	// only the account is the session's own. With the counts below, a stream takes
	// the 128-byte size class (it took 160).
	id         uint32
	closeRetry int32         // retry hint of Close, ms; guarded by mu
	cfg        *StreamConfig // its Account unused: acct
	acct       *budget.Account

	mu      sync.Mutex
	ring    ring
	last    uint64 // seq of the newest event, 0 if none
	evicted uint64 // seq of the newest evicted event: the ring holds evicted+1..last
	written uint64 // highest seq flushed to some consumer
	cons    *Consumer
	// pending is the bytes of new events (published after its attach) cons has not
	// taken: QueueBytes and an event at most (maxQueueBytes bounds QueueBytes).
	pending int32
	closed  bool
	// discardWritten: each event is given back once written (DiscardWritten).
	discardWritten bool
	writing        uint64 // seq of the event a driven consumer is writing from its ring frame (0: none)
}

// maxQueueBytes bounds QueueBytes, so that a consumer's backlog (QueueBytes and the
// event that passes it) counts in 32 bits.
const maxQueueBytes = 1 << 30

// lastConfig is the configuration the last stream was made with, shared by the streams
// made with the same one after it: a process makes its streams with one (its router's),
// and every session holds a stream for its whole life.
var lastConfig atomic.Pointer[StreamConfig]

// sharedConfig is cfg with its defaults, without its Account, shared with the streams
// made before with the same (a new one otherwise).
func sharedConfig(cfg StreamConfig) *StreamConfig {
	cfg.Account = nil
	cfg = cfg.withDefaults()
	if p := lastConfig.Load(); p != nil && *p == cfg {
		return p
	}
	p := new(StreamConfig) // allocated here only: cfg stays on the stack
	*p = cfg
	lastConfig.Store(p)
	return p
}

// frameSlack is room reserved in a body buffer beyond the data: the field names and
// line ends of a typical event.
const frameSlack = 16

// NewStream returns an empty stream with the given id. cfg is validated by its owner
// (StreamConfig.Validate); here, zero fields take their defaults and a QueueBytes above
// RingBytes is used as given.
func NewStream(id uint32, cfg StreamConfig) *Stream {
	return &Stream{id: id, cfg: sharedConfig(cfg), acct: cfg.Account}
}

// NewStreamAfter returns an empty stream whose first event will have sequence number
// seq+1: a stream carried on from another process (a session that moved to this router
// instance), whose earlier events the client may already have seen.
func NewStreamAfter(id uint32, cfg StreamConfig, seq uint64) *Stream {
	s := NewStream(id, cfg)
	s.last, s.evicted, s.written = seq, seq, seq
	return s
}

// ID returns the stream's id within its session.
func (s *Stream) ID() uint32 { return s.id }

// Stats returns the counters the stream updates (shared if StreamConfig.Stats was set).
func (s *Stream) Stats() *Stats { return s.cfg.Stats }

// Publish appends an event to the stream and wakes its consumer. The data is copied;
// the caller keeps ownership of data. Publish never blocks on the consumer: if the
// consumer is already more than QueueBytes behind, it is cut off first (counted in
// Stats.CutOffs); the event is kept in the ring either way. After Close it returns
// ErrClosed.
func (s *Stream) Publish(event string, data []byte) (EventID, error) {
	// A pooled buffer even for a small event, though a held stream then keeps a
	// mostly empty one for its acknowledgement: a buffer of the body's own size would
	// be an allocation for every event, where a full ring's eviction hands its buffer
	// back for the next (TestPublishAllocs: publishing allocates nothing).
	bp := getBuf(len(event) + len(data) + frameSlack)
	*bp = appendBody(*bp, event, data) // the copy happens here, outside the lock
	return s.publish(slot{b: bp})
}

// PublishShared is Publish of an event encoded once for many streams: the ring keeps a
// reference to e, not a copy, and the event's id is written when it is sent. The
// session's budget is charged e's whole size, as it would be for a copy: what the
// stream would pin if it were the last to hold e (the memory actually held is less,
// never more).
func (s *Stream) PublishShared(e *Shared) (EventID, error) {
	return s.publish(slot{b: &e.body, shared: true})
}

func (s *Stream) publish(e slot) (EventID, error) {
	f := *e.b
	// The budget is reserved before the lock: making room may evict other streams of
	// the session, whose locks must not nest in this one.
	acct := s.acct
	reserved := int64(cap(f))
	overBudget := acct.Reserve(reserved) != nil

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.free(e)
		if !overBudget {
			acct.Release(reserved)
		}
		return EventID{}, ErrClosed
	}
	id := EventID{Stream: s.id, Seq: s.last + 1}
	size := len(f) + id.endLen() // as sent

	var cut *Consumer
	if s.cons != nil && int(s.pending) > s.cfg.QueueBytes {
		cut = s.cutLocked()
	}
	evictions := 0
	evict := func() {
		s.evicted++
		s.release(s.ring.pop(acct), s.evicted)
		evictions++
		if s.cons != nil && s.evicted >= s.cons.next {
			cut = s.cutLocked() // it would have missed that event
		}
	}
	// The session is at its share: this stream's own oldest events go first, unless the
	// event is larger than the whole share (evicting them would lose them for nothing,
	// and cut off a consumer that had not read them yet).
	for overBudget && s.ring.n > 0 && reserved <= acct.Share() {
		evict()
		overBudget = !acct.TryReserve(reserved)
	}
	if overBudget {
		s.mu.Unlock()
		s.free(e)
		s.notifyCut(cut, evictions)
		return EventID{}, ErrOverBudget
	}
	for s.ring.n > 0 && (s.ring.n >= s.cfg.RingEvents || s.ring.bytes+cap(f) > s.cfg.RingBytes) {
		evict()
	}
	s.ring.push(e, s.cfg.RingEvents)
	s.last = id.Seq
	var inline *Consumer
	if c := s.cons; c != nil {
		s.addPendingLocked(size)
		if c.driven && !c.busy && c.state == consActive {
			// A driven consumer with nothing else to write: this goroutine writes the
			// event, from its ring body, which eviction leaves alone meanwhile.
			c.busy, s.writing, inline = true, id.Seq, c
		} else {
			c.kickLocked()
		}
	}
	s.mu.Unlock()

	s.notifyCut(cut, evictions)
	s.cfg.Stats.Events.Add(1)
	s.cfg.Stats.Bytes.Add(uint64(size))
	if inline != nil {
		inline.publishInline(f, id)
	}
	return id, nil
}

// free gives the body of an event that was not kept back to the pool, unless it is
// shared.
func (s *Stream) free(e slot) {
	if !e.shared {
		putBuf(e.b)
	}
}

// release gives the body of an evicted event, seq, back to the pool, unless it is shared
// or a driven consumer is writing from it (then the collector frees it). Called with
// s.mu held.
func (s *Stream) release(e slot, seq uint64) {
	if seq != s.writing {
		s.free(e)
	}
}

// notifyCut counts what Publish evicted and interrupts the pump of the consumer it cut
// off, if any. Called without the lock.
func (s *Stream) notifyCut(cut *Consumer, evictions int) {
	if cut != nil {
		s.cfg.Stats.CutOffs.Add(1)
		cut.interruptPump()
	}
	if evictions > 0 {
		s.cfg.Stats.Evictions.Add(uint64(evictions))
	}
}

// Drop evicts every event of a closed stream that no consumer is reading, giving their
// memory (and budget) back, and returns the bytes freed: how a session forgets a
// finished reply stream (the oldest first when it needs room in its share). A client
// resuming such a stream afterwards is told its events are gone.
func (s *Stream) Drop() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed || s.cons != nil {
		return 0
	}
	return s.evictLocked(s.last, 1<<62)
}

// Trim evicts the oldest events already flushed to a client until at least need bytes
// are freed, and returns the bytes freed: room for a session's newer events, taken from
// what its client has seen (a resumption from before them is told they are gone).
func (s *Stream) Trim(need int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evictLocked(s.written, need)
}

// Reclaim implements budget.Reclaimer for a session whose one stream holds its
// retained data: Trim.
func (s *Stream) Reclaim(need int64) bool { return s.Trim(int(min(need, math.MaxInt))) > 0 }

// evictLocked evicts the oldest events up to seq upTo until need bytes are freed; it
// never evicts what the attached consumer has not taken. Called with s.mu held.
func (s *Stream) evictLocked(upTo uint64, need int) int {
	freed, n := s.popLocked(upTo, need)
	if n > 0 {
		s.cfg.Stats.Evictions.Add(uint64(n))
	}
	return freed
}

// popLocked is evictLocked without counting the evictions: it returns the bytes freed
// and the events given back. Called with s.mu held.
func (s *Stream) popLocked(upTo uint64, need int) (freed, n int) {
	if s.cons != nil {
		upTo = min(upTo, s.cons.next-1)
	}
	for s.ring.n > 0 && s.evicted < upTo && freed < need {
		e := s.ring.pop(s.acct)
		freed += cap(*e.b)
		s.evicted++
		s.release(e, s.evicted)
		n++
	}
	return freed, n
}

// DiscardWritten makes s give each event back (its buffer to the pool, its bytes to
// the account) once a consumer has written it whole, where events are otherwise kept
// in the ring for a consumer that resumes the stream: for a stream nothing resumes (a
// stateless request's), which would otherwise hold its last events, a pooled buffer
// each, for its whole life. Call it before publishing.
func (s *Stream) DiscardWritten() {
	s.mu.Lock()
	s.discardWritten = true
	s.mu.Unlock()
}

// wroteLocked records that the events up to seq were written whole to a consumer, and
// gives them back if s discards written events. Called with s.mu held.
func (s *Stream) wroteLocked(seq uint64) {
	if seq <= s.written {
		return
	}
	s.written = seq
	if s.discardWritten {
		s.popLocked(seq, math.MaxInt)
	}
}

// cutLocked detaches the current consumer as too slow and returns it.
func (s *Stream) cutLocked() *Consumer {
	c := s.cons
	c.state = consCut
	s.cons = nil
	s.addPendingLocked(-int(s.pending))
	c.kickLocked()
	return c
}

// addPendingLocked moves the attached consumer's backlog by delta bytes, and the shared
// Stats.Queued gauge with it. Called with s.mu held.
func (s *Stream) addPendingLocked(delta int) {
	if delta == 0 {
		return
	}
	s.pending += int32(delta)
	s.cfg.Stats.Queued.Add(int64(delta))
}

// notify wakes a pump without blocking; one pending wake-up is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Attach attaches a new consumer, detaching the current one (its pump returns
// ErrDetached). after is the sequence number of the last event the client has: the
// consumer sends the events after it, exactly (as Resume does). after == 0 is different:
// it means "no Last-Event-ID", and the consumer starts at the first event not yet
// flushed to any consumer (events flushed to a connection that then broke may be sent
// again: at-least-once), or at the oldest event kept if later ones were evicted unsent.
// A client resuming with a Last-Event-ID whose Seq is 0 (the priming id of a fresh
// stream) must go through Resume to get exactly-once: use Resume for every Last-Event-ID.
//
// Errors: ErrGone if the events after `after` were evicted or never existed (never for
// after == 0); ErrClosed if the stream is closed and there is nothing left to send.
func (s *Stream) Attach(after uint64) (*Consumer, error) {
	return s.attach(after, after != 0)
}

// Resume attaches a new consumer that sends exactly the events after sequence number
// after (the Seq of the client's Last-Event-ID), detaching the current consumer.
// Errors as for Attach.
func (s *Stream) Resume(after uint64) (*Consumer, error) {
	return s.attach(after, true)
}

func (s *Stream) attach(after uint64, exact bool) (*Consumer, error) {
	s.mu.Lock()
	if !exact {
		after = max(s.written, s.evicted)
	} else if after < s.evicted || after > s.last {
		s.mu.Unlock()
		s.cfg.Stats.Gone.Add(1)
		return nil, ErrGone
	}
	if s.closed && after >= s.last {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	c := &Consumer{s: s, start: after, next: after + 1, replayEnd: s.last}
	old := s.cons
	if old != nil {
		old.state = consDetached
		old.kickLocked()
	}
	s.cons = c
	s.addPendingLocked(-int(s.pending))
	s.mu.Unlock()

	if exact {
		s.cfg.Stats.Resumes.Add(1)
	}
	if old != nil {
		old.interruptPump()
	}
	return c, nil
}

// Attached reports whether a consumer is attached.
func (s *Stream) Attached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cons != nil
}

// Last returns the id of the newest event published (Seq 0 if none).
func (s *Stream) Last() EventID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return EventID{Stream: s.id, Seq: s.last}
}

// Close ends the stream: Publish fails from now on, and the attached consumer's pump
// writes every event published before Close, then a retry hint of retryMs milliseconds
// if retryMs > 0, then returns nil. This is how a POST reply stream ends after its final
// response. The ring stays, so a client that lost its connection can still resume and
// get what it missed. Close is idempotent; the first retryMs wins.
func (s *Stream) Close(retryMs int) {
	s.mu.Lock()
	if !s.closed {
		s.closed, s.closeRetry = true, int32(min(retryMs, math.MaxInt32))
	}
	if c := s.cons; c != nil {
		c.kickLocked()
	}
	s.mu.Unlock()
}

// Closed reports whether Close was called.
func (s *Stream) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Consumer states.
type consState uint8

const (
	consActive   consState = iota
	consCut                // cut off as too slow
	consDetached           // replaced by a newer Attach, or closed by its owner
)

// Consumer is one attachment to a Stream: the events after its starting position,
// written to one client by Pump.
type Consumer struct {
	s       *Stream
	start   uint64        // the position it starts after: the id of its priming event
	wake    chan struct{} // a pump's wake-ups, made by Pump (a driven consumer has none); guarded by s.mu
	pumping atomic.Bool
	// state, busy and driven are guarded by s.mu, like the fields below; they sit
	// beside pumping so that a Consumer, its driver included, fits the 128-byte size
	// class.
	state consState
	busy  bool // a driven consumer's writer holds its sink
	// sinkGone: a driven consumer's sink was interrupted or ended, so that it is
	// interrupted at most once and never after End; guarded by imu.
	sinkGone bool
	driven   bool // Drive drives it (drv); guarded by s.mu

	// imu orders the pump's Interrupt with the end of Pump: the function acts on what
	// Pump's caller owns (its connection), which the caller may give back as soon as
	// Pump returns (fasthttp recycles a hijacked connection when its handler returns).
	imu       sync.Mutex
	interrupt func() // the pump's Interrupt; nil before Pump, once called, and after Pump
	isink     Sink   // a driven consumer's sink (Drive): its writer's, and its Interrupt's until sinkGone; nil before Drive

	// guarded by s.mu
	next      uint64 // next seq to take
	replayEnd uint64 // events up to this one existed at attach: a replay, not a queue
	drv       driver // a driven consumer's state
}

// Start returns the id of the position the consumer starts after: the id of its priming
// event, and what its client may send as Last-Event-ID before receiving anything else.
func (c *Consumer) Start() EventID { return EventID{Stream: c.s.id, Seq: c.start} }

// Close detaches the consumer: its pump, if running, returns ErrDetached once it is done
// with its current write. Use it when a consumer is attached but will never be pumped.
func (c *Consumer) Close() {
	s := c.s
	s.mu.Lock()
	if c.state == consActive {
		c.state = consDetached
	}
	if s.cons == c {
		s.cons = nil
		s.addPendingLocked(-int(s.pending))
	}
	c.kickLocked()
	s.mu.Unlock()
}

// PumpOptions say how a pump writes. The zero value is usable.
type PumpOptions struct {
	// Prime writes the MCP priming event first (revision 2025-11-25 on): the
	// consumer's start id and empty data, so the client can resume even if the
	// connection breaks before the first event. RetryMs, if set, goes in the same block.
	Prime bool
	// RetryMs > 0 writes a retry hint at the start (with the priming event, or alone),
	// and again when the pump ends because of Done or MaxDuration, so that the client
	// waits that long before it reconnects.
	RetryMs int
	// KeepAlive is the idle time after which a keep-alive comment is written. Zero means
	// DefaultKeepAlive, negative disables them.
	KeepAlive time.Duration
	// Done ends the pump (server shutdown, request cancelled): it writes the retry hint
	// if RetryMs > 0 and returns nil. Events not yet written stay in the ring.
	Done <-chan struct{}
	// MaxDuration > 0 ends the pump like Done after that long: the 2025-11-25 polling
	// mode, where the server closes the connection but not the stream.
	MaxDuration time.Duration
	// MaxBatch bounds the bytes copied and written per flush (one event may exceed it).
	// Default DefaultMaxBatch.
	MaxBatch int
	// Interrupt, if set, is called at most once, from another goroutine and without
	// the stream's locks held, when the consumer is cut off or replaced while its pump
	// may be blocked in a write: it should make that write fail (e.g. set a past write
	// deadline on the connection). It is never called once Pump has returned (Pump's
	// return waits for a call in progress), so it may act on what the caller releases
	// after Pump. It must not block. Without it a blocked pump returns only when its
	// write does.
	Interrupt func()
}

// idleWait bounds each wait of a pump whose keep-alives are disabled: it wakes up, finds
// nothing to do and waits again. No wait is unbounded.
const idleWait = time.Minute

// keepAliveText is the text of keep-alive comments.
const keepAliveText = "keep-alive"

// pumpBuf is a pump's batch buffer, borrowed from the pool while the pump has something
// to write and given back before it waits, so that the many idle streams of a busy
// router hold no batch memory.
type pumpBuf struct {
	bp   *[]byte
	size int
}

// get returns the buffer, empty, borrowing one if needed.
func (p *pumpBuf) get() []byte {
	if p.bp == nil {
		p.bp = getBuf(p.size)
	}
	return (*p.bp)[:0]
}

// put gives the buffer back. b is the last slice made from it, which appends may have
// moved to a larger array: that one goes back instead if it is still poolable.
func (p *pumpBuf) put(b []byte) {
	if p.bp == nil {
		return
	}
	if cap(b) > cap(*p.bp) && cap(b) <= maxPooled {
		*p.bp = b[:0]
	}
	putBuf(p.bp)
	p.bp = nil
}

// Writer is where a pump writes: each batch is written, then flushed. A *bufio.Writer
// is one (fasthttp's response body stream); a connection that frames and sends every
// write at once, with a Flush that does nothing, is another, and holds no buffer while
// the stream is idle.
type Writer interface {
	Write(p []byte) (int, error)
	Flush() error
}

// appendHead appends what a stream starts with under opts: the priming event (the
// consumer's start id and empty data, with the retry hint) when opts.Prime, else the
// retry hint alone when opts.RetryMs is set, else nothing.
func (c *Consumer) appendHead(dst []byte, opts PumpOptions) []byte {
	switch {
	case opts.Prime:
		dst = append(dst, "id: "...)
		dst = c.Start().Append(dst)
		dst = append(dst, '\n')
		if opts.RetryMs > 0 {
			dst = appendRetryLine(dst, opts.RetryMs)
		}
		return append(dst, "data:\n\n"...)
	case opts.RetryMs > 0:
		return AppendRetry(dst, opts.RetryMs)
	}
	return dst
}

// Pump writes the consumer's events to w, flushing after each batch, until the stream
// is closed and drained (nil), Done or MaxDuration (nil), the consumer is cut off
// (ErrSlowConsumer) or detached (ErrDetached), or a write or flush fails (that error).
// It writes the priming event and retry hint first when opts ask, and a keep-alive
// comment after each KeepAlive of idleness. Every wait is bounded by a timer.
//
// Pump runs on the caller's goroutine and may be called once per Consumer. When it
// returns, the consumer is detached; events it did not write stay in the ring.
func (c *Consumer) Pump(w Writer, opts PumpOptions) error {
	if !c.pumping.CompareAndSwap(false, true) {
		return ErrPumping
	}
	s := c.s
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	wait := opts.KeepAlive
	if wait == 0 {
		wait = DefaultKeepAlive
	} else if wait < 0 {
		wait = idleWait
	}
	c.setInterrupt(opts.Interrupt)
	s.mu.Lock()
	c.wake = make(chan struct{}, 1)
	wake := c.wake
	s.mu.Unlock()

	pb := pumpBuf{size: min(opts.MaxBatch, maxPooled)}
	var buf []byte
	var flushed uint64 // highest seq flushed, reported to the stream at each take
	defer func() {
		pb.put(buf)
		c.finish(flushed)
		c.setInterrupt(nil) // after this, an interrupt is a no-op
	}()

	if opts.Prime || opts.RetryMs > 0 {
		buf = c.appendHead(pb.get(), opts)
		if err := s.write(w, buf, nil); err != nil {
			return c.cause(err)
		}
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	var deadline <-chan time.Time
	if opts.MaxDuration > 0 {
		dt := time.NewTimer(opts.MaxDuration)
		defer dt.Stop()
		deadline = dt.C
	}
	for {
		var (
			big  []byte
			last uint64
			end  bool
			stop error
		)
		buf, big, last, end, stop = s.take(c, pb.get(), opts.MaxBatch, flushed)
		if stop != nil {
			return stop
		}
		if len(buf) > 0 || len(big) > 0 {
			if err := s.write(w, buf, big); err != nil {
				return c.cause(err)
			}
			flushed = last
			continue // more may have arrived meanwhile
		}
		if end {
			return c.cause(s.closing(w, buf))
		}
		pb.put(buf)
		buf = nil
		timer.Reset(wait)
		select {
		case <-wake:
		case <-opts.Done:
			return c.cause(s.ending(w, pb.get(), opts.RetryMs))
		case <-deadline:
			return c.cause(s.ending(w, pb.get(), opts.RetryMs))
		case <-timer.C:
			if opts.KeepAlive >= 0 {
				buf = AppendComment(pb.get(), keepAliveText)
				if err := s.write(w, buf, nil); err != nil {
					return c.cause(err)
				}
				s.cfg.Stats.KeepAlives.Add(1)
			}
		}
	}
}

// take moves the consumer's next events into dst under the lock: copies of their
// bodies, each followed by its id line, up to about max bytes (at least one event), or
// one large body by reference, which is safe because such bodies (unpooled, or shared)
// are never reused, its id line alone in dst. It records flushed as written, and
// reports the last seq taken, whether the stream is closed with nothing left to take,
// and why the consumer must stop, if it must.
func (s *Stream) take(c *Consumer, dst []byte, max int, flushed uint64) (batch, big []byte, last uint64, end bool, stop error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wroteLocked(flushed)
	switch c.state {
	case consCut:
		return dst, nil, 0, false, ErrSlowConsumer
	case consDetached:
		return dst, nil, 0, false, ErrDetached
	}
	taken := 0 // bytes of new (not replayed) events taken: one gauge update per batch
	for c.next <= s.last {
		f := *s.ring.at(int(c.next - s.evicted - 1)).b
		id := EventID{Stream: s.id, Seq: c.next}
		size := len(f) + id.endLen()
		if cap(f) > maxPooled {
			if len(dst) > 0 {
				break // on its own, next time
			}
			big = f
		} else {
			if len(dst) > 0 && len(dst)+size > max {
				break
			}
			dst = append(dst, f...)
		}
		dst = AppendEventEnd(dst, id)
		if c.next > c.replayEnd {
			taken += size
		}
		last = c.next
		c.next++
		if big != nil {
			break
		}
	}
	s.addPendingLocked(-taken)
	return dst, big, last, s.closed && c.next > s.last, nil
}

// write writes big then buf to w and flushes.
func (s *Stream) write(w Writer, buf, big []byte) error {
	if len(big) > 0 {
		if _, err := w.Write(big); err != nil {
			return err
		}
	}
	if len(buf) > 0 {
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	s.cfg.Stats.Written.Add(uint64(len(buf) + len(big)))
	return nil
}

// closing ends a pump whose stream was closed and drained: the close retry hint, if any.
func (s *Stream) closing(w Writer, buf []byte) error {
	s.mu.Lock()
	retry := int(s.closeRetry)
	s.mu.Unlock()
	if retry > 0 {
		return s.write(w, AppendRetry(buf, retry), nil)
	}
	return nil
}

// ending ends a pump on Done or MaxDuration: the retry hint, if any.
func (s *Stream) ending(w Writer, buf []byte, retry int) error {
	if retry > 0 {
		return s.write(w, AppendRetry(buf, retry), nil)
	}
	return nil
}

// cause turns a write error into the reason the write failed when the consumer was cut
// off or detached meanwhile: Interrupt makes a blocked write fail, and the caller must
// see ErrSlowConsumer, not the deadline error that Interrupt provoked.
func (c *Consumer) cause(err error) error {
	if err == nil {
		return nil
	}
	c.s.mu.Lock()
	st := c.state
	c.s.mu.Unlock()
	switch st {
	case consCut:
		return ErrSlowConsumer
	case consDetached:
		return ErrDetached
	}
	return err
}

// setInterrupt sets the function interruptPump calls; nil makes it a no-op. Setting it
// waits for an interrupt in progress to finish.
func (c *Consumer) setInterrupt(f func()) {
	c.imu.Lock()
	c.interrupt = f
	c.imu.Unlock()
}

// interruptPump calls the pump's Interrupt, at most once, and only while Pump runs:
// the lock makes Pump's return wait for an interrupt already in progress. Called
// without the stream's lock, once the consumer is cut off or detached.
func (c *Consumer) interruptPump() {
	c.imu.Lock()
	defer c.imu.Unlock()
	if f := c.interrupt; f != nil {
		c.interrupt = nil
		f()
	}
	if k := c.isink; k != nil && !c.sinkGone {
		c.sinkGone = true
		k.Interrupt()
	}
}

// finish detaches a consumer whose pump returned.
func (c *Consumer) finish(flushed uint64) {
	s := c.s
	s.mu.Lock()
	s.wroteLocked(flushed)
	if c.state == consActive {
		c.state = consDetached
	}
	if s.cons == c {
		s.cons = nil
		s.addPendingLocked(-int(s.pending))
	}
	s.mu.Unlock()
}
