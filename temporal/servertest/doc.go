// Package servertest holds the test that needs a real Temporal server: a
// worker stopped while its session waits out a backoff, and another that
// takes the session on; a session with prompts back to back and a slow
// sink, whose runs continue as new within a bound of events, and whose
// state the memo answers with no worker up; a worker of the previous
// release, built from the repository's history, killed mid-backoff or
// mid-summary, and a worker of this release that takes the session on. It has no code of its own;
// its test starts the
// devserver (see package live) and runs without the race detector, in a
// step of its own of .ci/run.
package servertest
