// Package session is what an agent program embeds to recover from its
// provider's failures: the in-process driver of the recovery policy.
//
//	s, err := session.New(agent, session.WithModel(model))
//	defer s.Close()
//	err = s.Prompt(ctx, "fix the failing test")
//
// A Session (made by New) runs an Agent, the embedder's bridge to a model
// provider, and after every run decides whether to retry an error after a
// backoff the user can cancel, to switch to a free credential on a usage
// limit, or to compact the conversation and continue after a context
// overflow. Prompt returns when the whole turn has settled, retries and
// overflow recovery included, with an error that says why a turn failed
// (package policy's Err variables). AbortRetry, Abort and AbortCompaction
// cancel what is in flight; Subscribe delivers every event of package
// events (docs/policy.md §6), an events.StateChange for each transition of the
// machine among them; Status reads the whole state at once; Snapshot and
// WithSnapshot carry a session to another process.
//
// Every decision is made by a policy.Engine, the deterministic core: the
// Session is its in-process driver. It carries out the engine's effects:
// the agent's and the summarizer's goroutines, one reusable timer for the
// backoff, the history, the credential store, the subscribers. The values
// it takes and gives live where they are defined, and are not named here
// again: messages in package transcript, events in package events, the
// settings, status, snapshot and errors in package policy, histories in
// package history, credential stores in package credentials.
//
// Concurrency: every method of Session is safe to call from any goroutine.
// One goroutine at a time owns the engine, running the closures the others
// post; it exists only while there is work. A backoff wait is a timer, so a
// session waiting out a backoff holds no goroutine at all, and under
// testing/synctest a chain of 2, 4 and 8 second waits runs in no real time.
//
// The session does not call a model itself (an Agent does; package
// session/scripted is one that plays a script), and it does not render
// anything (see the command's terminal view).
package session
