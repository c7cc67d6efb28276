package app

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// HeapFloor (the heap_floor setting) is the garbage the heap may gather before a
// collection while the live heap is small: the heap goal is kept at or above live +
// heap_floor. Off unless set.
//
// Why one would set it: with the runtime's default pacing (GOGC=100, collect when the
// heap has doubled) a router with a few MiB live collects every few MiB of garbage,
// about every 1.3 s when it forwards 16,000 calls a second. On the one CPU it shares
// with its backend each mark phase (5-8 ms at a quarter of the CPU, plus assists) is a
// stall that the queue of calls takes tens of milliseconds to absorb when the CPU is
// near busy: in an execution trace goroutines waited 1.5-5x as long to run within 10 ms
// of a cycle's start (bench/RESULTS.md, "The open-loop tail"). With a 32 MiB floor the
// same load collects about every 12 s.
//
// Why it is off by default: its effect on the open-loop p99 was below the noise of the
// runs that measured it, while its price is measured: a router whose live heap is below
// the floor may hold up to the floor in garbage (under that load RSS 83 MB against 52
// MB; idle sessions 3.5 against 3.1 KiB each at 5,000 held, 6.6 against 4.4 KiB with
// session records, BenchmarkIdleSessionRSS). Above the floor the pacing is the
// runtime's own.

// ApplyHeapFloor keeps the heap goal at least the configured heap_floor above the live
// heap (see HeapFloor), by raising the GC percentage after each collection while the
// live heap is small. Call it once, after ApplyMemoryLimit. A GOGC environment variable
// turns it off (the operator chose the pacing), and with a memory limit the floor is at
// most a quarter of the limit (the limit still wins: the runtime collects as it nears
// it). It returns a function that stops the adjustment and gives back the percentage it
// found.
func ApplyHeapFloor(cfg Config, log *slog.Logger) (stop func(), err error) {
	configured, err := parseBytes(cfg.HeapFloor)
	if err != nil {
		return nil, fmt.Errorf("heap_floor: %w", err)
	}
	floor := heapFloorFor(os.Getenv("GOGC"), uint64(max(configured, 0)), debug.SetMemoryLimit(-1))
	if floor == 0 {
		return func() {}, nil
	}
	h := newHeapFloor(floor, readLiveHeap(), debug.SetGCPercent)
	log.Info("heap floor", "bytes", floor)
	h.arm()
	return h.stop, nil
}

// heapFloorFor is the floor to keep for a GOGC setting, the configured floor and a
// memory limit (the runtime's math.MaxInt64 when there is none); 0 means none.
func heapFloorFor(gogc string, floor uint64, limit int64) uint64 {
	if gogc != "" {
		return 0
	}
	if limit > 0 && limit < math.MaxInt64 {
		floor = min(floor, uint64(limit)/4)
	}
	return floor
}

// minLive bounds the percentage when the live heap is tiny (a fresh process).
const minLive = 1 << 20

// heapFloor moves the GC percentage after every collection: max(base, floor×100/live),
// i.e. a goal of max(live×(1+base/100), live+floor).
type heapFloor struct {
	floor uint64
	base  int // the percentage found at the start, given back by stop
	live  func() uint64
	set   func(int) int // debug.SetGCPercent

	mu      sync.Mutex // cycles may run concurrently with each other and with stop
	percent int        // the percentage last set
	stopped atomic.Bool
	cycled  func() // tests: called after each adjustment
}

func newHeapFloor(floor uint64, live func() uint64, set func(int) int) *heapFloor {
	base := set(100)
	set(base)
	return &heapFloor{floor: floor, base: base, live: live, set: set, percent: base}
}

// gcTick is the object whose collection marks the end of a GC cycle. It holds a pointer
// so that the runtime never packs it into a tiny block with other objects, which could
// keep it alive.
type gcTick struct {
	_ *byte
	_ [8]byte
}

// arm asks for h.cycle after the next collection.
func (h *heapFloor) arm() {
	runtime.AddCleanup(new(gcTick), (*heapFloor).cycle, h)
}

// cycle runs after a collection: it sets the percentage for the next one and re-arms.
func (h *heapFloor) cycle() {
	if h.stopped.Load() {
		return
	}
	h.mu.Lock()
	if !h.stopped.Load() {
		if p := h.percentFor(h.live()); p != h.percent {
			h.set(p)
			h.percent = p
		}
	}
	h.mu.Unlock()
	if h.cycled != nil {
		h.cycled()
	}
	h.arm()
}

// percentFor is the percentage that keeps the goal at live + floor or more.
func (h *heapFloor) percentFor(live uint64) int {
	if h.base < 0 {
		return h.base // GC off: leave it
	}
	live = max(live, minLive)
	p := int(min(h.floor*100/live, math.MaxInt32))
	return max(p, h.base)
}

// stop ends the adjustment and restores the percentage found at the start.
func (h *heapFloor) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped.Swap(true) {
		return
	}
	h.set(h.base)
}

// readLiveHeap returns a reader of the live heap as of the last collection; it does not
// allocate, and is used from one goroutine at a time (under heapFloor.mu).
func readLiveHeap() func() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	return func() uint64 {
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[0].Value.Uint64()
	}
}
