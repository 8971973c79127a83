//go:build !race

package policy_test

// poolMisses is what the race detector adds to an input's allocations: none
// without it.
const poolMisses = 0
