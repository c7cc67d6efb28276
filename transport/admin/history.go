package admin

import (
	"strconv"
	"sync"
)

// history is the status page's recent past: the last updates of the one status feed,
// numbered from 1, shared by every viewer. A page opened now gets them at once and
// draws its charts from its first second instead of waiting for one point per
// Interval; a page that reconnects gets only what it missed (SSE Last-Event-ID).
//
// One goroutine adds; any number read. Readers copy under the lock and write to their
// connection after it, so a slow viewer holds nobody up.
type history struct {
	mu    sync.Mutex
	ring  [][]byte      // the kept updates, oldest at start (when full)
	start int           // index of the oldest kept update in ring
	last  uint64        // number of the newest update; 0 before the first
	added chan struct{} // closed (and replaced) when an update is added
}

func newHistory(keep int) *history {
	return &history{ring: make([][]byte, 0, keep), added: make(chan struct{})}
}

// add keeps update (which history now owns) and wakes the readers. It returns the
// buffer of the update that fell out of the ring, for the next update to reuse, or nil.
func (h *history) add(update []byte) (spare []byte) {
	h.mu.Lock()
	if len(h.ring) < cap(h.ring) {
		h.ring = append(h.ring, update)
	} else {
		spare = h.ring[h.start][:0]
		h.ring[h.start] = update
		h.start = (h.start + 1) % len(h.ring)
	}
	h.last++
	wake := h.added
	h.added = make(chan struct{})
	h.mu.Unlock()
	close(wake)
	return spare
}

// appendSince appends, as SSE events with their numbers as ids, the kept updates newer
// than after, and returns the number of the newest one and a channel closed at the
// next add. An after that history cannot have handed out (from an earlier process, or
// not a number) counts as nothing seen: the reader gets everything kept.
func (h *history) appendSince(dst []byte, after uint64) ([]byte, uint64, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if after > h.last {
		after = 0
	}
	n := len(h.ring)
	first := h.last - uint64(n) + 1 // number of the oldest kept update
	for i := 0; i < n; i++ {
		num := first + uint64(i)
		if num <= after {
			continue
		}
		dst = append(dst, "id: "...)
		dst = strconv.AppendUint(dst, num, 10)
		dst = append(dst, "\ndata: "...)
		dst = append(dst, h.ring[(h.start+i)%n]...) // JSON has no raw newline: one data line
		dst = append(dst, "\n\n"...)
	}
	return dst, h.last, h.added
}
