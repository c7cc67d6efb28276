package policy

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
)

// Sync makes a Limiter's limits cluster-wide: every interval, each instance publishes
// on NATS how many requests it admitted per limit and key since its last publish, and
// every instance subtracts the others' counts from its own buckets (as debt the refill
// pays back). No coordinator, no round trip on the request path: a request is decided
// on the local bucket alone.
//
// # Error bound
//
// For one key of a limit with rate r and burst b, on N instances whose consumption
// reaches each other within d (the sync interval plus NATS delivery), the requests the
// cluster admits in any window of length T are at most
//
//	r·T + b + (N−1)·(b + r·d)
//
// where one bucket would admit r·T + b. Why: take the instance i that admitted last
// in the window, at t. Its bucket had a token then, and by t it had been debited with
// everything the others admitted up to t−d, so its own admissions plus the others' up
// to t−d are at most b + r·T. What the others admitted in their last d before t, not
// yet known to i, is at most b + r·d each (their own bucket bounds it). The excess is
// a constant, not a rate: over long windows the cluster admits r per unit of time, as
// one bucket would. With the defaults (100ms) and a limit of 100/s, burst 100, on three
// instances: at most 2·(100 + 10) = 220 requests beyond one bucket's 100 + 100·T, in
// any window. Lower the burst or the interval to tighten it. A bucket evicted while
// not idle (Limiter) and a lost NATS message loosen it; a lost instance's debt simply
// stops arriving.
//
// # Wire format
//
// One message per publish (split beyond 64 KiB), on the subject given to StartSync:
// a version byte (1), the sender's 8-byte id, then per limit: uvarint length and name,
// uvarint entry count, and per entry uvarint length and key, uvarint count. Instances
// that do not know a limit (another policy version) skip its entries.
type Sync struct {
	l        *Limiter
	nc       *nats.Conn
	subject  string
	id       [8]byte
	log      *slog.Logger
	sub      *nats.Subscription
	interval time.Duration

	flushMu sync.Mutex // serialises Flush (the ticker's and a caller's)
	buf     []byte
	flushes int

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// Counters: messages sent and applied, messages dropped as malformed, publish
	// errors.
	Published, Applied, Malformed, PublishErrors atomic.Uint64
}

// SyncOptions configure StartSync.
type SyncOptions struct {
	// Subject is where the instances meet, one per router cluster (for example the
	// bus's Subject("policy", "limits")). Required.
	Subject string
	// Interval between publishes; 0 publishes only on Flush (tests drive it).
	Interval time.Duration
	Logger   *slog.Logger
}

const maxSyncMessage = 64 << 10

// StartSync starts sharing l's consumption over nc.
func StartSync(l *Limiter, nc *nats.Conn, opts SyncOptions) (*Sync, error) {
	if opts.Subject == "" {
		return nil, errors.New("policy: sync needs a subject")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Sync{l: l, nc: nc, subject: opts.Subject, log: opts.Logger, interval: opts.Interval,
		stop: make(chan struct{}), done: make(chan struct{})}
	if _, err := rand.Read(s.id[:]); err != nil {
		return nil, err
	}
	var err error
	if s.sub, err = nc.Subscribe(opts.Subject, s.receive); err != nil {
		return nil, fmt.Errorf("policy: sync: subscribe: %w", err)
	}
	// The server knows the subscription once it answers a ping: from then on every
	// instance's consumption reaches this one.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		_ = s.sub.Unsubscribe()
		return nil, fmt.Errorf("policy: sync: subscribe: %w", err)
	}
	l.sharing.Store(true)
	if s.interval > 0 {
		go s.run()
	} else {
		close(s.done)
	}
	return s, nil
}

func (s *Sync) run() {
	defer close(s.done)
	ctxtime.Every(s.stop, s.interval, func() {
		if err := s.Flush(); err != nil {
			s.log.Warn("policy: publishing rate-limit consumption failed", "err", err)
		}
	})
}

// Close stops publishing (after a last publish) and receiving. It may be called more
// than once, concurrently too: every call returns once the first has closed.
func (s *Sync) Close() { s.closeOnce.Do(s.close) }

