//go:build unix

package upstream

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/mcprouter/mcprouter/transport/readahead"
)

// sendRead holds a pooled connection's request back from Write and sends it from the
// Read that waits for its reply, inside one syscall.RawConn.Read.
//
// Why: a plain Read right after a Write tries read(2) first, and on a backend
// connection that read nearly always finds nothing (the reply needs the backend to run)
// and returns EAGAIN before the goroutine parks: one wasted system call per forwarded
// call (bench/RESULTS.md, "Syscalls per forwarded call"). Skipping that first read is
// only safe when nothing can have arrived unseen: RawConn.Read forgets the socket's
// earlier readiness when it starts, so the request is written from inside it, after
// that point. Whatever the backend answers then wakes the wait, and an answer that
// arrives during the write itself is found by the wait at once.
//
// It relies on fasthttp's client using a pooled connection from one goroutine at a
// time, every request's Write followed by the Read of its reply (pipelined connections
// bypass trackedConn). A connection whose descriptor cannot be had sends at once.
type sendRead struct {
	rc  syscall.RawConn // nil: no held writes
	dl  *readahead.Deadlines
	try func(fd uintptr) bool
	// buf holds the request Write returned for while held reports one not sent yet;
	// off is how much of it the socket took. buf stays with the connection from
	// request to request (at most maxHeld bytes): a pooled buffer per call cost a pool
	// get and put on every forwarded call.
	buf  []byte
	held bool
	off  int
	// The current Read's attempt: the caller's buffer, then read(2)'s outcome; wrote
	// reports that held went out whole, short that the socket took only part of it.
	p      []byte
	n      int
	err    error
	wrote  bool
	short  bool
	waited bool // the read deadline was handed over for a wait (woke ends it)
}

// maxHeld bounds a request held back: larger writes (a large body) go out at once.
const maxHeld = 4 << 10

func (s *sendRead) init(c net.Conn, dl *readahead.Deadlines) {
	s.dl = dl
	rc, ok := readahead.RawConnOf(c)
	if !ok {
		return
	}
	s.rc = rc
	s.try = s.attempt
}

// pending reports a request held back and not sent yet.
func (s *sendRead) pending() bool { return s.held }

// hold keeps a copy of b for the next read to send, and reports whether it did; a
// request already held must have been flushed first.
func (s *sendRead) hold(b []byte) bool {
	if s.rc == nil || len(b) > maxHeld || s.held {
		return false
	}
	s.buf = append(s.buf[:0], b...)
	s.held, s.off = true, 0
	return true
}

// drop forgets the held request; its buffer stays for the next one.
func (s *sendRead) drop() {
	s.held, s.off = false, 0
}

// flush sends the held request through c, as a plain Write would have.
func (s *sendRead) flush(c net.Conn) error {
	err := s.dl.Apply(readahead.Write)
	if err == nil {
		_, err = c.Write(s.buf[s.off:])
	}
	s.drop()
	return err
}

// read sends the held request and reads its reply into p, through c's descriptor. The
// deadlines hold: the write is non-blocking (the rest of a request the socket did not
// take goes out with c.Write), the wait for the reply ends at the read deadline, which
// reaches the runtime only then.
func (s *sendRead) read(c net.Conn, p []byte) (int, error) {
	s.p, s.n, s.err, s.wrote, s.short = p, 0, nil, false, false
	err := s.rc.Read(s.try)
	s.woke()
	// A timeout from a deadline the runtime had but no longer wanted: one that passed
	// since the last exchange refused the read before the request went out, or the
	// earlier deadline the wait kept (readahead.Deadlines) ended it before the reply.
	// Then again under the wanted one: the request once, the reply's read after it.
	for err != nil && s.dl.Stale(readahead.Read, err) {
		err = s.rc.Read(s.try)
		s.woke()
	}
	n, rerr, wrote, short := s.n, s.err, s.wrote, s.short
	s.p, s.err = nil, nil
	switch {
	case short:
		if err := s.flush(c); err != nil {
			return 0, err
		}
		return c.Read(p)
	case !wrote:
		s.drop()
		if err == nil {
			err = opError("write", c, rerr)
		}
		return 0, err
	}
	switch {
	case err != nil:
		return 0, err // the deadline, a closed connection: already a *net.OpError
	case rerr != nil:
		return 0, opError("read", c, rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// attempt is RawConn.Read's callback: first the held request goes out, then it reports
// false so that the runtime waits for the reply without trying read(2) first; later
// calls read.
func (s *sendRead) attempt(fd uintptr) bool {
	if !s.wrote {
		b := s.buf[s.off:]
		n, err := readahead.RawWrite(int(fd), b)
		for err == syscall.EINTR {
			n, err = readahead.RawWrite(int(fd), b)
		}
		if n > 0 {
			s.off += n
		}
		switch {
		case err == syscall.EAGAIN || err == nil && s.off < len(s.buf):
			s.short = true // the rest is c.Write's, under the write deadline
			return true
		case err != nil:
			s.err = err
			return true
		}
		s.drop()
		s.wrote = true
		return s.wait()
	}
	n, err := readahead.RawRead(int(fd), s.p)
	for err == syscall.EINTR {
		n, err = readahead.RawRead(int(fd), s.p)
	}
	if err == syscall.EAGAIN {
		return s.wait()
	}
	s.n, s.err = n, err
	return true
}

// wait hands the read deadline to the runtime and reports false, for the runtime to
// wait for the reply; true, with the error, when the deadline cannot be set.
func (s *sendRead) wait() bool {
	s.waited = true
	if err := s.dl.BeforeWait(readahead.Read); err != nil {
		s.err = err
		return true
	}
	return false
}

// opError names a system call's error the way net.Conn's methods do.
func opError(op string, c net.Conn, err error) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, err)}
}

// woke ends the wait wait began, if it did.
func (s *sendRead) woke() {
	if s.waited {
		s.waited = false
		s.dl.Woke(readahead.Read)
	}
}
