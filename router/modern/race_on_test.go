//go:build race

package modern

// raceEnabled: allocation guards skip under -race, whose runtime allocates on its own.
const raceEnabled = true
