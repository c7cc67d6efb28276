//go:build race

package codec

// raceEnabled reports whether the race detector is on; allocation guards skip then,
// because the race runtime allocates on its own.
const raceEnabled = true
