//go:build !unix

package upstream

import (
	"net"

	"github.com/mcprouter/mcprouter/transport/readahead"
)

// sendRead holds nothing back where the socket cannot be read directly: every Write
// goes out at once (see sendread_unix.go).
type sendRead struct{}

func (s *sendRead) init(net.Conn, *readahead.Deadlines)    {}
func (s *sendRead) pending() bool                          { return false }
func (s *sendRead) hold([]byte) bool                       { return false }
func (s *sendRead) drop()                                  {}
func (s *sendRead) flush(net.Conn) error                   { return nil }
func (s *sendRead) read(c net.Conn, p []byte) (int, error) { return c.Read(p) }
