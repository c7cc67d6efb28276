//go:build !linux

package loadgen

import "time"

// runqueueWait is not available on this platform.
func runqueueWait() time.Duration { return 0 }

// RunqueueWait is not available on this platform.
func RunqueueWait(int) time.Duration { return 0 }
