//go:build race

package classify_test

// raceEnabled: the race detector makes sync.Pool drop entries at random, so
// allocation counts are meaningless under it.
const raceEnabled = true
