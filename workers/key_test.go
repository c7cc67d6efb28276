package workers

import (
	"strconv"
	"testing"
)

func TestKeyOf(t *testing.T) {
	ids := []string{"", "a", "b", "session-1", "session-2", "0f8fad5b-d9cb-469f-a165-70867728950e"}
	seen := map[uint64]string{}
	for _, id := range ids {
		k := KeyOf([]byte(id))
		if k != KeyOfString(id) {
			t.Errorf("KeyOf(%q) != KeyOfString(%q)", id, id)
		}
		if k != KeyOf([]byte(id)) {
			t.Errorf("KeyOf(%q) is not stable", id)
		}
		if prev, dup := seen[k]; dup {
			t.Errorf("KeyOf(%q) == KeyOf(%q)", id, prev)
		}
		seen[k] = id
	}
}

// TestKeySpread checks that sequential session ids spread evenly over shards. With a
// seeded 64-bit hash, a shard 40% off the mean over 32768 ids does not happen by
// chance.
func TestKeySpread(t *testing.T) {
	const shards, ids = 16, 1 << 15
	var counts [shards]int
	var buf []byte
	for i := range ids {
		buf = strconv.AppendInt(append(buf[:0], "session-"...), int64(i), 10)
		counts[KeyOf(buf)%shards]++
	}
	mean := ids / shards
	for s, c := range counts {
		if c < mean*6/10 || c > mean*14/10 {
			t.Errorf("shard %d got %d ids, mean %d: %v", s, c, mean, counts)
		}
	}
}

func TestKeyOfZeroAlloc(t *testing.T) {
	id := []byte("0f8fad5b-d9cb-469f-a165-70867728950e")
	if n := testing.AllocsPerRun(100, func() { _ = KeyOf(id); _ = KeyOfString("abc") }); n != 0 {
		t.Errorf("KeyOf allocates %v times", n)
	}
}

func BenchmarkKeyOf(b *testing.B) {
	id := []byte("0f8fad5b-d9cb-469f-a165-70867728950e")
	b.ReportAllocs()
	b.SetBytes(int64(len(id)))
	var sink uint64
	for b.Loop() {
		sink += KeyOf(id)
	}
	_ = sink
}
