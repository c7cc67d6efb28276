//go:build !race

package rpccheck

// raceEnabled: the race runtime allocates on its own, so the allocation guard skips.
const raceEnabled = false
