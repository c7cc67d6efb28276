package natsbus

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcprouter/mcprouter/internal/ctxtime"
	"github.com/mcprouter/mcprouter/transport"
)

// SessionStore keeps client session records in the P_sessions bucket, so that a session
// outlives the router instance that created it. Records expire ttl after their last write.
type SessionStore struct {
	kv jetstream.KeyValue
	js jetstream.JetStream // SaveAll publishes to the bucket's subjects (prefix) itself
	*clientBlobs
	pages   *pages // the records of the sessions this store named (store_pages.go)
	prefix  string
	timeout time.Duration
	// marker is the TTL of the marker Delete leaves (0: the bucket's own TTL).
	marker time.Duration
	Errors atomic.Uint64
}

// markerTTL is how long the marker of a forgotten session stays in the bucket. A purge
// marker without a TTL of its own stays as long as a record would (twice the idle
// timeout: an hour by default), so with sessions coming and going the bucket held one
// more marker per ended session for that long: a 30-minute soak at 10 sessions a second
// saw the NATS node's memory grow by a third, and the markers count against max_bytes,
// beyond which session records are refused. Nobody watches the bucket: a marker only
// needs to outlive a Load racing the Delete.
const markerTTL = time.Minute

// Sessions opens the session store. Its bucket lets the markers of ended sessions go
// after markerTTL where the server can (NATS 2.11 and later); elsewhere they stay for
// ttl, as before.
func (b *Bus) Sessions(ttl time.Duration) (*SessionStore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	marker := min(markerTTL, ttl)
	if marker < time.Second { // the least a message TTL may be
		marker = 0
	}
	storage := jetstream.MemoryStorage
	if b.cfg.JetStream.SessionStorage == "file" {
		storage = jetstream.FileStorage
	}
	kv, err := b.keyValue(ctx, "sessions", ttl, marker, storage)
	if err != nil && marker > 0 {
		// A server without message TTLs, or a bucket that cannot take them.
		marker = 0
		kv, err = b.keyValue(ctx, "sessions", ttl, 0, storage)
	}
	if err != nil && b.JS != nil {
		// The bucket exists in another storage (an instance configured otherwise made
		// it; JetStream does not move a stream between storages): it is used as it is.
		if existing, oerr := b.JS.KeyValue(ctx, b.cfg.Prefix+"_sessions"); oerr == nil {
			kv, err = existing, nil
			if st, serr := existing.Status(ctx); serr == nil && st.LimitMarkerTTL() == 0 {
				marker = 0
			}
		}
	}
	if err != nil {
		return nil, err
	}
	s := &SessionStore{kv: kv, js: b.JS, pages: newPages(), prefix: "$KV." + kv.Bucket() + ".", timeout: 5 * time.Second, marker: marker}
	s.clientBlobs = b.openClientBlobs(ctx, ttl, storage, func() { s.Errors.Add(1) })
	return s, nil
}

// Save writes a session's record: into its page when this store named the session,
// under its id otherwise.
func (s *SessionStore) Save(id string, rec []byte) error {
	if n, key, ok := s.pages.mine(id); ok {
		writes := s.publishPages(map[uint32]map[entryKey][]byte{n: {key: nonNil(rec)}})
		s.waitPages(writes)
		return writes[n].err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	_, err := s.kv.Put(ctx, id, rec)
	if err != nil {
		s.Errors.Add(1)
	}
	return err
}

// nonNil keeps an empty record a record: a nil one would delete its page entry.
func nonNil(rec []byte) []byte {
	if rec == nil {
		return []byte{}
	}
	return rec
}

// Load reads a session's record: the one under its id (written by the previous build,
// or by a router that carried on a session of another's page: the newer), else the
// one in the page its id names.
func (s *SessionStore) Load(id string) ([]byte, bool) {
	if !validKey(id) {
		return nil, false
	}
	if b, ok := getTwice(s.kv, id, s.timeout, func() { s.Errors.Add(1) }); ok {
		if string(b) == string(tombstone) {
			return nil, false
		}
		s.pages.cameBack(id)
		return b, true
	}
	return s.loadPaged(id)
}

// getTwice reads key from kv, each attempt within timeout, and tries once more after a
// failure other than "not found" (each counted by onError): a loaded or re-electing
// JetStream may miss one timeout, and a session that moved is worth a second try
// before its client is told it does not exist.
func getTwice(kv jetstream.KeyValue, key string, timeout time.Duration, onError func()) ([]byte, bool) {
	for attempt := 0; attempt < 2; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		e, err := kv.Get(ctx, key)
		cancel()
		if err == nil {
			return e.Value(), true
		}
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, false
		}
		onError()
	}
	return nil, false
}

