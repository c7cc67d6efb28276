package defaults

import (
	"testing"
	"time"
)

// TestPositive: zero and below take the default, above zero stays, for counts and
// durations alike.
func TestPositive(t *testing.T) {
	for _, c := range [][3]int{{0, 16, 16}, {-3, 16, 16}, {4, 16, 4}} {
		if got := Positive(c[0], c[1]); got != c[2] {
			t.Errorf("Positive(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
	for _, c := range [][3]time.Duration{{0, time.Second, time.Second}, {-1, time.Second, time.Second}, {time.Millisecond, time.Second, time.Millisecond}} {
		if got := Positive(c[0], c[1]); got != c[2] {
			t.Errorf("Positive(%v, %v) = %v, want %v", c[0], c[1], got, c[2])
		}
	}
}
