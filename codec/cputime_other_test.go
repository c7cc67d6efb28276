//go:build !linux

package codec

// threadCPUTime is only available on Linux; elsewhere benchmarks report wall time only.
func threadCPUTime() (int64, bool) { return 0, false }
