//go:build unix

package readahead

import (
	"io"
	"net"
	"os"
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
	r := &fdReader{rc: rc}
	r.try = r.tryRead
	return &conn{Conn: c, raw: r}
}

// fdReader reads through the runtime's poller: syscall.RawConn.Read calls try until it
// reports done, parking the goroutine in between until the socket is readable, within
// the connection's read deadline. try is tryRead bound once per connection and the
// attempt's outcome is kept in fields, so that a read allocates nothing (a closure per
// read would escape into RawConn.Read).
type fdReader struct {
	rc  syscall.RawConn
	try func(fd uintptr) bool
	// The last attempt's outcome: the buffer it filled (nil when none), the count and
	// the error of read(2).
	b   *[]byte
	n   int
	err error
}

func (r *fdReader) readInto() (*[]byte, int, error) {
	err := r.rc.Read(r.try)
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
func (r *fdReader) tryRead(fd uintptr) bool {
	b := bufs.Get().(*[]byte)
	for {
		r.n, r.err = syscall.Read(int(fd), *b)
		if r.err != syscall.EINTR {
			break
		}
	}
	if r.err == syscall.EAGAIN {
		bufs.Put(b)
		return false
	}
	r.b = b
	return true
}
