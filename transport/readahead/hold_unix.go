//go:build unix

package readahead

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The held reply: a complete response on a connection kept alive is written from the
// read that waits for the next request (HoldReply).
//
// Why: right after a response, fasthttp reads the next request, and that read(2) can
// only fail with EAGAIN: the client has not had the response yet, so it cannot have
// sent anything more. That is one system call in five of a forwarded call
// (bench/RESULTS.md, "Syscalls per forwarded call"). Skipping the read is only safe
// when nothing can have arrived unseen: syscall.RawConn.Read forgets the socket's
// earlier readiness when it starts, so the response is written from inside it, after
// that point, and whatever the client sends then wakes the wait.
//
// A client may still have sent bytes before it had the response (it pipelines, or
// half-closes): their readiness is lost. So the wait that skipped its read ends after
// heldWaitBound at the latest, and reads then; a connection found to have had bytes
// waiting then skips no more reads (a pipelining client pays that bound once).
//
// The pipelined batch: a request read together with the one before it (Pipelined) lets
// the earlier reply wait for its own, so that a pipelined run's replies leave in one
// write (a session's opening pipelines three requests: bench/RESULTS.md, "mcpload
// opens a session in two writes"). A handler may be slow, so the batch's wait has a
// bound, kept by a timer that sends what is held when it fires; the read that sends a
// batch does not skip its read(2), since the client may have sent more meanwhile.

// heldWaitBound ends a wait that skipped its read, so that bytes that arrived before
// the reply went out are read after at most this long. Longer than a busy client's
// time between requests (each wait that reaches the bound costs a timer's wake-up and
// a read), short enough for a rare pipelining client.
const heldWaitBound = 50 * time.Millisecond

// maxHeld bounds what is held back: a heldBuf is one pool's buffer size in all.
const maxHeld = bufSize - 16

// heldCount: a held reply's counts (fdIO.heldN, restOff, restN) are 16 bits wide,
// which a buffer of bufSize must fit.
const heldCount = uint16(bufSize)

// heldBuf holds a reply's bytes, and the timer that bounds a pipelined batch's wait
// with the connection it is for: kept with the pooled buffer, so that a batch allocates
// nothing and an idle connection holds neither.
type heldBuf struct {
	t     *time.Timer          // made at the buffer's first batch, stopped when idle
	owner atomic.Pointer[fdIO] // the connection of the batch t bounds; nil when none
	b     [maxHeld]byte
}

var heldBufs = sync.Pool{New: func() any { return new(heldBuf) }}

// expire is the batch's timer: what the connection still holds of this batch goes out.
func (h *heldBuf) expire() {
	if r := h.owner.Load(); r != nil {
		r.expireBatch(h)
	}
}

// holdReply marks the writes up to the next read as a complete reply to hold.
func (r *fdIO) holdReply() {
	r.hmu.Lock()
	r.armed = true
	r.hmu.Unlock()
}

// pipelined makes a reply held now wait for the next reply, within bound (from the
// first request of the run on): the request about to be handled was read before that
// reply went out. bound <= 0 sends it now instead, and the connection, seen to
// pipeline, skips no more reads. The handler's own writes are not held until
// HoldReply.
func (r *fdIO) pipelined(bound time.Duration) error {
	r.hmu.Lock()
	r.armed = false
	h := r.held
	if bound <= 0 {
		r.noSkip = r.noSkip || h != nil
		r.hmu.Unlock()
		return r.flushHeld(true, true)
	}
	defer r.hmu.Unlock()
	if h == nil || r.batch {
		return nil
	}
	r.batch = true
	h.owner.Store(r)
	if h.t == nil {
		h.t = time.AfterFunc(bound, h.expire)
	} else {
		h.t.Reset(bound)
	}
	return nil
}

// hold keeps b after what is held when a reply is armed and it fits; it reports
// whether it did.
func (r *fdIO) hold(b []byte) bool {
	if len(b) > maxHeld {
		return false
	}
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if !r.armed {
		return false
	}
	if r.held == nil {
		r.held = heldBufs.Get().(*heldBuf)
		r.heldN = 0
	} else if int(r.heldN)+len(b) > maxHeld {
		return false
	}
	r.heldN += uint16(copy(r.held.b[r.heldN:], b))
	return true
}

// takeHeld takes the held bytes for its caller to send; whoever takes them sends them
// and gives the buffer back (putHeld). disarm ends the reply: later writes go out as
// they come. batchToo: a pipelined batch is taken too; otherwise it stays (nil).
// skip reports that the read sending what was taken may skip its read(2): it was no
// batch, and nothing pipelined is known to be around.
func (r *fdIO) takeHeld(disarm, batchToo bool) (h *heldBuf, n int, skip bool) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if disarm {
		r.armed = false
	}
	h, n = r.held, int(r.heldN)
	if h == nil || r.batch && !batchToo {
		return nil, 0, false
	}
	skip = !r.batch && !r.noSkip
	r.endBatchLocked()
	r.held, r.heldN = nil, 0
	return h, n, skip
}

