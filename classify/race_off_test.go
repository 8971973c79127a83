//go:build !race

package classify_test

const raceEnabled = false
