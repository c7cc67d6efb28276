//go:build unix && (!linux || race)

package readahead

import "syscall"

// RawRead is syscall.Read where the raw call is not worth its platform code, and under
// the race detector, which learns from syscall.Read and Write that a write happens
// before the read of its bytes (see rawsys_linux.go).
func RawRead(fd int, p []byte) (int, error) { return syscall.Read(fd, p) }

// RawWrite is syscall.Write, as RawRead.
func RawWrite(fd int, b []byte) (int, error) { return syscall.Write(fd, b) }
