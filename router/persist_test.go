package router

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport"
)

// gateStore is a SessionStore in memory whose first Save blocks until release is
// closed: a write slowed down on demand.
type gateStore struct {
	memStore
	entered chan struct{} // the first Save is blocked
	release chan struct{}

	mu    sync.Mutex
	saves int
}

func (s *gateStore) Save(id string, rec []byte) error {
	s.mu.Lock()
	s.saves++
	first := s.saves == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.release
	}
	return s.memStore.Save(id, rec)
}

func (s *gateStore) saveCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// subsFleet is a Fleet whose sessions' subscriptions the test sets.
type subsFleet struct {
	stubFleet
	mu   sync.Mutex
	subs [][2]string
}

func (f *subsFleet) AppendCapabilities(dst []byte, _ string) []byte { return dst }
func (f *subsFleet) SessionSubscriptions(*Session) [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subs
}

func (f *subsFleet) subscribe(backend, uri string) {
	f.mu.Lock()
	f.subs = append(f.subs, [2]string{backend, uri})
	f.mu.Unlock()
}

// pending reports whether a change waits for the running write to finish.
func (v *saver) pending() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.dirty
}

// slowRecord starts a router on store whose first record write (initialize's) blocks
// until finish, and opens a session: it returns the session, with that write blocked.
// finish lets the write through and closes the router, which waits for every write.
func slowRecord(t *testing.T, store *gateStore, f Fleet) (ts *transport.Session, finish func()) {
	t.Helper()
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: store, Fleet: f})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	finish = func() {
		once.Do(func() {
			close(store.release)
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(finish)
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{}, transport.HTTPConfig{})
	sid := h.initialize(V20250618)
	select {
	case <-store.entered:
	case <-time.After(waitLimit):
		t.Fatal("initialize did not write the record")
	}
	ts, ok := h.reg.Get([]byte(sid))
	if !ok {
		t.Fatal("no session")
	}
	return ts, finish
}

func newGateStore() *gateStore {
	return &gateStore{memStore: memStore{m: map[string][]byte{}}, entered: make(chan struct{}), release: make(chan struct{})}
}

// TestRecordKeepsLatestState: the record written at initialize (no subscriptions) is
// slow to land; subscriptions made meanwhile are in the record once every write is
// done, whatever order the writes ran in (Router.Close waits for them).
func TestRecordKeepsLatestState(t *testing.T) {
	store, f := newGateStore(), &subsFleet{}
	ts, finish := slowRecord(t, store, f)
	s := sessionOf(ts)
	f.subscribe("files", "file:///watched")
	s.Persist() // what the fleet does on resources/subscribe
	f.subscribe("files", "file:///second")
	s.Persist()
	// The subscriptions' save is queued behind the blocked write (or, without one
	// writer per session, written already).
	eventually(t, "the subscriptions' save neither queued nor written", func() bool {
		return store.saveCalls() >= 2 || s.saves.pending()
	})
	finish()
	rec, ok := store.Load(ts.ID())
	if !ok {
		t.Fatal("no record")
	}
	if !strings.Contains(string(rec), "file:///watched") || !strings.Contains(string(rec), "file:///second") {
		t.Fatalf("record %s lost the subscriptions", rec)
	}
	if n := store.saveCalls(); n > 3 {
		t.Errorf("%d writes for 3 changes", n)
	}
}

// TestRecordDeletedAfterSlowWrite: a session that ends for its client while its record
// is still being written has no record once every write is done (the delete is not
// overtaken by the write in flight).
func TestRecordDeletedAfterSlowWrite(t *testing.T) {
	store := newGateStore()
	ts, finish := slowRecord(t, store, &subsFleet{})
	ts.Close() // as DELETE does
	finish()
	if store.has(ts.ID()) {
		t.Fatal("the record of an ended session outlived it")
	}
}
