package loadgen

import (
	"syscall"
	"time"
)

// preciseSleep sleeps for d with the kernel's high-resolution timers. Go's runtime
// timers wake up to a millisecond late on Linux when the process is otherwise idle
// (the netpoller waits in whole milliseconds), which would make an open-loop pacer
// start every send late; a plain nanosleep system call is accurate to tens of
// microseconds. Only the pacer goroutine sleeps this way, so the thread it ties up
// while asleep is one thread.
func preciseSleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		err := syscall.Nanosleep(&ts, &rem)
		if err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
