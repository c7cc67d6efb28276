package sse

import (
	"testing"
	"unsafe"
)

// TestHeldSizes: what a held stream keeps of this package for its whole life stays
// within its size class on 64-bit platforms: the stream (128 bytes) and its consumer
// with a driven consumer's state (128; they took 96 and 64 apart).
func TestHeldSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are counted for 64-bit platforms")
	}
	for _, tc := range []struct {
		name      string
		size, max uintptr
	}{
		{"Stream", unsafe.Sizeof(Stream{}), 128},
		{"Consumer", unsafe.Sizeof(Consumer{}), 128},
	} {
		if tc.size > tc.max {
			t.Errorf("%s is %d bytes, more than the %d-byte size class", tc.name, tc.size, tc.max)
		}
	}
}
