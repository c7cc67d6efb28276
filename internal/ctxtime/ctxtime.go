// Package ctxtime holds the one sleep that a context can cut short, for the loops that
// wait between attempts (reconnect backoff, health checks, stream retries), and the
// bounded waits for a signal or a WaitGroup that Close and shutdown paths use. Any
// goroutine may call them.
package ctxtime

import (
	"context"
	"sync"
	"time"
)

// Wait waits for ch to be closed, at most d; it reports whether it was. Its timer is
// stopped on return.
func Wait(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// WaitGroup waits for wg, at most d; it reports whether wg was done in time. When it
// was not, the goroutine that waits for wg stays until wg is done.
func WaitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return Wait(done, d)
}

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