// Delete forgets a session that ended: its page entry when this store named it; a
// session of another's page gets a tombstone under its id (see store_pages.go).
func (s *SessionStore) Delete(id string) {
	if n, key, ok := s.pages.mine(id); ok {
		s.waitPages(s.publishPages(map[uint32]map[entryKey][]byte{n: {key: nil}}))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if _, _, _, paged := pageID(id); paged {
		s.pages.forget(id)
		if _, err := s.kv.Put(ctx, id, tombstone); err != nil {
			s.Errors.Add(1)
		}
		return
	}
	if s.marker > 0 {
		s.kv.Purge(ctx, id, jetstream.PurgeTTL(s.marker))
		return
	}
	s.kv.Purge(ctx, id)
}

// validKey keeps client-chosen ids from reaching the bucket as keys it would refuse.
func validKey(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// EventLog keeps each session's recent GET stream events in the P_events stream
// (subject P.ev.<session>), bounded per session, in age and in bytes (the oldest events
// of all sessions go first), and forgotten when their session ends.
type EventLog struct {
	b       *Bus
	js      jetstream.JetStream
	stream  jetstream.Stream
	Errors  atomic.Uint64
	timeout time.Duration

	forget  chan string     // sessions whose events are to be purged (Forget)
	purger  atomic.Bool     // a goroutine is draining forget
	purging ctxtime.Counter // queued purges not yet done
}

// forgetQueue bounds the purges waiting to run; beyond it they are skipped.
const forgetQueue = 4096

// seqHeader carries an event's sequence number within its SSE stream.
const seqHeader = "Mcp-Event-Seq"

// Events opens (creating if needed) the event log: perSession events at most per
// session, none older than maxAge.
func (b *Bus) Events(perSession int64, maxAge time.Duration) (*EventLog, error) {
	if b.JS == nil {
		return nil, errors.New("nats: JetStream not available")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := b.JS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              b.cfg.Prefix + "_events",
		Subjects:          []string{b.Subject("ev", ">")},
		Storage:           jetstream.MemoryStorage,
		MaxMsgsPerSubject: perSession,
		MaxAge:            maxAge,
		MaxBytes:          b.cfg.JetStream.MaxBytes,
		MaxMsgSize:        b.cfg.JetStream.MaxMsgBytes,
		Discard:           jetstream.DiscardOld,
		Replicas:          b.replicas(),
	})
	if err != nil {
		return nil, err
	}
	return &EventLog{b: b, js: b.JS, stream: st, timeout: 5 * time.Second, forget: make(chan string, forgetQueue)}, nil
}

// Append implements transport.EventLog: an asynchronous publish.
func (l *EventLog) Append(sessionID string, seq uint64, data []byte) {
	if !validKey(sessionID) {
		return
	}
	m := nats.NewMsg(l.b.Subject("ev", sessionID))
	m.Header.Set(seqHeader, strconv.FormatUint(seq, 10))
	m.Data = append([]byte(nil), data...)
	if _, err := l.js.PublishMsgAsync(m); err != nil {
		l.Errors.Add(1)
	}
}

// Since implements transport.EventLog.
func (l *EventLog) Since(sessionID string) ([]transport.LoggedEvent, error) {
	if !validKey(sessionID) {
		return nil, errors.New("invalid session id")
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	// Events published just before the instance died must be in the stream first.
	select {
	case <-l.js.PublishAsyncComplete():
	case <-ctx.Done():
	}
	c, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{l.b.Subject("ev", sessionID)}})
	if err != nil {
		return nil, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	pending := int(info.NumPending)
	var events []transport.LoggedEvent
	for len(events) < pending {
		batch, err := c.Fetch(min(pending-len(events), 256), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			seq, _ := strconv.ParseUint(m.Headers().Get(seqHeader), 10, 64)
			events = append(events, transport.LoggedEvent{Seq: seq, Data: m.Data()})
		}
		if n == 0 {
			break
		}
	}
	return events, nil
}

// Forget implements transport.EventLog: it purges the events of a session that ended,
// so that they do not hold memory until they age out. The purge is a JetStream round
// trip, and Forget is called where a session closes (DELETE, expiry, eviction), so it
// only queues the id: one short-lived goroutine purges the queued sessions in turn. When
// the queue is full the purge is skipped and counted in Errors; the stream's age and
// byte limits still bound what is left behind. Session ids are never reused, so a late
// purge cannot touch another session's events.
func (l *EventLog) Forget(sessionID string) {
	if !validKey(sessionID) {
		return
	}
	l.purging.Add()
	select {
	case l.forget <- sessionID:
	default:
		l.purging.Done()
		l.Errors.Add(1)
		return
	}
	if l.purger.CompareAndSwap(false, true) {
		go l.purgeQueued()
	}
}

// purgeQueued purges queued sessions until the queue is empty, then ends: no goroutine
// stays behind for an idle log.
func (l *EventLog) purgeQueued() {
	for {
		select {
		case id := <-l.forget:
			l.purge(id)
			l.purging.Done()
			continue
		default:
		}
		l.purger.Store(false)
		// An id queued between the empty check and the store above would have found
		// the flag still set: take the work back if nobody else has.
		if len(l.forget) == 0 || !l.purger.CompareAndSwap(false, true) {
			return
		}
	}
}

func (l *EventLog) purge(sessionID string) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if err := l.stream.Purge(ctx, jetstream.WithPurgeSubject(l.b.Subject("ev", sessionID))); err != nil {
		l.Errors.Add(1)
	}
}

// waitForgotten waits until every queued purge has run (tests).
func (l *EventLog) waitForgotten() { <-l.purging.Zero() }
