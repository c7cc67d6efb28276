//go:build linux

package closewatch

import (
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrClosed is Add's error once the Watcher is closed (or its goroutine failed).
var ErrClosed = errors.New("closewatch: watcher closed")

// Watcher watches many connections for their peer's close with one goroutine blocked in
// epoll_wait on a set of its own. Add, Remove, Len and Close may be called from any
// goroutine.
//
// Each connection is registered for EPOLLRDHUP (the peer's FIN), EPOLLHUP and EPOLLERR (a
// reset), not EPOLLIN: bytes the client sends, which it should not, wake nothing. The
// registration is one-shot (EPOLLONESHOT): once it has fired it stays disarmed until
// Remove, so a closed connection whose stream takes a while to end cannot make the
// goroutine spin, as a level-triggered registration would, and nothing depends on
// reading the socket, as an edge-triggered one would. The epoll event carries no
// descriptor and no pointer (the garbage collector does not see the kernel's copy) but a
// token, a slot of the Watcher's table and the slot's generation: an event taken just
// before its registration was removed, when the descriptor may be another connection's
// already, finds a newer generation there and is dropped.
type Watcher struct {
	epfd int
	wake [2]int        // a pipe: Close writes a byte to wake[1], which ends the goroutine
	done chan struct{} // closed when the goroutine has returned

	// life guards the descriptors: Add and Remove hold it shared around their epoll_ctl,
	// Close exclusively to stop them; stopped is set (under it exclusively) by Close or
	// when epoll_wait fails, after which nothing is added to the set.
	life      sync.RWMutex
	stopped   bool
	closeOnce sync.Once

	mu    sync.Mutex
	slots []slot   // index: a token's low half; never shrinks (24 bytes per peak registration)
	free  []uint32 // slots not in use
	n     int      // slots in use

	events atomic.Uint64 // events taken for registrations (a spinning watcher would show)
}

// slot is one registration: c, until Remove, and the generation of the latest one.
type slot struct {
	c   Closer
	gen uint32
}

// wakeToken marks the wake pipe's events; a registration's token is never 0 (gen ≥ 1).
const wakeToken = 0

// watchEvents are the events a registration waits for (EPOLLHUP and EPOLLERR are always
// reported; they are named for the reader).
const watchEvents = syscall.EPOLLRDHUP | syscall.EPOLLHUP | syscall.EPOLLERR | syscall.EPOLLONESHOT

// New returns a Watcher with its goroutine running; Close stops it.
func New() (*Watcher, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	w := &Watcher{epfd: epfd, done: make(chan struct{})}
	if err := syscall.Pipe2(w.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	setToken(&ev, wakeToken)
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, w.wake[0], &ev); err != nil {
		w.closeFds()
		return nil, err
	}
	go w.run()
	return w, nil
}

// Add registers rc's connection: when its peer closes it (or resets it), c.Close is
// called from the Watcher's goroutine, once. The caller must call Remove with the Reg
// before the connection is closed: the registration is keyed by the descriptor's number,
// which a closed connection's next one may reuse.
func (w *Watcher) Add(rc syscall.RawConn, c Closer) (Reg, error) {
	w.life.RLock()
	defer w.life.RUnlock()
	if w.stopped {
		return Reg{}, ErrClosed
	}
	tok := w.alloc(c)
	ev := syscall.EpollEvent{Events: watchEvents}
	setToken(&ev, tok)
	var cerr error
	err := rc.Control(func(fd uintptr) {
		cerr = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		w.release(tok)
		return Reg{}, err
	}
	return Reg{tok}, nil
}

// Remove ends registration r of rc's connection; the zero Reg, or one removed already,
// is ignored. Call it while the connection is open (see Add); if the connection was
// closed all the same, Control fails and nothing is removed by number, and the kernel
// dropped the registration with the descriptor. After Remove returns, the Closer may
// still be called once, by an event taken just before.
func (w *Watcher) Remove(rc syscall.RawConn, r Reg) {
	if !r.Registered() {
		return
	}
	w.life.RLock()
	defer w.life.RUnlock()
	if !w.release(r.token) || w.stopped {
		return // not a live registration: its descriptor may be another's by now
	}
	rc.Control(func(fd uintptr) {
		syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
	})
}

// Len returns the number of registrations: Adds not yet Removed.
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Close stops the goroutine and closes the set; later Adds fail with ErrClosed, and
// Removes only forget their registration. The Default Watcher is never closed.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		w.life.Lock()
		w.stopped = true
		syscall.Write(w.wake[1], []byte{1})
		w.life.Unlock()
		<-w.done
		w.closeFds()
	})
	return nil
}

func (w *Watcher) closeFds() {
	syscall.Close(w.epfd)
	syscall.Close(w.wake[0])
	syscall.Close(w.wake[1])
}

// run waits for events and closes each one's Closer, until Close wakes it. An
// unexpected error of epoll_wait (none is expected but an interrupt) stops the Watcher:
// later Adds fail, and their callers fall back to their own means.
func (w *Watcher) run() {
	defer close(w.done)
	var evs [128]syscall.EpollEvent
	for {
		n, err := syscall.EpollWait(w.epfd, evs[:], -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			w.life.Lock()
			w.stopped = true
			w.life.Unlock()
			return
		}
		for i := range evs[:n] {
			tok := token(&evs[i])
			if tok == wakeToken {
				return
			}
			w.events.Add(1)
			if c := w.lookup(tok); c != nil {
				c.Close()
			}
		}
	}
}

// alloc takes a slot for c and returns its token: the slot's index, and its new
// generation in the high half.
func (w *Watcher) alloc(c Closer) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var i uint32
	if k := len(w.free); k > 0 {
		i = w.free[k-1]
		w.free = w.free[:k-1]
	} else {
		i = uint32(len(w.slots))
		w.slots = append(w.slots, slot{})
	}
	s := &w.slots[i]
	s.gen++
	if s.gen == 0 { // wrapped: 0 would make token 0 possible
		s.gen = 1
	}
	s.c = c
	w.n++
	return uint64(s.gen)<<32 | uint64(i)
}

// release frees tok's slot and reports whether tok was a live registration.
func (w *Watcher) release(tok uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.slotOf(tok)
	if s == nil {
		return false
	}
	s.c = nil
	w.free = append(w.free, uint32(tok))
	w.n--
	return true
}

// lookup returns the Closer of live registration tok, or nil.
func (w *Watcher) lookup(tok uint64) Closer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.slotOf(tok); s != nil {
		return s.c
	}
	return nil
}

// slotOf returns tok's slot if tok is its live registration. Called with w.mu held.
func (w *Watcher) slotOf(tok uint64) *slot {
	i, gen := uint32(tok), uint32(tok>>32)
	if int(i) >= len(w.slots) {
		return nil
	}
	s := &w.slots[i]
	if s.gen != gen || s.c == nil {
		return nil
	}
	return s
}

// setToken and token put a token in an epoll event's 64-bit data, which the syscall
// package spells as two int32 fields (Fd the low half on a little-endian machine; the
// token only has to come back as it went in).
func setToken(ev *syscall.EpollEvent, tok uint64) {
	ev.Fd, ev.Pad = int32(uint32(tok)), int32(uint32(tok>>32))
}

func token(ev *syscall.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}
