package session

import (
	"context"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// Agent runs the model on the session's behalf: the embedder's bridge to a
// model provider. The session calls Run for the user's prompt and for each
// continuation (after a retry's wait or an overflow compaction), never two
// at once.
type Agent interface {
	// Run performs one run: when req.Prompt is set, the user's prompt
	// (already the last message of req.Context); otherwise a continuation
	// from req.Context. It calls emit, from any goroutine but one call at
	// a time, for each event as it happens: events.AgentStart, then for each model
	// call events.CallStart, events.MessageStart, events.MessageEnd (and the tool results'
	// messages when the model asked for tools), events.CallEnd, and events.AgentEnd last.
	//
	// A run that makes no model call because it cannot start returns an
	// error before emitting anything. Once started, a failed model call is
	// reported as an assistant message with StopReason "error" and the run
	// still ends with AgentEnd. When ctx is cancelled the run stops its
	// model call, emits the call's message with StopReason "aborted", and
	// ends. Run returns after emitting AgentEnd. ctx carries the values
	// of the turn's context (Prompt's, and what observers added: see
	// Observer), so a traced HTTP client's spans join the caller's trace;
	// its cancellation is the session's own.
	//
	// The session does not rely on this: a run counts as started at its
	// first assistant message (a run that returns before one could not
	// start, whatever it emitted); a started run that returns without
	// events.AgentEnd ends in an error message made of its error; an assistant
	// message without Provider and Model is the session's model's; a panic
	// is recovered and becomes a fatal, non-retryable error of the run, and
	// so does a message that cannot be written (a block of an unknown type,
	// tool call arguments that are not a JSON object), whose run is then
	// cancelled.
	// Text that is not valid UTF-8, in any field of any message or event
	// or in the run's error, is made valid as the session takes it: each
	// bad byte becomes U+FFFD (docs/session.md, "Text").
	Run(ctx context.Context, req RunRequest, emit func(events.Event)) error
}

// RunRequest is what the session hands the agent for one run.
type RunRequest struct {
	// SessionID is the session's identity.
	SessionID string
	// Prompt is the user's message for a prompted run; nil for a
	// continuation.
	Prompt *transcript.Message
	// Context is the runtime context: the messages to send to the model.
	// It is shared, not copied for the run: the session never changes it
	// afterwards (it stays as it is after Run returns, and may be kept),
	// and the agent must not change its messages either. Appending to it
	// is safe: it has no room beyond its end, so an append copies.
	Context []transcript.Message
	// Model is the model this run calls: the session's own, or with the
	// fallback setting the model the session moved to (docs/policy.md
	// §3.9). An agent calls it, and names it in its assistant messages
	// (Provider and Model), so that history records which model answered.
	Model policy.Model
	// Credential is the credential to call the provider with, when the
	// session has a credential store that knows one.
	Credential *policy.Credential
}
