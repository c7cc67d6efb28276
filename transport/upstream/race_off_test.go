//go:build !race

package upstream

const raceEnabled = false
