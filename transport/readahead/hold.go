package readahead

import (
	"net"
	"reflect"
	"sync/atomic"
	"syscall"
	"time"
)

// A ReplyHolder is a connection from Listen whose replies can be held (HolderOf).
//
// HoldReply tells it that what is written to it from now to its next read is one
// complete reply, after which the connection waits for another request read by the
// same goroutine: the reply's writes (up to 4 KiB) are held and sent from that read,
// which then waits for the request without first trying a read that can only find
// nothing (hold_unix.go says why and how). Call it only for a reply that is not a
// stream, on a connection neither hijacked nor closing. What is held goes out before
// anything else happens to the connection: another write (in the same write(2) when
// both fit), Close, SetDeadline, SetWriteDeadline or SyscallConn, except that a
// pipelined batch stays through the last three.
//
// Pipelined, called before a request's handler, says that the request may have been
// read before the reply held now went out (a pipelining client: a reply is held at
// that point only then). That reply then waits for this request's, and the replies of
// a pipelined run leave together: from the read that waits for the next request, or
// with the first write of a hijacked stream (its head). A handler may be slow or
// block: what is held waits at most bound from the run's first request on, after
// which a timer sends it (without waiting for room in the socket; what the socket
// does not take goes out before anything else, as a held reply does). bound <= 0
// sends what is held at once: each reply before the next request is handled.
type ReplyHolder interface {
	HoldReply()
	Pipelined(bound time.Duration) error
}

// A NowWriter is a connection from Listen that writes without waiting (NowWriterOf).
//
// WriteNow writes what the socket takes of b at once, with one non-blocking write(2)
// (or a few, interrupted), and returns how much it wrote: a full socket is no error,
// nor a reply held (it writes nothing then: the next Write sends the held reply, then
// what WriteNow left). An error means the connection is unusable. It may be called
// concurrently with Write, as writes may.
//
// Why: a held stream (an SSE stream that fan-out writes to from the publishing
// goroutine) writes each event so; here the connection's one attempt function and
// deadlines serve it, where the stream kept a function and a RawConn of its own.
type NowWriter interface {
	WriteNow(b []byte) (int, error)
}

// NowWriterOf returns c, a connection from Listen, as a NowWriter, seeing through a
// wrapper (inner); nil for any other connection.
func NowWriterOf(c net.Conn) NowWriter {
	if w := inner(c); w != nil {
		return w
	}
	return nil
}

// WriteNow implements NowWriter.
func (c *conn) WriteNow(b []byte) (int, error) {
	n, err := c.raw.writeNow(b)
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// HolderOf returns c, a connection from Listen, as a ReplyHolder, seeing through a
// wrapper (inner); nil for any other connection.
func HolderOf(c net.Conn) ReplyHolder {
	if w := inner(c); w != nil {
		return w
	}
	return nil
}

// SyscallConnOf returns c's descriptor holder: c itself when it is a syscall.Conn, or
// the connection from Listen that a wrapper embeds (inner). The wrapper stays the one
// to close: fasthttp's per-address wrapper counts its Close.
func SyscallConnOf(c net.Conn) (syscall.Conn, bool) {
	if sc, ok := c.(syscall.Conn); ok {
		return sc, true
	}
	if w := inner(c); w != nil {
		return w, true
	}
	return nil, false
}

// RawConnOf is the raw connection of c's descriptor (SyscallConnOf's SyscallConn), for
// the close watcher, raw reads and writes, and the backend connections' probes (any
// connection: a dialed one is its own syscall.Conn); false when c has none or cannot
// give it.
func RawConnOf(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := SyscallConnOf(c)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	return rc, true
}

// inner returns c, a connection from Listen, or the one a wrapper embeds as its first
// field: fasthttp's per-address connection count (Server.MaxConnsPerIP, the router's
// connections.max_per_address, on by default) wraps every connection so, and its
// wrapper gives neither the descriptor nor the held reply. nil for any other
// connection.
//
// The edge asks for every request (HolderOf), so a wrapper type once found to embed a
// net.Conn first is remembered (wrapperType) and its field read without walking the
// type again: the walk by reflection was 0.3% of a forwarded call's CPU
// (bench/RESULTS.md, "compare notes", OPENCPU).
func inner(c net.Conn) *conn {
	if w, ok := c.(*conn); ok {
		return w
	}
	if c == nil {
		return nil
	}
	v := reflect.ValueOf(c)
	if t, _ := wrapperType.Load().(reflect.Type); t == v.Type() {
		return firstConn(v)
	}
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	if e := v.Elem(); e.Kind() != reflect.Struct || e.NumField() == 0 || e.Type().Field(0).Type != connType ||
		!e.Type().Field(0).IsExported() {
		return nil
	}
	wrapperType.Store(v.Type())
	return firstConn(v)
}

// wrapperType is the last wrapper type inner found to embed a net.Conn as its first,
// exported field (a pointer to such a struct); a process meets one (fasthttp's).
var wrapperType atomic.Value // reflect.Type

// firstConn is the connection from Listen that v, a non-nil pointer to a struct of
// wrapperType's, embeds first; nil when it embeds another kind of net.Conn.
func firstConn(v reflect.Value) *conn {
	p := v.UnsafePointer()
	if p == nil {
		return nil
	}
	w, _ := (*(*net.Conn)(p)).(*conn) // the first field is at the struct's start
	return w
}

var connType = reflect.TypeFor[net.Conn]()

// HoldReply implements ReplyHolder.
func (c *conn) HoldReply() { c.raw.holdReply() }

// Pipelined implements ReplyHolder.
func (c *conn) Pipelined(bound time.Duration) error {
	if err := c.raw.pipelined(bound); err != nil {
		return c.opError("write", err)
	}
	return nil
}
