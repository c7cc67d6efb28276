//go:build unix

package app

import (
	"net"
	"syscall"
	"testing"
)

// TestListenMCPNoKeepAlive: the MCP listener's connections come without TCP
// keep-alive (listenMCP says why).
func TestListenMCPNoKeepAlive(t *testing.T) {
	ln, err := listenMCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	on := -1
	if cerr := rc.Control(func(fd uintptr) {
		on, err = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
	}); cerr != nil || err != nil {
		t.Fatal(cerr, err)
	}
	if on != 0 {
		t.Errorf("SO_KEEPALIVE is %d on an accepted connection, want 0", on)
	}
}
