package client

import "syscall"

// ipBindAddressNoPort is Linux's IP_BIND_ADDRESS_NO_PORT (since 4.2; the syscall
// package does not name it).
const ipBindAddressNoPort = 24

// bindAtConnect is the Control of a dialer bound to a source address: it asks the
// kernel to choose the port at connect rather than at bind. A bind to port 0 has to
// find a port free for every destination, a search through the address's bound ports
// that grows with the connections held from it (tens of thousands here); at connect
// the port need only make the four-tuple unique. A kernel without the option ignores
// the failure and binds as before.
func bindAtConnect(_, _ string, c syscall.RawConn) error {
	return c.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
}