func (s *Sync) close() {
	close(s.stop)
	ctxtime.Wait(s.done, 10*time.Second)
	_ = s.Flush()
	s.l.sharing.Store(false)
	_ = s.sub.Unsubscribe()
}

// Flush publishes what this instance admitted since the last publish.
func (s *Sync) Flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	var errs []error
	send := func() {
		if len(s.buf) > 9 {
			if err := s.nc.Publish(s.subject, s.buf); err != nil {
				s.PublishErrors.Add(1)
				errs = append(errs, err)
			} else {
				s.Published.Add(1)
			}
		}
		s.buf = append(append(s.buf[:0], 1), s.id[:]...)
	}
	s.buf = append(append(s.buf[:0], 1), s.id[:]...)
	var entries []entry
	for name, t := range *s.l.tables.Load() {
		for i := range t.shards {
			entries = t.shards[i].drain(entries[:0])
			for len(entries) > 0 {
				// One limit's group per message part: its header, then as many
				// entries as fit.
				if len(s.buf)+len(name)+20 > maxSyncMessage {
					send()
				}
				s.buf = binary.AppendUvarint(s.buf, uint64(len(name)))
				s.buf = append(s.buf, name...)
				countAt := len(s.buf)
				s.buf = append(s.buf, 0, 0, 0) // the entry count, fixed width (see putCount)
				n := 0
				for len(entries) > 0 && (n == 0 || len(s.buf)+len(entries[0].key)+20 <= maxSyncMessage) && n < maxCount {
					e := entries[0]
					s.buf = binary.AppendUvarint(s.buf, uint64(len(e.key)))
					s.buf = append(s.buf, e.key...)
					s.buf = binary.AppendUvarint(s.buf, uint64(e.n))
					entries = entries[1:]
					n++
				}
				putCount(s.buf[countAt:], n)
			}
		}
	}
	send()
	if s.flushes++; s.flushes%10 == 0 {
		s.l.Sweep()
	}
	return errors.Join(errs...)
}

// The entry count of a group is a uvarint padded to three bytes, written after its
// entries: 0x80|low7, 0x80|mid7, high7 (a valid, if not minimal, uvarint).
const maxCount = 1<<21 - 1

func putCount(b []byte, n int) {
	b[0] = byte(n&0x7f) | 0x80
	b[1] = byte(n>>7&0x7f) | 0x80
	b[2] = byte(n >> 14)
}

type entry struct {
	key string
	n   uint32
}

// drain takes the shard's unpublished consumption.
func (s *shard) drain(dst []entry) []entry {
	s.mu.Lock()
	for _, b := range s.dirty {
		if b.pending > 0 {
			dst = append(dst, entry{b.key, b.pending})
		}
		b.pending, b.dirty = 0, false
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	s.mu.Unlock()
	return dst
}

// receive applies another instance's message (on the NATS client's goroutine).
func (s *Sync) receive(m *nats.Msg) {
	b := m.Data
	if len(b) < 9 || b[0] != 1 {
		s.Malformed.Add(1)
		return
	}
	if [8]byte(b[1:9]) == s.id {
		return
	}
	if err := applyConsumption(s.l, b[9:]); err != nil {
		s.Malformed.Add(1)
		s.log.Warn("policy: malformed rate-limit consumption from another instance", "err", err)
	}
	s.Applied.Add(1)
}

var errShort = errors.New("truncated")

// applyConsumption debits l's buckets with the groups in b. Entries before a malformed
// part are applied.
func applyConsumption(l *Limiter, b []byte) error {
	now := l.now()
	tables := *l.tables.Load()
	// A group is a name and the count of its entries, an entry a key and an amount:
	// a string then a number, either way.
	next := func() ([]byte, uint64, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, 0, false
		}
		str := b[k : k+int(n)]
		b = b[k+int(n):]
		if n, k = binary.Uvarint(b); k <= 0 {
			return nil, 0, false
		}
		b = b[k:]
		return str, n, true
	}
	for len(b) > 0 {
		name, count, ok := next()
		if !ok {
			return errShort
		}
		t := tables[string(name)]
		for range count {
			key, n, ok := next()
			if !ok {
				return errShort
			}
			if t != nil && n > 0 && n <= 1<<32 {
				t.debit(key, n, now)
			}
		}
	}
	return nil
}
