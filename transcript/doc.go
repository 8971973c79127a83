// Package transcript is the vocabulary of a conversation and of its record:
// Message (a user prompt, an assistant message, a tool result) with its
// content Blocks, Role, StopReason, Usage and Cost, and the history Entry a
// session writes for each message, compaction (Compaction) and removal. It
// is also where their JSON form lives — the reference agent's wire shape,
// which history files, snapshots and the RPC lines all use — and the text
// rule that keeps every string of them valid UTF-8 (Message.Clean).
//
// It holds values and their codecs only: no policy, no I/O, no clock. What
// happens to a conversation — when a failed call is retried, when the
// context is compacted — is package policy's; what a session reports while
// it happens is package events'; where the entries are kept is package
// history's.
package transcript
