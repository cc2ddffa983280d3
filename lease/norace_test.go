//go:build !race

package lease_test

// raceEnabled: the race detector adds allocations of its own.
const raceEnabled = false
