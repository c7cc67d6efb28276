//go:build !unix

package readahead

import (
	"errors"
	"io"
	"net"
)

// wrap leaves connections as they are where the socket cannot be read directly.
func wrap(c net.Conn) net.Conn { return c }

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
