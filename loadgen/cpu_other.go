//go:build !unix

package loadgen

import "time"

// processCPU is not available on this platform; CPU saturation is not checked.
func processCPU() time.Duration { return 0 }
