//go:build linux && !race

package readahead

import (
	"syscall"
	"unsafe"
)

// maxRaw bounds what RawRead and RawWrite move without telling the runtime: a copy of
// this size takes microseconds. Larger transfers go through syscall.Read and Write.
const maxRaw = 64 << 10

// RawRead is read(2) on a non-blocking descriptor without entering the runtime's
// system call state (syscall.RawSyscall), for up to maxRaw bytes.
//
// Why: a P seen in a system call is one Go's sysmon wakes up for and may take back
// and hand to another thread; on a loaded CPU a loopback write (which also delivers
// the bytes to the peer and wakes it) is often preempted inside the kernel and its P
// retaken, and sysmon then keeps polling every 20 µs. The sockets are non-blocking, so
// these calls never wait: the runtime does not need to know about them (7% of the
// router's CPU was sysmon and its hand-offs; bench/RESULTS.md, "Syscalls per
// forwarded call").
//
// Under the race detector the plain calls are used: they tell it that a write on one
// side happens before the read of it on the other, which it would otherwise miss.
func RawRead(fd int, p []byte) (int, error) {
	if len(p) == 0 || len(p) > maxRaw {
		return syscall.Read(fd, p)
	}
	return raw(syscall.SYS_READ, fd, p)
}

// RawWrite is write(2) as RawRead is read(2).
func RawWrite(fd int, b []byte) (int, error) {
	if len(b) == 0 || len(b) > maxRaw {
		return syscall.Write(fd, b)
	}
	return raw(syscall.SYS_WRITE, fd, b)
}

// raw is read(2) or write(2) (trap) of b on fd by syscall.RawSyscall.
func raw(trap uintptr, fd int, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}
