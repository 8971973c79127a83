// Package policy is the recovery policy of docs/policy.md as a deterministic
// engine: Engine holds everything of one session's policy (the state machine
// of package fsm, the retry counter, the overflow episode, the runtime
// context and history positions, the backoff, the compaction and the turn
// in flight), takes inputs — a prompt, a run's events and its end, a timer,
// an abort, a summary, the credential store's answer, a history write's
// outcome — each with the time it happened and any random draw it needs,
// and answers each with the effects a driver carries out. No goroutine, no
// clock, no randomness and no I/O happen inside, so the same inputs always
// give the same effects, and every decision is the transition table's.
//
// It also holds the settings (Config), the sentinel errors, and Snapshot,
// the engine as data, which Restore turns back into an engine in another
// process. The messages and history entries it reasons about are package
// transcript's; the events it reports are package events'.
//
// It is not for embedding directly in most programs: package session is
// the in-process driver (goroutines, one timer, subscribers, a history and
// a credential store), and its Session is what a program uses. A driver of
// another kind (a durable workflow, a test harness) uses Engine.
package policy
