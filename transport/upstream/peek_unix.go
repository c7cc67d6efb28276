//go:build unix

package upstream

import (
	"net"
	"syscall"

	"github.com/mcprouter/mcprouter/transport/readahead"
)

// peerClosed reports whether the peer of an idle connection has closed it (a FIN or a
// reset is waiting), without consuming anything: a non-blocking MSG_PEEK read.
func peerClosed(c net.Conn) bool {
	raw, ok := readahead.RawConnOf(c)
	if !ok {
		return false
	}
	closed := false
	var buf [1]byte
	_ = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || err == syscall.ECONNRESET
		return true // never wait: this is a probe
	})
	return closed
}
