package sse

import (
	"testing"
	"unsafe"

	"github.com/mcprouter/mcprouter/internal/testsize"
)

// TestHeldSizes: what a held stream keeps of this package for its whole life stays
// within its size class on 64-bit platforms: the stream (128 bytes) and its consumer
// with a driven consumer's state (128; they took 96 and 64 apart).
func TestHeldSizes(t *testing.T) {
	testsize.Within(t,
		testsize.Max{Name: "Stream", Size: unsafe.Sizeof(Stream{}), Max: 128},
		testsize.Max{Name: "Consumer", Size: unsafe.Sizeof(Consumer{}), Max: 128})
}
