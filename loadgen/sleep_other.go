//go:build !linux

package loadgen

import "time"

// preciseSleep sleeps for d; on this platform Go's timers are the best available.
func preciseSleep(d time.Duration) { time.Sleep(d) }
