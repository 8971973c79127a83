// Package rpc serves a session over JSON lines, wire-compatible with the
// reference agent's RPC mode for the commands it shares (docs/policy.md §7), and
// gives Go programs a client for it.
//
// One command per line comes in; responses and the session's events go
// out, one JSON object per line. Serve reads lines on one goroutine and
// never blocks that reading on a command that takes time, so an abort
// reaches the session while a compaction runs. No input line can stop it:
// a bad line gets a failure response and the next line is read. Every line
// it writes is valid JSON in valid UTF-8; a failed write stops it.
//
// The session's events are plain Go values; their wire form (docs/rpc.md)
// is this package's: EventType names an event as the wire does, and a
// client's Event.Value turns a line back into the session's event.
//
// It does not decide anything about retries or compaction; the session
// does.
package rpc
