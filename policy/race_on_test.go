//go:build race

package policy_test

// poolMisses is what the race detector adds to an input's allocations: it
// makes sync.Pool drop entries at random, so each step an input takes may
// allocate the copy its actions act on (policy/step.go).
const poolMisses = 1
