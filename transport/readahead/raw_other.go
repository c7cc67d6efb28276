//go:build !unix

package readahead

import "net"

// wrap leaves connections as they are where the socket cannot be read directly.
func wrap(c net.Conn) net.Conn { return c }
