// Package closewatch tells when the peer of a held connection closes it, for every such
// connection of a process with one goroutine, where a reader blocked on each connection
// would hold a goroutine and its stack each.
//
// A router holds many streams whose connections carry nothing in from the client after
// the request: a GET stream, a stateless request's stream (subscriptions/listen above
// all). Their client ends them by closing the connection, and a stateless request is
// cancelled exactly so, which the router must notice at once rather than at the next
// write. On Linux a Watcher registers each connection's descriptor in an epoll set of
// its own (the descriptor stays in Go's poller too: an epoll set may share a descriptor
// with another) for the peer's close (EPOLLRDHUP), a reset or an error, and one goroutine
// waits on the set. Elsewhere New and Default fail with errors.ErrUnsupported, and the
// caller keeps a reader per connection.
package closewatch

import "sync"

// Closer is what a Watcher closes when the peer of its connection closes the connection
// (a stream's consumer). Close may be called from the watcher's goroutine at any time
// until Remove has returned, and once more just after (an event taken before Remove), so
// it must be safe to call concurrently with anything else and more than once.
type Closer interface{ Close() }

// Reg is one registration of a Watcher, for Remove; the zero Reg is none.
type Reg struct{ token uint64 }

// Registered reports whether r is a registration (not the zero Reg).
func (r Reg) Registered() bool { return r.token != 0 }

// Default returns the process's Watcher, made at the first call: a process holds one
// set for all its connections, whichever server holds them, and its goroutine lives as
// long as the process. The error is New's (errors.ErrUnsupported elsewhere than Linux).
func Default() (*Watcher, error) {
	def.once.Do(func() { def.w, def.err = New() })
	return def.w, def.err
}

var def struct {
	once sync.Once
	w    *Watcher
	err  error
}
