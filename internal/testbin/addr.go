package testbin

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/mcprouter/mcprouter/internal/testwait"
)

// FreeAddr returns a loopback address (host:port) that the kernel just handed out and
// nobody holds any more, for a process whose configuration must name its own address
// before it starts (a router whose auth.resource is its URL). Another process could
// take the port in between; on a test machine that is rare enough to accept. The
// kernel may hand the same port out again once it is released, so FreeAddr never
// returns a port it returned before in this process: two servers of one test (the
// nodes of a NATS cluster) were given one port, and one of them could not start.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	handed.mu.Lock()
	defer handed.mu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handed.ports[addr] {
			handed.ports[addr] = true
			return addr
		}
	}
	tb.Fatal("testbin: no loopback port that was not handed out before")
	return ""
}

// handed is every address FreeAddr returned in this process.
var handed = struct {
	mu    sync.Mutex
	ports map[string]bool
}{ports: map[string]bool{}}

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
