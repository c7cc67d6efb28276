package testsize

import (
	"runtime"
	"testing"
)

// TestOver: a struct within its class passes, one past it is named.
func TestOver(t *testing.T) {
	got := Over(Max{"fits", 16, 16}, Max{"grew", 24, 16})
	if len(got) != 1 || got[0] != "grew is 24 bytes, more than the 16-byte size class" {
		t.Errorf("Over: %q", got)
	}
	Within(t, Max{"fits", 16, 16})
}

// TestLiveHeap: a held allocation shows in the live heap, and is gone from it once it
// is let go. The rest of the heap may move a little between readings (other tests'
// garbage, the runtime's own): a sixteenth of the held size is allowed either way.
func TestLiveHeap(t *testing.T) {
	const size = 64 << 20
	base := LiveHeap()
	held := make([]byte, size)
	with := LiveHeap()
	runtime.KeepAlive(held)
	held = nil
	without := LiveHeap()
	if with+size/16 < base+size || without > with-size/2 {
		t.Errorf("live heap %d, %d with %d bytes held, %d after", base, with, size, without)
	}
}
