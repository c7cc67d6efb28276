package natsbus

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A blob is shared from its second sighting on: the first record of a kind of client
// carries its bytes; the second's write stores the blob, which another instance reads.
// While it is fresh it is not written again; once refresh old, the next record
// referring to it writes it again.
func TestClientBlobs(t *testing.T) {
	sa, sb := twoStores(t)
	const key = "blob-of-an-ide"
	blob := []byte("capabilities and clientInfo")
	if sa.Share(key, blob) {
		t.Fatal("shared at its first sighting")
	}
	if _, ok := sb.LoadBlob(key); ok {
		t.Fatal("a blob seen once was written")
	}
	if !sa.Share(key, blob) {
		t.Fatal("not shared at its second sighting")
	}
	if got, ok := sb.LoadBlob(key); !ok || string(got) != string(blob) {
		t.Fatalf("the other instance loads %q %v", got, ok)
	}
	revision := func() uint64 {
		t.Helper()
		e, err := sa.clientBlobs.kv.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	first := revision()
	if !sa.Share(key, blob) || revision() != first {
		t.Fatal("a fresh blob was written again")
	}
	sa.clientBlobs.refresh = 0
	if !sa.Share(key, blob) || revision() == first {
		t.Fatal("a blob due for refresh was not written again")
	}
	if sa.Errors.Load() != 0 || sb.Errors.Load() != 0 {
		t.Fatalf("errors on the ordinary path: %d %d", sa.Errors.Load(), sb.Errors.Load())
	}
	for _, k := range []string{"", "a.b", "a*"} {
		if sa.Share(k, blob) || sa.Share(k, blob) {
			t.Errorf("key %q shared", k)
		}
		if _, ok := sa.LoadBlob(k); ok {
			t.Errorf("key %q loads", k)
		}
	}
}

// Blobs outlive the records that refer to them: their bucket keeps each for twice
// the records' ttl, and a router writes one again once it is half a ttl old.
func TestClientBlobsOutliveRecords(t *testing.T) {
	const ttl = 40 * time.Minute
	s, err := startBus(t, Config{}).Sessions(ttl)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.clientBlobs.kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != 2*ttl || s.clientBlobs.refresh != ttl/2 {
		t.Fatalf("blobs kept %v, written again after %v; records kept %v", st.TTL(), s.clientBlobs.refresh, ttl)
	}
}

// The table of blobs a router tracks is bounded: full, it starts again empty.
func TestClientBlobsBounded(t *testing.T) {
	s, err := startBus(t, Config{}).Sessions(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= maxBlobs; i++ {
		s.Share(fmt.Sprintf("k%d", i), []byte("x"))
	}
	if n := len(s.clientBlobs.byKey); n != 1 {
		t.Fatalf("%d blobs tracked after %d distinct ones, want the table emptied", n, maxBlobs+1)
	}
}

// With NATS gone a blob is not shared (the record carries the bytes) and the failure
// is counted; nothing hangs.
func TestClientBlobsClosed(t *testing.T) {
	b, s := busStore(t)
	s.Share("k", []byte("x"))
	b.Close()
	if s.Share("k", []byte("x")) {
		t.Fatal("shared with NATS gone")
	}
	if _, ok := s.LoadBlob("k"); ok {
		t.Fatal("loaded with NATS gone")
	}
	if n := s.Errors.Load(); n != 3 {
		t.Fatalf("errors %d, want 3 (one write, two reads)", n)
	}
}
