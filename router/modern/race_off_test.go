//go:build !race

package modern

const raceEnabled = false
