package mono

import (
	"testing"
	"time"
)

// TestNanosAdvances: the clock does not go back, and it moves with real time.
func TestNanosAdvances(t *testing.T) {
	a := Nanos()
	time.Sleep(2 * time.Millisecond)
	b := Nanos()
	if b < a+int64(time.Millisecond) {
		t.Fatalf("after a 2ms sleep the clock moved %v, want at least 1ms", time.Duration(b-a))
	}
}
