package transport

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mcprouter/mcprouter/transport/readahead"
	"github.com/mcprouter/mcprouter/transport/sse"
)

// streamSink is a hijacked stream's connection (a GET stream's, or a stateless
// request's) as an sse.Sink: each write is one HTTP/1.1 chunk. TryWrite writes without
// waiting when the connection is the read-ahead listener's (readahead.NowWriter), so
// that fan-out to many streams writes from the publishing goroutine, one system call
// per stream, as a bare socket writer would; what the socket does not take is kept for
// the next (blocking) Write.
type streamSink struct {
	c   net.Conn
	now readahead.NowWriter // nil: TryWrite keeps everything for Write
	rc  syscall.RawConn     // the descriptor, for the close watcher; nil: none

	kept *[]byte // framed bytes TryWrite could not write, from framePool
}

// init makes k a sink writing to c.
func (k *streamSink) init(c net.Conn) {
	k.c = c
	// The read-ahead listener's connections write without waiting, also under
	// fasthttp's per-address wrapper (readahead.NowWriterOf sees through it), with the
	// connection's own attempt function: a function and its arguments kept here took
	// 48 bytes of every held stream. A TLS connection gives neither a descriptor nor
	// such writes.
	k.now = readahead.NowWriterOf(c)
	k.rc, _ = readahead.RawConnOf(c) // nil when c has none
}

// framePool holds the buffers TryWrite frames a chunk in.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledFrame bounds the buffers framePool keeps.
const maxPooledFrame = 64 << 10

// frame returns p then tail framed as one chunk, in a buffer from framePool.
func frame(p, tail []byte) *[]byte {
	bp := framePool.Get().(*[]byte)
	*bp = appendFrame((*bp)[:0], p, tail)
	return bp
}

// appendFrame appends p then tail framed as one chunk to b.
func appendFrame(b, p, tail []byte) []byte {
	b = strconv.AppendUint(b, uint64(len(p)+len(tail)), 16)
	b = append(b, '\r', '\n')
	b = append(b, p...)
	b = append(b, tail...)
	return append(b, '\r', '\n')
}

// TryWrite implements sse.Sink.
func (k *streamSink) TryWrite(p []byte, id sse.EventID) (bool, error) {
	var end [48]byte
	tail := end[:0]
	if id.Seq != 0 {
		tail = sse.AppendEventEnd(tail, id)
	}
	bp := frame(p, tail)
	if k.kept != nil || k.now == nil {
		k.keep(bp, 0)
		return false, nil
	}
	n, err := k.now.WriteNow(*bp)
	switch {
	case err != nil:
		putFrame(bp)
		return false, err
	case n == len(*bp):
		putFrame(bp)
		return true, nil
	}
	k.keep(bp, n)
	return false, nil
}

// keep keeps the framed bytes of bp from off on, after what is kept already.
func (k *streamSink) keep(bp *[]byte, off int) {
	if k.kept == nil && off == 0 {
		k.kept = bp
		return
	}
	if k.kept == nil {
		k.kept = framePool.Get().(*[]byte)
		*k.kept = (*k.kept)[:0]
	}
	*k.kept = append(*k.kept, (*bp)[off:]...)
	putFrame(bp)
}

// Write implements sse.Sink. What is kept (TryWrite's rest, or a hijacked stream's
// response head, see hijackStream) goes out first, with p in the same write when p is
// not large: a write of its own cost a system call (and the client a read).
func (k *streamSink) Write(p []byte) error {
	if len(p) > maxPooledFrame-32 {
		return k.writeLarge(p)
	}
	bp := k.kept
	k.kept = nil
	if bp == nil {
		if len(p) == 0 {
			return nil
		}
		bp = framePool.Get().(*[]byte)
		*bp = (*bp)[:0]
	}
	if len(p) > 0 {
		*bp = appendFrame(*bp, p, nil)
	}
	_, err := k.c.Write(*bp)
	putFrame(bp)
	return err
}

// writeLarge writes what is kept, then a large event p, not copied: framed by a
// writev.
func (k *streamSink) writeLarge(p []byte) error {
	if err := k.Write(nil); err != nil {
		return err
	}
	var hdr [20]byte
	h := append(strconv.AppendUint(hdr[:0], uint64(len(p)), 16), '\r', '\n')
	bufs := net.Buffers{h, p, crlf}
	_, err := bufs.WriteTo(k.c)
	return err
}

// Interrupt implements sse.Sink: a past write deadline makes a blocked write fail.
func (k *streamSink) Interrupt() { k.c.SetWriteDeadline(time.Now()) }

func putFrame(bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		*bp = (*bp)[:0]
		framePool.Put(bp)
	}
}
