package sse

import "sync"

// Frame and batch buffers come from pools with power-of-two size classes, 256 B to
// 64 KiB, so a buffer wastes at most half its capacity (the ring counts capacity, so
// waste costs ring room, not hidden memory). Larger buffers are allocated exactly and
// dropped after use rather than pooled: one huge event must not leave a huge buffer
// behind for every later small one.
const (
	minClassShift = 8
	numClasses    = 9
	maxPooled     = 1 << (minClassShift + numClasses - 1) // 64 KiB
)

var framePools [numClasses]sync.Pool

// class returns the smallest size class that holds n bytes, or -1 if none does.
func class(n int) int {
	for c := 0; c < numClasses; c++ {
		if n <= 1<<(minClassShift+c) {
			return c
		}
	}
	return -1
}

// getBuf returns an empty buffer with capacity for at least n bytes. The *[]byte box
// travels with the buffer so that putting it back allocates nothing.
func getBuf(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, 0, n)
		return &b
	}
	if v := framePools[c].Get(); v != nil {
		bp := v.(*[]byte)
		*bp = (*bp)[:0]
		return bp
	}
	b := make([]byte, 0, 1<<(minClassShift+c))
	return &b
}

// putBuf returns a buffer to the pool of the largest class it serves in full (a buffer
// grown by append may sit between classes); buffers beyond the largest class, or below
// the smallest, are dropped.
func putBuf(bp *[]byte) {
	n := cap(*bp)
	if n > maxPooled || n < 1<<minClassShift {
		return
	}
	c := class(n)
	if 1<<(minClassShift+c) > n {
		c--
	}
	*bp = (*bp)[:0]
	framePools[c].Put(bp)
}
