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
	return &conn{Conn: c, raw: fdReader{rc}}
}

// fdReader reads through the runtime's poller: syscall.RawConn.Read calls f until it
// reports done, parking the goroutine in between until the socket is readable, within
// the connection's read deadline.
type fdReader struct{ rc syscall.RawConn }

func (r fdReader) readInto(take func() []byte, give func()) (int, error) {
	var n int
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		b := take()
		for {
			n, rerr = syscall.Read(int(fd), b)
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			give() // nothing there: park without holding the buffer
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return 0, err // deadline, closed: already a *net.OpError
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
