//go:build linux

package codec

import (
	"syscall"
	"unsafe"
)

// threadCPUTime returns the CPU time consumed by the calling OS thread, in
// nanoseconds. Benchmarks report it next to wall time because this machine is shared:
// a benchmark descheduled by someone else's load loses wall time, not CPU time.
func threadCPUTime() (int64, bool) {
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
