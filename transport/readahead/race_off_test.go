//go:build !race

package readahead

// raceEnabled: the race detector allocates on its own, so allocation guards skip.
const raceEnabled = false
