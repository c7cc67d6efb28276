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

// Session records are in memory by default; on file when asked. An instance that
// joins (default: memory) uses the file bucket where it is, and reads and writes it.
func TestSessionStorage(t *testing.T) {
	a := startBus(t, withUser(Config{Listen: "127.0.0.1:0", JetStream: JetStreamConfig{SessionStorage: "file"}}))
	b := startBus(t, withUser(Config{URL: a.ClientURL()}))
	sa, err := a.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bucketStorage(t, sa); got != jetstream.FileStorage {
		t.Fatalf("records in %v, want file as configured", got)
	}
	sb, err := b.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bucketStorage(t, sb); got != jetstream.FileStorage {
		t.Fatalf("the joined instance's bucket in %v, want the file bucket it found", got)
	}
	shareRecord(t, sb, sa, "joined", `{"v":1}`)

	m := startBus(t, withUser(Config{Listen: "127.0.0.1:0"}))
	sm, err := m.Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := bucketStorage(t, sm); got != jetstream.MemoryStorage {
		t.Fatalf("records in %v by default, want memory", got)
	}
}
