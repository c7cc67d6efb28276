package testbin

import "testing"

// Long marks a test too long for -short (one that starts processes, or waits out a
// timeout): under -short it is skipped, with why saying what makes it long ("starts a
// router and a backend").
func Long(tb testing.TB, why string) {
	tb.Helper()
	if testing.Short() {
		tb.Skip(why + ": skipped with -short")
	}
}
