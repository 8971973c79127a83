//go:build !race

package transitions_test

// exhaustiveStride: without the race detector, TestExhaustive checks every
// combination.
const exhaustiveStride = 1
