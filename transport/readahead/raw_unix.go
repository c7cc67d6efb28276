//go:build unix

package readahead

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// wrap returns c reading ahead, or c itself when it has no file descriptor to read.
func wrap(c net.Conn) net.Conn {
	rc, ok := RawConnOf(c)
	if !ok {
		return c
	}
	a := &connFD{conn: conn{Conn: c}}
	w, r := &a.conn, &a.fd
	w.dl.Init(c)
	r.rc, r.dl = rc, &w.dl
	r.tryR, r.tryW = r.tryReadFirst, r.tryWrite
	w.raw = r
	return w
}

// connFD is a connection and its raw reader, allocated together: every connection has
// both for its whole life, idle ones too, and together they take the 288-byte size
// class where apart they took 144 and 160.
type connFD struct {
	conn
	fd fdIO
}

// fdIO reads and writes through the runtime's poller: syscall.RawConn.Read and Write
// call try until it reports done, parking the goroutine in between until the socket is
// ready, within the deadline, which dl hands over only then. The try functions are
// bound once per connection and an attempt's outcome is kept in fields, so that an
// operation allocates nothing (a closure per call would escape into RawConn).
//
// Fields are ordered, and counts bounded by the pool's buffer size kept in 32 or 16
// bits, so that fdIO takes the 160-byte size class: every connection has one, idle
// ones too.
type fdIO struct {
	rc         syscall.RawConn
	dl         *Deadlines
	tryR, tryW func(fd uintptr) bool
	// The last read attempt's outcome: the buffer it filled (nil when none), the
	// count and the error of read(2), or of the held reply's write(2) when
	// sendFailed.
	b   *[]byte
	err error
	// The held reply (hold_unix.go), under hmu: armed, the writes up to the next read
	// are held (those that fit, in held.b[:heldN]); batch, what is held waits for a
	// pipelined request's reply, within the bound of held's timer; noSkip, the client
	// was seen to send before it had its reply, so no read is skipped any more.
	held *heldBuf
	// The read that sent the held reply: the part the socket did not take
	// (rest.b[restOff:restN]).
	rest *heldBuf
	// The write in progress, one at a time (wmu: writers may be concurrent, as
	// net.Conn allows): what is left to write, write(2)'s error.
	wb   []byte
	werr error
	hmu  sync.Mutex
	wmu  sync.Mutex

	n                     int32  // read(2)'s count: at most bufSize, or -1
	heldN, restOff, restN uint16 // offsets in a buffer of bufSize (heldCount)
	sendFailed            bool
	armed, batch, noSkip  bool
	// sendFirst: the read's attempt sends a held reply first (tryReadFirst); bounded,
	// the wait after it ended at heldWaitBound; afterBound, the attempt after that
	// bound, which tells whether bytes were waiting.
	sendFirst, bounded, afterBound bool
	// waited: an attempt handed a deadline over (Deadlines.BeforeWait), so Woke must
	// follow; rwaited for the read, wwaited for the write.
	rwaited, wwaited bool
	nowait           bool // the write in progress is writeNow's; under wmu
}

// read is one RawConn.Read of the socket: its attempts send a held reply first when
// sendFirst.
func (r *fdIO) read(sendFirst bool) error {
	r.sendFirst = sendFirst
	err := r.rc.Read(r.tryR)
	r.wokeRead()
	return err
}

func (r *fdIO) rawConn() syscall.RawConn { return r.rc }

// tryReadFirst is a read's attempt: sendHeld or tryRead (see read).
func (r *fdIO) tryReadFirst(fd uintptr) bool {
	if r.sendFirst {
		return r.sendHeld(fd)
	}
	return r.tryRead(fd)
}

