//go:build unix

package upstream

import (
	"net"
	"syscall"
	"unsafe"

	"github.com/mcprouter/mcprouter/transport/readahead"
)

// peerClosed reports whether the peer of an idle connection has closed it (a FIN or a
// reset is waiting), without consuming anything: a non-blocking MSG_PEEK read.
func peerClosed(c net.Conn) bool {
	raw, ok := readahead.RawConnOf(c)
	if !ok {
		return false
	}
	var p peek
	_ = raw.Read(p.try)
	return p.closed
}

// peek is peerClosed's probe. recvfrom(2) goes by syscall.RawSyscall6: the socket is
// non-blocking and MSG_DONTWAIT, so the call never waits, and a call in the runtime's
// system call state wakes sysmon when it sleeps (see rawIO). Nothing is read into
// memory the program uses, so the race detector has nothing to learn from a plain call.
type peek struct {
	buf    [1]byte
	closed bool
}

func (p *peek) try(fd uintptr) bool {
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.buf[0])), 1,
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	p.closed = n == 0 && e == 0 || e == syscall.ECONNRESET
	return true // never wait: this is a probe
}
