//go:build !race

package leaseclient

// raceEnabled tells tests that the race detector is on.
const raceEnabled = false
