package testbin

import (
	"net"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
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

// WaitListening waits up to d until addr accepts TCP connections, for a process that
// logs its address before it listens (so its log line is no ready event).
func WaitListening(tb testing.TB, addr string, d time.Duration) {
	tb.Helper()
	testwait.For(tb, addr+" listening", d, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}
