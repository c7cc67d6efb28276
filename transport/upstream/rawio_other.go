//go:build !unix

package upstream

import "net"

// newRawIO returns c: without a descriptor to read directly, a pipelined connection
// uses its own Read and Write (see rawio_unix.go).
func newRawIO(c net.Conn) net.Conn { return c }
