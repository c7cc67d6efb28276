//go:build race

package upstream

// raceEnabled: the race detector allocates on its own, so allocation guards skip (CI
// runs every test that reads it again without the race detector).
const raceEnabled = true
