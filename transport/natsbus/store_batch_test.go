package natsbus

import (
	"fmt"
	"testing"
)

// SaveAll writes many records at once; another instance reads each, and a later Save
// overwrites one as it would a Put. A bad id fails alone.
func TestSessionStoreSaveAll(t *testing.T) {
	sa, sb := twoStores(t)
	ids := make([]string, 300)
	recs := make([][]byte, len(ids))
	for i := range ids {
		ids[i], recs[i] = fmt.Sprintf("sess-%d", i), []byte(fmt.Sprintf("rec-%d", i))
	}
	ids[7] = "bad.id"
	errs := sa.SaveAll(ids, recs)
	for i, err := range errs {
		if (err != nil) != (i == 7) {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := sa.Save("sess-9", []byte("newer")); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		want := string(recs[i])
		if i == 7 {
			continue
		} else if i == 9 {
			want = "newer"
		}
		if got, ok := sb.Load(id); !ok || string(got) != want {
			t.Fatalf("%s loads %q %v, want %q", id, got, ok, want)
		}
	}
	if sa.Errors.Load() != 0 {
		t.Fatalf("%d errors counted; a bad id is the caller's error", sa.Errors.Load())
	}
}

// With NATS gone, a batch reports every record as not written, at once.
func TestSessionStoreSaveAllClosed(t *testing.T) {
	b, s := busStore(t)
	b.Close()
	for i, err := range s.SaveAll([]string{"s1", "s2"}, [][]byte{[]byte("a"), []byte("b")}) {
		if err == nil {
			t.Errorf("record %d written with NATS gone", i)
		}
	}
	if s.Errors.Load() != 2 {
		t.Errorf("%d errors counted, want 2", s.Errors.Load())
	}
}
