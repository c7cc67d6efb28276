//go:build !race

package params

const raceEnabled = false
