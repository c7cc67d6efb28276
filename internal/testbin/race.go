//go:build race

package testbin

// raceEnabled: this test binary runs with the race detector.
const raceEnabled = true
