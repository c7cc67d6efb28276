package sse

import (
	"testing"
	"unsafe"
)

// TestHeldSizes: what a held stream keeps of this package for its whole life stays
// within its size class on 64-bit platforms: the stream (128 bytes), its consumer (96)
// and a driven consumer's state (48; 64 with its own copy of the sink and wider
// counts).
func TestHeldSizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are counted for 64-bit platforms")
	}
	for _, tc := range []struct {
		name      string
		size, max uintptr
	}{
		{"Stream", unsafe.Sizeof(Stream{}), 128},
		{"Consumer", unsafe.Sizeof(Consumer{}), 96},
		{"driver", unsafe.Sizeof(driver{}), 48},
	} {
		if tc.size > tc.max {
			t.Errorf("%s is %d bytes, more than the %d-byte size class", tc.name, tc.size, tc.max)
		}
	}
}
