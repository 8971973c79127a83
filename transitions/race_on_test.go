//go:build race

package transitions_test

// exhaustiveStride: under the race detector, TestExhaustive checks one
// combination in 97, a prime, so that the ones it checks mix every
// fact and still take every rule (.ci/run checks them all without the
// race detector, where the 90 million take a minute instead of ten).
const exhaustiveStride = 97
