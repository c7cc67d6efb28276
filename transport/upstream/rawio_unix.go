//go:build unix

package upstream

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/mcprouter/mcprouter/transport/readahead"
)

// rawIO is a pipelined connection read and written with system calls the runtime does
// not see (readahead.RawRead and RawWrite), waiting for the socket through the
// runtime's poller (syscall.RawConn) under the deadlines set on the connection.
//
// Why: the pipeline's writer and reader goroutines used the connection's plain Write and
// Read, each a system call in the runtime's system call state, and one that finds sysmon
// asleep wakes it; sysmon then polls every 20 µs for a millisecond or more, each poll a
// context switch on a CPU the router shares with its backend. At 12,000 calls/s those
// calls were 0.15 per forwarded call and sysmon 2-4% of the router's CPU
// (bench/RESULTS.md, "compare notes", OPENCPU). The pooled connections' request and reply
// already go this way (sendRead), and the listener's connections (transport/readahead).
//
// Like a net.Conn it takes one reader and one writer at a time, concurrently; Close
// and the deadlines are the connection's own.
type rawIO struct {
	net.Conn
	rc   syscall.RawConn
	r, w rawOp
}

// rawOp is one direction's operation in progress: what is left to move, how much
// moved, the system call's error. Its attempt function is bound once, so that an
// operation allocates nothing.
type rawOp struct {
	b   []byte
	n   int
	err error
	try func(fd uintptr) bool
}

// newRawIO returns c read and written raw, or c itself when its descriptor cannot be
// had.
func newRawIO(c net.Conn) net.Conn {
	rc, ok := readahead.RawConnOf(c)
	if !ok {
		return c
	}
	x := &rawIO{Conn: c, rc: rc}
	x.r.try, x.w.try = x.r.read, x.w.write
	return x
}

// Read implements net.Conn.
func (c *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.do(&c.r, p, false)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}

// Write implements net.Conn: b whole, or an error with what went out.
func (c *rawIO) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return c.do(&c.w, b, true)
}

// do runs one operation of o's direction on b through the poller: what moved, and the
// poller's error (a deadline, a closed connection: already a *net.OpError) or the
// system call's.
func (c *rawIO) do(o *rawOp, b []byte, write bool) (int, error) {
	o.b, o.n, o.err = b, 0, nil
	var err error
	op := "read"
	if write {
		op = "write"
		err = c.rc.Write(o.try)
	} else {
		err = c.rc.Read(o.try)
	}
	n, oerr := o.n, o.err
	o.b, o.err = nil, nil
	switch {
	case err != nil:
		return n, err
	case oerr != nil:
		return n, c.opError(op, oerr)
	}
	return n, nil
}

// read is a read's attempt: false, to wait for the socket, when it has nothing yet.
func (o *rawOp) read(fd uintptr) bool {
	for {
		n, err := readahead.RawRead(int(fd), o.b)
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case nil:
			o.n = n
		default:
			o.err = err
		}
		return true
	}
}

// write is a write's attempt: false, to wait for room, when the socket is full.
func (o *rawOp) write(fd uintptr) bool {
	for len(o.b) > 0 {
		n, err := readahead.RawWrite(int(fd), o.b)
		if n > 0 {
			o.b, o.n = o.b[n:], o.n+n
		}
		switch err {
		case nil, syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		o.err = err
		return true
	}
	return true
}

// opError names a system call's error as net.Conn's methods do (*net.OpError), so that
// the pipeline's tests for resets and broken pipes (isStaleConn) see what they expect.
func (c *rawIO) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(),
		Err: os.NewSyscallError(op, err)}
}
