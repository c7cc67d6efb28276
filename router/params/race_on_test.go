//go:build race

package params

// raceEnabled: allocation guards skip under -race, whose runtime allocates on its own.
const raceEnabled = true
