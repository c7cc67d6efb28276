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
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	w := &conn{Conn: c}
	w.dl.Init(c)
	r := &fdIO{rc: rc, dl: &w.dl}
	r.tryR, r.tryW = r.tryRead, r.tryWrite
	w.raw = r
	return w
}

// fdIO reads and writes through the runtime's poller: syscall.RawConn.Read and Write
// call try until it reports done, parking the goroutine in between until the socket is
// ready, within the deadline, which dl hands over only then. The try functions are
// bound once per connection and an attempt's outcome is kept in fields, so that an
// operation allocates nothing (a closure per call would escape into RawConn).
type fdIO struct {
	rc         syscall.RawConn
	dl         *Deadlines
	tryR, tryW func(fd uintptr) bool
	// The last read attempt's outcome: the buffer it filled (nil when none), the
	// count and the error of read(2).
	b   *[]byte
	n   int
	err error
	// waited: an attempt handed a deadline over (Deadlines.BeforeWait), so Woke must
	// follow; rwaited for the read, wwaited for the write.
	rwaited, wwaited bool
	// The write in progress, one at a time (wmu: writers may be concurrent, as
	// net.Conn allows): what to write, what was written, write(2)'s error.
	wmu  sync.Mutex
	wb   []byte
	wn   int
	werr error
}

func (r *fdIO) readInto() (*[]byte, int, error) {
	err := r.rc.Read(r.tryR)
	r.wokeRead()
	for err != nil && r.dl.Stale(Read, err) {
		err = r.rc.Read(r.tryR)
		r.wokeRead()
	}
	b, n, rerr := r.b, r.n, r.err
	r.b, r.err = nil, nil
	if err == nil && rerr == nil && n > 0 {
		return b, n, nil
	}
	if b != nil {
		bufs.Put(b)
	}
	switch {
	case err != nil:
		return nil, 0, err // deadline, closed: already a *net.OpError
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
		r.n, r.err = RawRead(int(fd), *b)
		if r.err != syscall.EINTR {
			break
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
	r.wb, r.wn, r.werr = b, 0, nil
	err := r.rc.Write(r.tryW)
	r.wokeWrite()
	for err != nil && r.dl.Stale(Write, err) {
		err = r.rc.Write(r.tryW)
		r.wokeWrite()
	}
	n, werr := r.wn, r.werr
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
// deadline over and reports false, so that the runtime waits for room.
func (r *fdIO) tryWrite(fd uintptr) bool {
	for r.wn < len(r.wb) {
		n, err := RawWrite(int(fd), r.wb[r.wn:])
		if n > 0 {
			r.wn += n
		}
		switch err {
		case nil, syscall.EINTR:
			continue
		case syscall.EAGAIN:
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
