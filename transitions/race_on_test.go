//go:build race

package transitions_test

// exhaustiveStride: under the race detector, TestExhaustive checks one
// combination in eleven, a prime, so that the ones it checks mix every
// fact and still take every rule (.ci/run checks them all without the
// race detector, where the 35 million take seconds instead of minutes).
const exhaustiveStride = 11
