//go:build race

package fleettest

// raceEnabled: the test binary runs with the race detector, and mcprouter is built
// with it too, so that races in the router under real load fail these tests.
const raceEnabled = true
