package testbin

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address (host:port) that the kernel just handed out and
// nobody holds any more, for a process whose configuration must name its own address
// before it starts (a router whose auth.resource is its URL). Another process could
// take the port in between; on a test machine that is rare enough to accept.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
