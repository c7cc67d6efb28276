package router

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/auth"
	"github.com/mcprouter/mcprouter/transport/logsafe"
)

// record is a session as kept in the SessionStore: what another instance needs to carry
// the session on.
type record struct {
	Version      string          `json:"v"`
	Capabilities json.RawMessage `json:"caps,omitempty"`
	ClientInfo   json.RawMessage `json:"info,omitempty"`
	Subs         [][2]string     `json:"subs,omitempty"` // (backend, URI) subscriptions
	// Principal is the ID of the principal the session belongs to ("" without
	// authentication): an instance that carries the session on serves it to that
	// principal only.
	Principal string `json:"p,omitempty"`
}

// saver keeps the writes of one session's record in order. Each change starts a save,
// and saves of one session used to run at once, each writing the snapshot it took: an
// older snapshot (initialize's, without subscriptions) could land after a newer one
// (resources/subscribe's). Now a session is queued for the record writers once
// (recordWriter), and its writer takes the snapshot just before the write; a change
// while it is written marks the record dirty and it is queued again, so the last write
// holds the latest state. Changes made while it waits in the queue need no write of
// their own: the one snapshot takes them all (initialize's and resources/subscribe's
// under load).
type saver struct {
	mu       sync.Mutex
	running  bool // queued or being written
	dirty    bool // changed since the running writer took its snapshot
	recorded bool // a record of the session has been written
	deleted  bool // its deletion has been taken: a closed session is deleted once
}

// begin reports whether the caller must queue the session; false when it is queued or
// being written already.
func (v *saver) begin() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.running {
		v.dirty = true
		return false
	}
	v.running = true
	return true
}

// take is called by the writer just before it takes its snapshot: what changed until
// now is in it.
func (v *saver) take() { v.swap(&v.dirty, false) }

// again reports whether the record changed during the writer's last write, and ends
// the session's turn when not.
func (v *saver) again() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dirty {
		v.dirty = false
		return true
	}
	v.running = false
	return false
}

// firstRecord reports whether no record of the session has been written yet.
func (v *saver) firstRecord() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return !v.recorded
}

// wrote notes that a record of the session has been written (firstRecord).
func (v *saver) wrote() { v.swap(&v.recorded, true) }

// deleteOnce reports whether the session's record is to be deleted now: true the
// first time only. A store counts a deletion of a session without a record as the
// place it kept for it given back, so a second one (the session closed while
// initialize was attaching it, then persisted by both) would give back a place twice.
func (v *saver) deleteOnce() bool { return !v.swap(&v.deleted, true) }

// swap sets the flag f (one of v's) to to under v's lock and returns what it was: the
// one way the saver's flags change outside begin and again.
func (v *saver) swap(f *bool, to bool) (was bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	was, *f = *f, to
	return was
}

// save writes s's record as it is now, or deletes it once the session has ended for
// its client. Only the session's writer calls it (one at a time: recordWriter), so
// that a delete cannot be overtaken by a write.
func (r *Router) save(s *Session) {
	id, b, ok := r.snapshot(s)
	switch {
	case !ok:
	case b == nil:
		r.cfg.Store.Delete(id)
	default:
		r.write(s, id, b, nil)
	}
}

// snapshot encodes s's record as it is now; ok false when there is nothing to write:
// the session has no transport side yet, it ended for good after its record was
// written elsewhere, or its deletion was taken before; b nil (with ok) when it ended
// and its record is to be deleted. A
// session handed over by a shutdown keeps its record, to carry on elsewhere, and gets
// its first one if it was still waiting for it (recordSettle): no other instance can
// have carried it on without one. A record it had is not written again: another
// instance may have carried the session on and written it since.
func (r *Router) snapshot(s *Session) (id string, b []byte, ok bool) {
	t := s.TransportSession()
	if t == nil {
		return "", nil, false
	}
	if t.Closed() {
		if !t.HandedOver() {
			return t.ID(), nil, s.saves.deleteOnce()
		}
		if !s.saves.firstRecord() {
			return "", nil, false
		}
	}
	rec := record{Version: s.version, Capabilities: s.client.caps(), ClientInfo: s.client.info(), Principal: t.Principal().ID()}
	if r.fleet != nil {
		rec.Subs = r.fleet.SessionSubscriptions(s)
	}
	return t.ID(), appendRecord(nil, &rec, r.shareClient(s)), true
}

