// Package ctxtime holds the one sleep that a context can cut short, for the loops that
// wait between attempts (reconnect backoff, health checks, stream retries). Any
// goroutine may call it.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits for d unless ctx ends first; it reports whether it slept the whole d, so
// that a loop can return as soon as its context is done. Its timer is stopped on
// return, so a cut-short sleep leaves nothing running.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
