// Package readahead wraps a listener so that a small read on one of its connections
// reads what is there at once, into a pooled buffer held only while it has bytes.
//
// Why: fasthttp, with ReduceMemoryUsage (the router's default, so that an idle keep-alive
// connection holds no read buffer), waits for the next request by reading one byte, then
// reads the rest of the request with a second system call. On a busy router that second
// read is one system call in five or six of a forwarded call. Reading here into a buffer
// taken from a pool only once the socket has data (the read is tried, and on EAGAIN the
// buffer goes back before the goroutine parks) keeps both: an idle connection holds no
// buffer, and a request costs one read.
//
// The same connections keep their deadlines until an operation has to wait
// (Deadlines): fasthttp sets three or four per request, and a request that is in the
// socket already and a response that fits in its buffer never wait. And a complete
// reply may be held and sent from the read of the next request (ReplyHolder), which
// then skips a read(2) that could only find nothing.
package readahead

import (
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// bufSize is the pooled buffer's size: a typical MCP POST (headers and body) fits. A
// read of at least this much goes straight to the socket.
const bufSize = 4096

var bufs = sync.Pool{New: func() any {
	b := make([]byte, bufSize)
	return &b
}}

// Listen wraps ln: its connections read ahead (see the package doc). A connection that
// does not expose its file descriptor is returned as it is.
func Listen(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return wrap(c), nil
}

// conn is a connection whose small reads read ahead and whose deadlines reach the
// runtime only when an operation waits (Deadlines). Like a net.Conn, it takes one
// reader and one writer at a time; Close and the other methods may be called
// concurrently with them. A buffer still held when the connection closes is left to
// the garbage collector.
type conn struct {
	net.Conn
	raw  rawIO
	dl   Deadlines
	buf  *[]byte // bytes read ahead, buf[r:w]; nil when none
	r, w int32   // within bufSize
}

// rawIO reads and writes the socket directly, waiting through the runtime's poller
// under the conn's Deadlines.
type rawIO interface {
	// readInto reads as soon as the socket has bytes into a buffer from bufs that it
	// returns (the caller puts it back); a buffer is held only while the socket has
	// bytes for it. io.EOF at the end of the stream.
	readInto() (b *[]byte, n int, err error)
	// write writes b whole, as net.Conn's Write.
	write(b []byte) (int, error)
	// The held reply (ReplyHolder): holdReply arms it; pipelined makes what is held
	// wait for the next reply, within a bound; writeOut is Write, holding what belongs
	// to an armed reply; readInto sends what is held first; flushHeld sends it now,
	// disarm ending the reply, batchToo a pipelined batch as well (otherwise it stays
	// for the next write); pending reports one held.
	holdReply()
	pipelined(bound time.Duration) error
	writeOut(b []byte) (int, error)
	flushHeld(disarm, batchToo bool) error
	pending() bool
	// writeNow writes what the socket takes at once (NowWriter).
	writeNow(b []byte) (int, error)
	// rawConn is the descriptor's syscall.RawConn, one for the connection: each
	// SyscallConn of a net.Conn makes another.
	rawConn() syscall.RawConn
}

// SyscallConn gives the descriptor of the wrapped connection, for watching it (the
// close watcher) and waiting through it under the deadlines set so far. A reply held
// goes out first; a pipelined batch stays held for the next Write (ReplyHolder): write
// to the connection with Write or WriteNow, not to the descriptor.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if err := c.flushHeld(false); err != nil {
		return nil, err
	}
	if err := c.applyDeadlines(); err != nil {
		return nil, err
	}
	return c.raw.rawConn(), nil
}

func (c *conn) applyDeadlines() error {
	if err := c.dl.Apply(Read); err != nil {
		return err
	}
	return c.dl.Apply(Write)
}

// SetDeadline implements net.Conn (see Deadlines). A reply held goes out first: the
// connection is changing hands (fasthttp's hijack) or its next wait is another's. A
// pipelined batch stays, for the new owner's first write to send with its own bytes
// (a hijacked stream's head), within the batch's bound.
func (c *conn) SetDeadline(t time.Time) error {
	if err := c.flushHeld(false); err != nil {
		return err
	}
	return c.dl.SetDeadline(t)
}

// SetReadDeadline implements net.Conn (see Deadlines). A reply held stays held: the
// read that waits under this deadline sends it.
func (c *conn) SetReadDeadline(t time.Time) error { return c.dl.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn (see Deadlines). A reply held goes out first,
// under the deadline it was written under; a reply announced and not written yet
// stays announced (fasthttp sets the reply's write deadline after its handler), and a
// pipelined batch stays held, for the reply being made to join it.
func (c *conn) SetWriteDeadline(t time.Time) error {
	if err := c.raw.flushHeld(false, false); err != nil {
		return c.opError("write", err)
	}
	return c.dl.SetWriteDeadline(t)
}

// Write implements net.Conn: the write deadline reaches the runtime only if the
// socket's buffer is full. The writes of a reply HoldReply announced are held (see
// there).
func (c *conn) Write(b []byte) (int, error) {
	n, err := c.raw.writeOut(b)
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// Close implements net.Conn: a reply held goes out first, under the write deadline in
// force (as fasthttp's own flush of it would have).
func (c *conn) Close() error {
	_ = c.flushHeld(true) // failed: the connection ends now all the same
	return c.Conn.Close()
}

// flushHeld sends a reply held and ends it; a pipelined batch too when batchToo.
func (c *conn) flushHeld(batchToo bool) error {
	if err := c.raw.flushHeld(true, batchToo); err != nil {
		return c.opError("write", err)
	}
	return nil
}

func (c *conn) Read(p []byte) (int, error) {
	if c.buf != nil {
		n := copy(p, (*c.buf)[c.r:c.w])
		c.r += int32(n)
		if c.r == c.w {
			bufs.Put(c.buf)
			c.buf = nil
		}
		return n, nil
	}
	if len(p) == 0 || len(p) >= bufSize && !c.raw.pending() {
		if err := c.dl.Apply(Read); err != nil {
			return 0, err
		}
		return c.Conn.Read(p)
	}
	b, n, err := c.raw.readInto()
	if err != nil {
		return 0, c.opError("read", err)
	}
	k := copy(p, (*b)[:n])
	if k < n {
		c.buf, c.r, c.w = b, int32(k), int32(n)
	} else {
		bufs.Put(b)
	}
	return k, nil
}

// opError names an error of op ("read", "write") as net.Conn's methods do
// (*net.OpError), so that callers that test for timeouts, closed connections and resets
// see what they expect; io.EOF stays itself.
func (c *conn) opError(op string, err error) error {
	if err == nil || err == io.EOF { // the raw reader returns io.EOF itself
		return err
	}
	if _, ok := err.(*net.OpError); ok {
		return err
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
