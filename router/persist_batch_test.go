package router

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/transport"
	"github.com/mcprouter/mcprouter/transport/natsbus"
)

// batchCounter counts the batches and single writes that reach a real store; the
// first batch's first id is spoilt (a key the bucket refuses) when spoil is set, so
// that one record of it fails.
type batchCounter struct {
	*natsbus.SessionStore
	spoil bool

	mu      sync.Mutex
	batches int
	batched int
	singles int
}

func (s *batchCounter) SaveAll(ids []string, recs [][]byte) []error {
	s.mu.Lock()
	s.batches++
	s.batched += len(ids)
	spoil := s.spoil && s.batches == 1
	s.mu.Unlock()
	if spoil {
		ids = append([]string{"spoilt.id"}, ids[1:]...)
	}
	return s.SessionStore.SaveAll(ids, recs)
}

func (s *batchCounter) Save(id string, rec []byte) error {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	return s.SessionStore.Save(id, rec)
}

func (s *batchCounter) counts() (batches, batched, singles int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches, s.batched, s.singles
}

// openSettling opens n sessions on a router over store whose records wait (an hour's
// settle) until the router closes, and returns their ids once it has.
func openSettling(t *testing.T, store SessionStore, n int) []string {
	t.Helper()
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	r.saving.settle = time.Hour
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{}, transport.HTTPConfig{})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.initialize(V20250618)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestRecordBatches: records due together go to the store in a few batches, not one
// write each, and each lands; a record its batch did not store is written again alone.
func TestRecordBatches(t *testing.T) {
	for _, spoil := range []bool{false, true} {
		store := &batchCounter{SessionStore: natsStore(t), spoil: spoil}
		const sessions = 50
		ids := openSettling(t, store, sessions)
		batches, batched, singles := store.counts()
		if batches == 0 || batches > recordWriters || batched+singles-btoi(spoil) != sessions {
			t.Errorf("spoil %v: %d records in %d batches and %d alone for %d sessions", spoil, batched, batches, singles, sessions)
		}
		for _, id := range ids {
			b, ok := store.Load(id)
			if !ok {
				t.Fatalf("spoil %v: session %s has no record", spoil, id)
			}
			if rec, err := decodeRecord(b, store); err != nil || rec.Version != V20250618 {
				t.Fatalf("spoil %v: record %+v %v", spoil, rec, err)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRecordBatchStoreGone: with NATS gone, a batch fails, each record is tried again
// alone a few times and reported; the router still closes.
func TestRecordBatchStoreGone(t *testing.T) {
	bus, err := natsbus.Start(natsbus.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	store, err := bus.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	counted := &batchCounter{SessionStore: store}
	r, err := New(Config{Name: "mcprouter", Version: "test", Store: counted})
	if err != nil {
		t.Fatal(err)
	}
	r.saving.settle = time.Hour
	h := newHTTPHarnessWith(t, r, transport.RegistryConfig{}, transport.HTTPConfig{})
	h.initialize(V20250618)
	h.initialize(V20250618)
	bus.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, singles := counted.counts(); singles == 0 {
		t.Error("records of a failed batch were not tried again alone")
	}
	if store.Errors.Load() == 0 {
		t.Error("no failure counted")
	}
}
