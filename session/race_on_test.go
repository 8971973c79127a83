//go:build race

package session_test

// cjkTurnsDefault: under the race detector TestCJKSessionLong plays 2,000
// turns (some 200 compactions on overflow and 100 on the threshold), where
// its 10,000 took half a minute on two cores; .ci/run plays the 10,000
// without the race detector, in a few seconds.
const cjkTurnsDefault = 2_000
