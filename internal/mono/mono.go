// Package mono is the process's monotonic clock as a number: nanoseconds since the
// process started. Durations and deadlines kept as such a number cost one clock read
// (time.Since reads the monotonic clock alone, where time.Now reads the wall clock too),
// fit in an atomic int64, and are not moved by steps of the wall clock. The router's
// request timings, the SSE consumers' write times and the backend connections' idle
// probe read it.
package mono

import "time"

// start anchors Nanos.
var start = time.Now()

// Nanos is the monotonic clock's nanoseconds since the process started.
func Nanos() int64 { return int64(time.Since(start)) }
