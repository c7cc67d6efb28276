package router

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mcprouter/mcprouter/transport"
)

// heldStore is a SessionStore in memory whose Saves all wait until release is closed,
// and which counts the Saves waiting at once.
type heldStore struct {
	memStore
	release chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int // the most Saves that waited at once
	saves    int
}

func (s *heldStore) Save(id string, rec []byte) error {
	s.mu.Lock()
	s.saves++
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	<-s.release
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	return s.memStore.Save(id, rec)
}

func (s *heldStore) counts() (inFlight, most, saves int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight, s.most, s.saves
}

// TestRecordWritersBounded: while the store does not answer, a router writes at most
// recordWriters records at once, however many sessions open; the others wait in the
// queue, where a change made meanwhile joins the one write of the session (no second
// write). Once the store answers, every session has its record, with its latest state.
func TestRecordWritersBounded(t *testing.T) {
	store := &heldStore{memStore: memStore{m: map[string][]byte{}}, release: make(chan struct{})}
	f := &subsFleet{}
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: store, Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(store.release)
		}
	}
	t.Cleanup(release)
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{}, transport.HTTPConfig{})
	const sessions = 3 * recordWriters
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = h.initialize(V20250618)
	}
	eventually(t, "the writers did not start", func() bool {
		n, _, _ := store.counts()
		return n == recordWriters
	})
	// The last session waits in the queue: its subscription joins its first write.
	last, ok := h.reg.Get([]byte(ids[sessions-1]))
	if !ok {
		t.Fatal("no session")
	}
	f.subscribe("files", "file:///watched")
	sessionOf(last).Persist()

	release()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, most, saves := store.counts()
	if most > recordWriters {
		t.Errorf("%d records written at once, at most %d expected", most, recordWriters)
	}
	if saves != sessions {
		t.Errorf("%d writes for %d sessions, each queued once", saves, sessions)
	}
	for _, id := range ids {
		if !store.has(id) {
			t.Fatalf("session %s has no record", id)
		}
	}
	rec, _ := store.Load(ids[sessions-1])
	if !strings.Contains(string(rec), "file:///watched") {
		t.Errorf("record %s lost the subscription made while it was queued", rec)
	}
}
