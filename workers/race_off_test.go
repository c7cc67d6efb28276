//go:build !race

package workers

// raceEnabled: the race detector allocates on its own, so allocation guards skip.
const raceEnabled = false
