// Package history keeps a session's record: the append-only log of
// transcript entries (messages, compactions, removals) a session writes as
// it goes and replays when it starts again. History is what a session
// needs of one; MemoryHistory keeps it in memory, FileHistory in a JSONL
// file (one entry a line, locked against a second writer, repaired when a
// crash cut its last line). Load reads a history as a session starts on
// it: from the latest compaction on when the history can say where that
// is (Tailer).
//
// It decides nothing: what goes into the log is package policy's, and the
// entries' form is package transcript's.
package history