// endBatchLocked stops a batch's timer, under hmu.
func (r *fdIO) endBatchLocked() {
	if r.batch {
		r.batch = false
		r.held.t.Stop()
		r.held.owner.Store(nil)
	}
}

func putHeld(h *heldBuf) { heldBufs.Put(h) }

// flushHeld sends what is held now, ahead of any other write (takeHeld says what
// disarm and batchToo do). A write deadline set before the reply's writes (fasthttp
// sets one after the handler) keeps the reply armed; a Close, a hijack, another
// request's handler end it.
func (r *fdIO) flushHeld(disarm, batchToo bool) error {
	if !r.pending() {
		if disarm {
			r.hmu.Lock()
			r.armed = false
			r.hmu.Unlock()
		}
		return nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	h, n, _ := r.takeHeld(disarm, batchToo)
	if h == nil {
		return nil
	}
	_, err := r.writeLocked(h.b[:n])
	putHeld(h)
	return err
}

// expireBatch sends what is held of batch h when its bound passes: without waiting
// (the timer's goroutine must not keep wmu while a client that reads nothing holds
// the socket full); what the socket does not take stays held, no longer a batch, for
// the connection's next write, read or Close.
func (r *fdIO) expireBatch(h *heldBuf) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.hmu.Lock()
	if r.held != h || !r.batch {
		r.hmu.Unlock()
		return
	}
	r.endBatchLocked()
	n := int(r.heldN)
	r.hmu.Unlock()
	r.nowait = true
	k, _ := r.writeLocked(h.b[:n]) // failed: the connection's next operation fails too
	r.nowait = false
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if r.held != h { // cannot happen: taking it needs wmu
		return
	}
	// Writes held meanwhile (appended after n) stay, after what the socket did not take.
	left := copy(h.b[:], h.b[k:r.heldN])
	r.heldN = uint16(left)
	if left == 0 {
		r.held = nil
		putHeld(h)
	}
}

// sendHeld is a read's first attempt. With a reply held, the reply goes out, then
// the attempt reports false, for the runtime to wait for the next request without
// trying read(2), within heldWaitBound; after a pipelined batch it tries read(2)
// then. When the socket takes only part of it, the rest is left in r.rest for
// readInto to write under the write deadline.
func (r *fdIO) sendHeld(fd uintptr) bool {
	if !r.pending() {
		return r.tryRead(fd)
	}
	r.wmu.Lock() // after a batch the timer's write, if it is under way
	h, n, skip := r.takeHeld(true, true)
	off, err := 0, error(nil)
	for off < n {
		k, werr := RawWrite(int(fd), h.b[off:n])
		if k > 0 {
			off += k
		}
		if werr == syscall.EINTR {
			continue
		}
		if err = werr; err != nil {
			break
		}
	}
	r.wmu.Unlock()
	switch {
	case h == nil:
		return r.tryRead(fd)
	case err == syscall.EAGAIN:
		r.rest, r.restOff, r.restN = h, uint16(off), uint16(n)
		return true
	case err != nil:
		putHeld(h)
		r.n, r.err, r.sendFailed = 0, err, true
		return true
	}
	putHeld(h)
	if !skip {
		return r.tryRead(fd)
	}
	r.rwaited, r.bounded = true, true
	// The bound is read from the wall clock, as Deadlines keeps it (deadline): a time
	// carried forward on the monotonic clock alone drifts from it over a process's life.
	if err := r.dl.BeforeWaitUntil(Read, time.Now().Add(heldWaitBound)); err != nil {
		r.n, r.err = 0, err
		return true
	}
	return false
}

// sendRest writes what the socket did not take of a held reply, waiting for room.
func (r *fdIO) sendRest() error {
	h, off, n := r.rest, int(r.restOff), int(r.restN)
	r.rest = nil
	_, err := r.write(h.b[off:n])
	putHeld(h)
	return err
}

// writeOut is the connection's Write: held when it belongs to an armed reply and fits
// after what is held; written now otherwise, after what was held before it, in the
// same write(2) when both fit in the held buffer (a hijacked stream's first bytes after
// a pipelined batch, or a reply's pieces).
func (r *fdIO) writeOut(b []byte) (int, error) {
	if r.hold(b) {
		return len(b), nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	h, n, _ := r.takeHeld(false, true)
	if h == nil {
		return r.writeLocked(b)
	}
	defer putHeld(h)
	if n+len(b) <= maxHeld {
		n += copy(h.b[n:], b)
		k, err := r.writeLocked(h.b[:n])
		return max(k-(n-len(b)), 0), err
	}
	if _, err := r.writeLocked(h.b[:n]); err != nil {
		return 0, err
	}
	if r.hold(b) { // the last piece of a reply in pieces
		return len(b), nil
	}
	return r.writeLocked(b)
}

// pending reports a reply held.
func (r *fdIO) pending() bool {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.held != nil
}
