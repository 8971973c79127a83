// Package temporal runs an agent session's recovery policy as a durable
// Temporal workflow, so that a session outlives the worker running it: a
// worker redeployed while the session waits out a backoff or a compaction
// hands it on to another, with the same attempt, the same deadline and
// nothing run twice.
//
// It is a driver of the decision core, policy.Engine, as package session
// is in process: the workflow feeds the engine its inputs and carries out
// its effects, and every decision is the engine's (so the transition
// table's). One workflow is one session. An agent run is an activity that
// Temporal never retries (the engine decides retries), heartbeating while
// the agent streams; a backoff is a workflow timer; a compaction's summary
// is an activity; asking the credential store about a usage limit is an
// activity; the session's events reach a Sink through an activity, in
// order. prompt and compact are updates; abort, abort_retry,
// abort_compaction, set_auto_retry, set_auto_compaction and close are
// signals; get_state is a query. The conversation lives in the workflow;
// the credentials stay in the store the activities reach, so no secret is
// in the workflow's history. A long session continues as new between turns.
//
// A session started with Start.Steps runs each agent run step by step on a
// StepAgent instead: a model call or a tool call per activity, each
// retried alone by Temporal when its worker is lost, so a lost worker
// repeats only the step in flight.
//
// This is a module of its own so that the library's module gains no
// dependency on the Temporal SDK. See docs/temporal.md.
package temporal
