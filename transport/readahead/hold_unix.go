//go:build unix

package readahead

import (
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
// waiting then holds no more replies (a pipelining client pays that bound once).

// heldWaitBound ends a wait that skipped its read, so that bytes that arrived before
// the reply went out are read after at most this long. Longer than a busy client's
// time between requests (each wait that reaches the bound costs a timer's wake-up and
// a read), short enough for a rare pipelining client.
const heldWaitBound = 50 * time.Millisecond

// maxHeld bounds a write held back: the pool's buffer size.
const maxHeld = bufSize

// heldCount: a held reply's counts (fdIO.heldN, restOff, restN) are 16 bits wide,
// which a buffer of bufSize must fit.
const heldCount = uint16(bufSize)

// holdReply marks the writes up to the next read as a complete reply to hold.
func (r *fdIO) holdReply() {
	r.hmu.Lock()
	r.armed = !r.noHold
	r.hmu.Unlock()
}

// holdWrite keeps a copy of b for the next read to send, when a reply is armed and b
// fits; a write held before it is returned to go out first. held reports that b was
// kept.
func (r *fdIO) holdWrite(b []byte) (prev *[]byte, prevN int, held bool) {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	if !r.armed && r.held == nil {
		return nil, 0, false
	}
	prev, prevN = r.held, int(r.heldN)
	r.held, r.heldN = nil, 0
	if r.armed && len(b) <= maxHeld {
		h := bufs.Get().(*[]byte)
		r.heldN = uint16(copy(*h, b))
		r.held = h
		held = true
	}
	return prev, prevN, held
}

// takeHeld takes the held write for its caller to send; whoever takes it sends it.
// disarm ends the reply: later writes go out as they come. pipelined, for a request
// served from bytes read with an earlier one, means the connection holds no more
// replies.
func (r *fdIO) takeHeld(disarm, pipelined bool) (*[]byte, int) {
	r.hmu.Lock()
	h, n := r.held, int(r.heldN)
	r.held, r.heldN = nil, 0
	if disarm {
		r.armed = false
	}
	if pipelined && h != nil {
		r.noHold = true
	}
	r.hmu.Unlock()
	return h, n
}

// flushHeld sends what is held now (takeHeld says what disarm and pipelined do). A
// write deadline set before the reply's writes (fasthttp sets one after the handler)
// keeps the reply armed; a Close, a hijack, another request's handler end it.
func (r *fdIO) flushHeld(disarm, pipelined bool) error {
	h, n := r.takeHeld(disarm, pipelined)
	if h == nil {
		return nil
	}
	_, err := r.write((*h)[:n])
	bufs.Put(h)
	return err
}

// sendHeld is a read's first attempt. With a reply held, the reply goes out, then
// the attempt reports false, for the runtime to wait for the next request without
// trying read(2), within heldWaitBound. When the socket takes only part of it, the
// rest is left in r.rest for readInto to write under the write deadline.
func (r *fdIO) sendHeld(fd uintptr) bool {
	h, n := r.takeHeld(true, false)
	if h == nil {
		return r.tryRead(fd)
	}
	off := 0
	for off < n {
		k, err := RawWrite(int(fd), (*h)[off:n])
		if k > 0 {
			off += k
		}
		switch err {
		case nil, syscall.EINTR:
			continue
		case syscall.EAGAIN:
			r.rest, r.restOff, r.restN = h, uint16(off), uint16(n)
			return true
		}
		bufs.Put(h)
		r.n, r.err, r.sendFailed = 0, err, true
		return true
	}
	bufs.Put(h)
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
	_, err := r.write((*h)[off:n])
	bufs.Put(h)
	return err
}

// writeOut is the connection's Write: held when it belongs to an armed reply and fits,
// written now otherwise, after what was held before it.
func (r *fdIO) writeOut(b []byte) (int, error) {
	prev, prevN, held := r.holdWrite(b)
	if prev != nil {
		_, err := r.write((*prev)[:prevN])
		bufs.Put(prev)
		if err != nil {
			return 0, err
		}
	}
	if held {
		return len(b), nil
	}
	return r.write(b)
}

// pending reports a reply held.
func (r *fdIO) pending() bool {
	r.hmu.Lock()
	defer r.hmu.Unlock()
	return r.held != nil
}
