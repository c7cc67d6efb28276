package fleet

import (
	"context"
	"sync"
)

// lifecycle is the fleet's run: the context every part's background work runs under
// and the count of that work, so that Close ends it and waits for it. New makes it,
// Close ends it; the parts hold a pointer to the one lifecycle and start their
// goroutines through it (from any goroutine), never bare.
type lifecycle struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLifecycle() *lifecycle {
	l := &lifecycle{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// spawn runs fn on a goroutine of its own that stop waits for.
func (l *lifecycle) spawn(fn func()) {
	l.wg.Add(1)
	go func() { defer l.wg.Done(); fn() }()
}

// ended reports whether the fleet is shutting down: work that would answer a backend or
// a client is no longer started.
func (l *lifecycle) ended() bool { return l.ctx.Err() != nil }

// stop ends the context and waits for every goroutine spawn started.
func (l *lifecycle) stop() {
	l.cancel()
	l.wg.Wait()
}
