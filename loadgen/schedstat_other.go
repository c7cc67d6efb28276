//go:build !linux

package loadgen

import "time"

// runqueueWait is not available on this platform.
func runqueueWait() time.Duration { return 0 }
