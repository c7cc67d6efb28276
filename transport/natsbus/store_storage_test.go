package natsbus

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// bucketStorage is where the bucket behind s keeps its records.
func bucketStorage(t *testing.T, s *SessionStore) jetstream.StorageType {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := s.kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Storage
}

// The embedded server keeps session records on file by default; an instance that
// joins it (default: memory) uses the bucket where it is, and reads and writes it; a
// configuration that asks for memory gets memory.
func TestSessionStorage(t *testing.T) {
	a := startBus(t, withUser(Config{Listen: "127.0.0.1:0"}))
	b := startBus(t, withUser(Config{URL: a.ClientURL()}))
	sa, err := a.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bucketStorage(t, sa); got != jetstream.FileStorage {
		t.Fatalf("embedded server's records in %v, want file", got)
	}
	sb, err := b.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bucketStorage(t, sb); got != jetstream.FileStorage {
		t.Fatalf("the joined instance's bucket in %v, want the file bucket it found", got)
	}
	if err := sb.Save("joined", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if rec, ok := sa.Load("joined"); !ok || string(rec) != `{"v":1}` {
		t.Fatalf("the first instance loads %q %v", rec, ok)
	}
	sb.Delete("joined")
	if _, ok := sa.Load("joined"); ok {
		t.Fatal("a deleted record still loads")
	}

	m := startBus(t, Config{Listen: "127.0.0.1:0", User: "router", Password: "secret", JetStream: JetStreamConfig{SessionStorage: "memory"}})
	sm, err := m.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bucketStorage(t, sm); got != jetstream.MemoryStorage {
		t.Fatalf("records in %v, want memory as configured", got)
	}
}