// write stores s's record b; err is the failure of a first attempt made elsewhere (a
// batch), nil to make the first attempt here. A store that is briefly unreachable (a
// NATS reconnect, a JetStream leader election) gets a few more tries; a record that
// still could not be written is reported.
func (r *Router) write(s *Session, id string, b []byte, err error) {
	attempt := 0
	if err != nil {
		attempt = 1
	}
	for ; attempt < 4; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 250 * time.Millisecond)
		}
		if err = r.cfg.Store.Save(id, b); err == nil {
			s.saves.wrote()
			return
		}
	}
	r.log.Warn("cannot save session record", "session", logsafe.Session(id), "err", err)
}

// shareClient stores s's capabilities and clientInfo as a shared blob where the store
// keeps blobs and takes this one, and returns the key the record refers to it by; ""
// when the record is to carry them itself.
func (r *Router) shareClient(s *Session) string {
	blobs, ok := r.cfg.Store.(blobStore)
	if !ok || s.client.size() == 0 {
		return ""
	}
	blob := appendClientBlob(make([]byte, 0, s.client.size()+4), s.client.caps(), s.client.info())
	key := blobKey(blob)
	if !blobs.Share(key, blob) {
		return ""
	}
	return key
}

// ResolveSession implements transport.SessionResolver: a session whose instance went
// away is rebuilt here from its record, subscriptions included, for the principal it
// belongs to; for anyone else (p) it does not exist, and nothing is built.
func (r *Router) ResolveSession(id string, p *auth.Principal) (string, transport.SessionState, error) {
	if r.cfg.Store == nil {
		return "", nil, transport.ErrNoSession
	}
	b, ok := r.cfg.Store.Load(id)
	if !ok {
		return "", nil, transport.ErrNoSession
	}
	blobs, _ := r.cfg.Store.(blobStore)
	rec, err := decodeRecord(b, blobs)
	if err != nil {
		return "", nil, transport.ErrNoSession
	}
	if rec.Principal != p.ID() {
		return "", nil, transport.ErrForeignSession
	}
	s := &Session{version: rec.Version, r: r}
	s.keepClient(rec.Capabilities, rec.ClientInfo)
	r.Stats.Adopted.Add(1)
	if r.fleet != nil {
		r.fleet.SessionOpened(s)
		if len(rec.Subs) > 0 {
			r.fleet.Resubscribe(s, rec.Subs)
		}
	}
	r.log.Info("session carried on from another instance", "session", logsafe.Session(id), "protocol", rec.Version)
	return rec.Version, s, nil
}

// SessionAdopted implements transport.SessionResolver: the session now lives here. What
// it may have missed while it moved are change notices, which are idempotent: each of
// its subscriptions gets a fresh notifications/resources/updated.
func (r *Router) SessionAdopted(ts *transport.Session) {
	s := sessionOf(ts)
	if s == nil {
		return
	}
	s.t.Store(ts)
	// Its record counts against its budget share as at initialize; adoption is not
	// refused for it (the client's session exists already).
	ts.Account().Add(s.recordBytes())
	if r.fleet != nil {
		r.fleet.SessionAdopted(s)
	}
}

// knownClient is the capabilities and clientInfo the last session kept (keepClient),
// which the next session of the same kind of client shares instead of a copy of its
// own: a router's sessions mostly come from one kind of client (as their records share
// one blob), and each kept its 40-odd bytes for its whole life. Nothing writes to them.
var knownClient atomic.Pointer[clientFields]

// sharedClient returns what the last session kept of its client when that equals caps
// and info, else nil.
func sharedClient(caps, info []byte) *clientFields {
	k := knownClient.Load()
	if k == nil || !bytes.Equal(k.caps(), caps) || !bytes.Equal(k.info(), info) {
		return nil
	}
	return k
}

// sessionNamer is a SessionStore that names the sessions whose records it keeps: it
// packs the records of the sessions it named into pages, and finds a record's page
// from its session's id (natsbus).
type sessionNamer interface{ NewID() string }

// NewSessionID implements transport.SessionNamer: the store's name for a new session,
// "" (the transport's own) when it has none.
func (r *Router) NewSessionID() string {
	if n, ok := r.cfg.Store.(sessionNamer); ok {
		return n.NewID()
	}
	return ""
}
