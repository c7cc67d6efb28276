package testsize

import "testing"

// TestOver: a struct within its class passes, one past it is named.
func TestOver(t *testing.T) {
	got := Over(Max{"fits", 16, 16}, Max{"grew", 24, 16})
	if len(got) != 1 || got[0] != "grew is 24 bytes, more than the 16-byte size class" {
		t.Errorf("Over: %q", got)
	}
	Within(t, Max{"fits", 16, 16})
}
