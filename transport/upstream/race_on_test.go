//go:build race

package upstream

// raceOn: the race detector allocates on its own, so allocation guards let it be.
const raceOn = true
