package transport

import (
	"net"
	"strconv"
	"sync"
	"syscall"
)

// streamSink is a hijacked GET stream's connection as an sse.Sink: each write is one
// HTTP/1.1 chunk. TryWrite writes with one non-blocking write(2) when the connection
// gives access to its descriptor (plain TCP), so that fan-out to many streams writes
// from the publishing goroutine, one system call per stream, as a bare socket writer
// would; what the socket does not take is kept for the next (blocking) Write.
type streamSink struct {
	c  net.Conn
	rc syscall.RawConn // nil: TryWrite keeps everything for Write
	cw chunkWriter

	kept *[]byte // framed bytes TryWrite could not write, from framePool

	// The raw write's argument and results, in fields so that the function given to
	// RawConn.Write is made once (tryFn), not once per write.
	p     []byte
	n     int
	err   error
	tryFn func(fd uintptr) bool
}

func newStreamSink(c net.Conn) *streamSink {
	k := &streamSink{c: c, cw: chunkWriter{c: c}}
	// A wrapper that writes through unchanged says so by giving the descriptor (the
	// read-ahead listener's connections do); a TLS connection does not.
	if sc, ok := c.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			k.rc = rc
			k.tryFn = k.rawWrite
		}
	}
	return k
}

// framePool holds the buffers TryWrite frames a chunk in.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledFrame bounds the buffers framePool keeps.
const maxPooledFrame = 64 << 10

// TryWrite implements sse.Sink.
func (k *streamSink) TryWrite(p []byte) (bool, error) {
	bp := framePool.Get().(*[]byte)
	b := strconv.AppendUint((*bp)[:0], uint64(len(p)), 16)
	b = append(b, '\r', '\n')
	b = append(b, p...)
	b = append(b, '\r', '\n')
	*bp = b
	if k.kept != nil || k.rc == nil {
		k.keep(bp, 0)
		return false, nil
	}
	k.p, k.n, k.err = b, 0, nil
	if err := k.rc.Write(k.tryFn); err != nil {
		putFrame(bp)
		return false, err
	}
	n, err := k.n, k.err
	k.p = nil
	if err != nil {
		putFrame(bp)
		return false, err
	}
	if n == len(b) {
		putFrame(bp)
		return true, nil
	}
	k.keep(bp, n)
	return false, nil
}

// rawWrite is the one non-blocking write(2) of TryWrite. A full socket (EAGAIN), or a
// signal, writes nothing and is no error: the rest goes out with Write.
func (k *streamSink) rawWrite(fd uintptr) bool {
	n, err := syscall.Write(int(fd), k.p)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		n, err = 0, nil
	case n < 0:
		n = 0
	}
	k.n, k.err = n, err
	return true
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

// Write implements sse.Sink.
func (k *streamSink) Write(p []byte) error {
	if k.kept != nil {
		_, err := k.c.Write(*k.kept)
		putFrame(k.kept)
		k.kept = nil
		if err != nil {
			return err
		}
	}
	_, err := k.cw.Write(p)
	return err
}

func putFrame(bp *[]byte) {
	if cap(*bp) <= maxPooledFrame {
		*bp = (*bp)[:0]
		framePool.Put(bp)
	}
}
