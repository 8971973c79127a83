// Package servertest holds the test that needs a real Temporal server: a
// worker stopped while its session waits out a backoff, and another that
// takes the session on. It has no code of its own; its test starts the
// devserver (see package live) and runs without the race detector, in a
// step of its own of .ci/run.
package servertest
