package app

import (
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

func TestHeapFloorFor(t *testing.T) {
	const floor = 32 << 20
	for _, tc := range []struct {
		name       string
		gogc       string
		configured uint64
		limit      int64
		want       uint64
	}{
		{"not set", "", 0, math.MaxInt64, 0},
		{"set", "", floor, math.MaxInt64, floor},
		{"GOGC set", "100", floor, math.MaxInt64, 0},
		{"GOGC off", "off", floor, math.MaxInt64, 0},
		{"large limit", "", floor, 4 << 30, floor},
		{"small limit", "", floor, 64 << 20, 16 << 20},
	} {
		if got := heapFloorFor(tc.gogc, tc.configured, tc.limit); got != tc.want {
			t.Errorf("%s: heapFloorFor(%q, %d, %d) = %d, want %d", tc.name, tc.gogc, tc.configured, tc.limit, got, tc.want)
		}
	}
}

// fakePercent stands in for debug.SetGCPercent, recording what was set.
type fakePercent struct {
	mu  sync.Mutex
	cur int
	set []int
}

func (f *fakePercent) SetGCPercent(p int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.cur
	f.cur = p
	f.set = append(f.set, p)
	return old
}

func (f *fakePercent) current() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

func TestHeapFloorPercent(t *testing.T) {
	for _, tc := range []struct {
		name string
		base int
		live uint64
		want int
	}{
		{"small heap", 100, 4 << 20, 800},
		{"heap at the floor", 100, 32 << 20, 100},
		{"large heap: the runtime's pacing", 100, 1 << 30, 100},
		{"tiny heap bounded", 100, 10, 3200},
		{"higher base kept", 1000, 8 << 20, 1000},
		{"GC off left off", -1, 4 << 20, -1},
	} {
		f := &fakePercent{cur: tc.base}
		h := newHeapFloor(testFloor, func() uint64 { return tc.live }, f.SetGCPercent)
		if got := h.percentFor(tc.live); got != tc.want {
			t.Errorf("%s: percentFor(%d) = %d, want %d", tc.name, tc.live, got, tc.want)
		}
	}
}

// TestHeapFloorFollowsCollections runs the adjustment on real collections (with the
// percentage faked, so the test process's own pacing is untouched): every collection
// sets the percentage for the live heap it found, and stop gives the first one back.
func TestHeapFloorFollowsCollections(t *testing.T) {
	f := &fakePercent{cur: 100}
	var mu sync.Mutex
	live := uint64(2 << 20)
	h := newHeapFloor(testFloor, func() uint64 { mu.Lock(); defer mu.Unlock(); return live }, f.SetGCPercent)
	cycled := make(chan struct{}, 16)
	h.cycled = func() { cycled <- struct{}{} }
	h.arm()
	// waitPercent collects until an adjustment has set want (a cleanup runs after its
	// cycle, so an adjustment may trail the collection that caused it).
	waitPercent := func(want int, what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			runtime.GC()
			select {
			case <-cycled:
				if f.current() == want {
					return
				}
			case <-deadline:
				t.Fatalf("percentage after collections with %s live = %d, want %d", what, f.current(), want)
			case <-time.After(10 * time.Millisecond): // no cleanup yet: collect again
			}
		}
	}
	waitPercent(1600, "2 MiB")
	mu.Lock()
	live = 64 << 20
	mu.Unlock()
	waitPercent(100, "64 MiB (the runtime's pacing)")
	h.stop()
	if got := f.current(); got != 100 {
		t.Fatalf("percentage after stop = %d, want 100", got)
	}
	n := len(f.set)
	runtime.GC()
	runtime.GC()
	if h.percent != 100 || len(f.set) != n {
		t.Fatalf("stopped floor still sets the percentage: %v", f.set[n:])
	}
}

func TestApplyHeapFloorLeavesGOGCAlone(t *testing.T) {
	t.Setenv("GOGC", "150")
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)
	stop, err := ApplyHeapFloor(Config{HeapFloor: "32MiB"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	runtime.GC()
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("GC percentage with GOGC=150 set = %d, want 150 (untouched)", got)
	}
}

// testFloor is the floor the adjustment tests keep.
const testFloor = 32 << 20

func TestApplyHeapFloorBadSetting(t *testing.T) {
	if _, err := ApplyHeapFloor(Config{HeapFloor: "lots"}, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Fatal("heap_floor: lots was accepted")
	}
}