func (r *fdIO) readInto() (*[]byte, int, error) {
	err := r.read(true) // a held reply goes out first
	for {
		if r.rest != nil {
			// The socket took part of the held reply: the rest under the write
			// deadline, then the read.
			if err := r.sendRest(); err != nil {
				return nil, 0, err
			}
			err = r.read(false)
			continue
		}
		if err == nil || !r.dl.Stale(Read, err) {
			break
		}
		// The runtime refused the read before any attempt (a deadline it had that
		// passed: the last wait's bound, most often), or the wait that skipped its
		// read reached its bound: a reply still held goes out with this attempt.
		r.afterBound, r.bounded = r.bounded, false
		err = r.read(true)
	}
	r.bounded, r.afterBound = false, false
	b, n, rerr, sendFailed := r.b, int(r.n), r.err, r.sendFailed
	r.b, r.err, r.sendFailed = nil, nil, false
	if err == nil && rerr == nil && n > 0 {
		return b, n, nil
	}
	if b != nil {
		bufs.Put(b)
	}
	switch {
	case err != nil:
		return nil, 0, err // deadline, closed: already a *net.OpError
	case sendFailed:
		return nil, 0, os.NewSyscallError("write", rerr)
	case rerr != nil:
		return nil, 0, os.NewSyscallError("read", rerr)
	}
	return nil, 0, io.EOF
}

// tryRead is one attempt: a pooled buffer is taken only for the read itself and goes
// back when the socket had nothing yet, before the goroutine parks.
func (r *fdIO) tryRead(fd uintptr) bool {
	b := bufs.Get().(*[]byte)
	for {
		var n int
		n, r.err = RawRead(int(fd), *b)
		r.n = int32(n) // at most bufSize, or -1
		if r.err != syscall.EINTR {
			break
		}
	}
	if r.afterBound {
		// A wait that skipped its read reached its bound: bytes found at once had
		// arrived before the reply went out (a pipelining or half-closing client).
		r.afterBound = false
		if r.err != syscall.EAGAIN {
			r.hmu.Lock()
			r.noSkip = true
			r.hmu.Unlock()
		}
	}
	if r.err == syscall.EAGAIN {
		bufs.Put(b)
		r.rwaited = true
		if err := r.dl.BeforeWait(Read); err != nil {
			r.n, r.err = 0, err
			return true
		}
		return false
	}
	r.b = b
	return true
}

func (r *fdIO) write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	return r.writeLocked(b)
}

// writeNow writes what the socket takes of b at once, without waiting for room: a
// full socket is no error. A reply held (which goes out before anything written after
// it) makes it write nothing: the caller's next Write sends both in order.
func (r *fdIO) writeNow(b []byte) (int, error) {
	if len(b) == 0 || r.pending() {
		return 0, nil
	}
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.nowait = true
	n, err := r.writeLocked(b)
	r.nowait = false
	return n, err
}

// writeLocked is write under wmu.
func (r *fdIO) writeLocked(b []byte) (int, error) {
	r.wb, r.werr = b, nil
	err := r.rc.Write(r.tryW)
	r.wokeWrite()
	for err != nil && r.dl.Stale(Write, err) {
		err = r.rc.Write(r.tryW)
		r.wokeWrite()
	}
	n, werr := len(b)-len(r.wb), r.werr
	r.wb, r.werr = nil, nil
	switch {
	case err != nil:
		return n, err
	case werr != nil:
		return n, os.NewSyscallError("write", werr)
	}
	return n, nil
}

// tryWrite writes what is left; when the socket's buffer is full it hands the write
// deadline over and reports false, so that the runtime waits for room (done at once
// for writeNow).
func (r *fdIO) tryWrite(fd uintptr) bool {
	for len(r.wb) > 0 {
		n, err := RawWrite(int(fd), r.wb)
		if n > 0 {
			r.wb = r.wb[n:]
		}
		switch err {
		case nil, syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if r.nowait {
				return true
			}
			r.wwaited = true
			if err := r.dl.BeforeWait(Write); err != nil {
				r.werr = err
				return true
			}
			return false
		}
		r.werr = err
		return true
	}
	return true
}

// wokeRead and wokeWrite end a wait an attempt began, if one did.
func (r *fdIO) wokeRead() {
	if r.rwaited {
		r.rwaited = false
		r.dl.Woke(Read)
	}
}

func (r *fdIO) wokeWrite() {
	if r.wwaited {
		r.wwaited = false
		r.dl.Woke(Write)
	}
}
