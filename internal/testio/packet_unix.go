//go:build unix

package testio

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// PacketPair returns the two ends of a SOCK_SEQPACKET socket pair, closed when the
// test ends (skipped where there is none): each write(2) on one end is one packet that
// a read on the other returns whole and alone, so that a test counts a server's writes
// exactly, without timing anything.
func PacketPair(tb testing.TB) (a, b *net.UnixConn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err != nil {
		tb.Skipf("no SOCK_SEQPACKET socket pair here: %v", err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "packet")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			tb.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		tb.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}
