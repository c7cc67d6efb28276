//go:build unix

package transport

import "syscall"

// rawWrites: TryWrite writes to the descriptor itself (streamSink.rawWrite).
const rawWrites = true

// rawWrite is the one non-blocking write(2) of TryWrite. A full socket (EAGAIN), or a
// signal, writes nothing and is no error: the rest goes out with Write.
func (k *streamSink) rawWrite(fd uintptr) bool {
	n, err := syscall.Write(int(fd), *k.p)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		n, err = 0, nil
	case n < 0:
		n = 0
	}
	k.n, k.err = n, err
	return true
}
