package events

import (
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// Event is something that happened in a session: one of the event types of
// this package, each a plain Go value. The set is closed: no other package
// can add to it, so a type switch over it can be complete.
//
// Events have no JSON form of their own: package session/rpc gives each its
// wire form (an object with a "type", docs/rpc.md) and its name there
// (rpc.EventType): the Go name in snake case (AutoRetryStart is
// "auto_retry_start"), but for CallStart and CallEnd, which keep the
// reference agent's "turn_start" and "turn_end".
type Event interface {
	event()
}

// The agent's own events, reported by an Agent as a run happens.
type (
	// AgentStart: a run began.
	AgentStart struct{}
	// CallStart: one model call (and the tools it asks for) began. A
	// user's turn (a Prompt) holds one or more calls. On the RPC wire it
	// is "turn_start", the reference agent's name.
	CallStart struct{}
	// MessageStart: a message began.
	MessageStart struct {
		Message transcript.Message
	}
	// MessageUpdate: a message in progress grew, for a view that shows
	// it as it arrives: Delta is what arrived, Message the message so far
	// (it may be left empty). The session passes it on and keeps nothing
	// of it: MessageEnd carries the message.
	MessageUpdate struct {
		Message transcript.Message
		Delta   Delta
	}
	// MessageEnd: a message is complete. The session appends it to the
	// runtime context and to history; one that cannot be written (a block
	// of an unknown type, tool call arguments that are not a JSON object)
	// is refused as the agent's error instead (see Agent in package
	// session).
	MessageEnd struct {
		Message transcript.Message
	}
	// CallEnd: the model call of the last CallStart and its tools ended.
	// On the RPC wire it is "turn_end".
	CallEnd struct{}
	// AgentEnd: the run ended; Messages are the messages it made.
	AgentEnd struct {
		Messages []transcript.Message
	}
)

// RetryOutcome is how a retry chain ended (AutoRetryEnd.Outcome).
type RetryOutcome string

// The outcomes of a retry chain.
const (
	// RetryRecovered: a retry succeeded.
	RetryRecovered RetryOutcome = "recovered"
	// RetryExhausted: the last allowed retry failed too, a retry hint
	// was longer than the cap, or the next retry would have ended past the
	// chain's time budget (AutoRetryEnd.Limit says which limit).
	RetryExhausted RetryOutcome = "exhausted"
	// RetryCancelled: the session's AbortRetry, Abort or a manual compaction ended the
	// chain.
	RetryCancelled RetryOutcome = "cancelled"
	// RetryFailed: a retry ended in an error that is not retried (a fatal
	// error, an overflow, a run that could not start), or with retries
	// turned off.
	RetryFailed RetryOutcome = "failed"
)

// RetryLimit is the limit that ended an exhausted retry chain
// (AutoRetryEnd.Limit).
type RetryLimit string

// The limits of a retry chain.
const (
	// LimitRetries: retry.maxRetries retries were made, or the server's
	// retry hint was above retry.maxDelayMs.
	LimitRetries RetryLimit = "retries"
	// LimitElapsed: the next retry would have ended past the chain's time
	// budget, retry.maxElapsedMs from its first failure.
	LimitElapsed RetryLimit = "elapsed"
	// LimitReset: the usage limit resets further away than
	// retry.maxResetWaitMs (retry.waitForReset).
	LimitReset RetryLimit = "reset"
)

// Delta is a fragment of a message in progress.
type Delta struct {
	// Kind is "text", "thinking" or "toolCall" (a fragment of a tool
	// call's arguments).
	Kind string
	// Index is the content block it belongs to.
	Index int
	// Text is the fragment.
	Text string
}

// The session's recovery events.
type (
	// AutoRetryStart: a retry is scheduled after DelayMs. ErrorClass is
	// what the classifier made of the error: classify.UsageLimit when it takes the
	// usage-limit branch (docs/policy.md §3.3), else Retryable;
	// Provider and Model are the failed message's; Credential is the ID
	// (never the secret) of the credential the failed run called its
	// provider with, "" when the session has no credential store.
	//
	// MaxAttempts is retry.maxRetries, −1 for no count limit. With a time
	// budget (retry.maxElapsedMs), MaxElapsedMs is it, ElapsedMs is how
	// long the chain has run from its first failure to this decision, and
	// RemainingMs is what is left of the budget (MaxElapsedMs − ElapsedMs,
	// at least DelayMs); all three are 0 without a budget.
	//
	// ResetAt is set when the retry waits for a usage limit's reset
	// (retry.waitForReset): the retry goes at ResetAt, DelayMs from now;
	// zero for a retry on the chain's own delays.
	AutoRetryStart struct {
		Attempt      int
		MaxAttempts  int
		DelayMs      int64
		ErrorMessage string
		ErrorClass   classify.Class
		Provider     string
		Model        string
		Credential   string
		ElapsedMs    int64
		MaxElapsedMs int64
		RemainingMs  int64
		ResetAt      time.Time
	}
	// AutoRetryEnd: a retry chain ended; exactly one per chain. FinalError
	// is set when it failed. Outcome says how it ended; ErrorClass is the
	// class of the error that ended a chain that failed or was exhausted,
	// as in AutoRetryStart (None otherwise). Limit says which limit ended
	// an exhausted chain ("" otherwise). ResetWait reports that the chain
	// waited for a usage limit's reset (an AutoRetryStart with ResetAt).
	AutoRetryEnd struct {
		Success    bool
		Attempt    int
		FinalError string
		Outcome    RetryOutcome
		ErrorClass classify.Class
		Limit      RetryLimit
		ResetWait  bool
	}
	// AutoCompactionStart: an automatic compaction began.
	AutoCompactionStart struct {
		Reason transcript.CompactionReason
	}
	// AutoCompactionEnd: an automatic compaction ended; exactly one per
	// start. Result is set only when it succeeded; ErrorMessage says why
	// it failed.
	AutoCompactionEnd struct {
		Result       *transcript.Compaction
		Aborted      bool
		WillRetry    bool
		ErrorMessage string
	}
	// StateChange: the recovery machine took a transition.
	StateChange struct {
		From    states.State
		To      states.State
		Trigger transitions.Trigger
	}
	// TurnSettled: the turn a Prompt started has settled: the run, its
	// retries and any overflow recovery. It is the last event of a turn,
	// emitted just before Prompt returns. Err is why the turn failed, the
	// error Prompt returns (it matches one of the sentinel errors); nil
	// when the turn succeeded. ErrorClass is the class of the error in
	// the message that failed the turn (as in AutoRetryStart), None when
	// the turn succeeded or failed otherwise (aborted, cancelled, ...).
	TurnSettled struct {
		Err        error
		ErrorClass classify.Class
	}
	// SharedLimitWait: a limit shared by the sessions of a process
	// (session.WithLimiter) holds Key, the session's provider and
	// credential, until Until: the run about to start made no call, and
	// the session waits in backoff until then before it asks again.
	// Reason says why the key is held: "rate_limited" or "overloaded" (a
	// session on the key was told to wait, by a 429 or a 529 with a retry
	// hint), "circuit_open" (overload failures on the key opened its
	// circuit) or "probe" (the circuit is half-open and another session's
	// run is its one probe).
	SharedLimitWait struct {
		Key    string
		Until  time.Time
		Reason string
	}
	// EventsDropped: a subscriber with a bounded buffer fell behind and
	// Count events were not delivered to it. Only that subscriber sees it.
	EventsDropped struct {
		Count int
	}
	// ModelFallback: the session moved from model From to model To, the
	// next of its fallback list (docs/policy.md §3.9), for Reason; the
	// turn goes on there, and so do the turns that start before Until,
	// when the cooldown ends and the next turn goes back to the
	// session's own model (ModelRevert).
	ModelFallback struct {
		From   string
		To     string
		Reason FallbackReason
		Until  time.Time
	}
	// ModelRevert: a turn started after a fallback's cooldown, and the
	// session went back from the fallback model From to its own model To.
	ModelRevert struct {
		From string
		To   string
	}
)

// FallbackReason is why a session moved to a fallback model
// (ModelFallback.Reason).
type FallbackReason string

// The reasons of a model fallback.
const (
	// FallbackExhausted: the retry chain on a transient error would have
	// ended (out of retries or of time, a hint above the cap, a reset too
	// far, retries off).
	FallbackExhausted FallbackReason = "exhausted"
	// FallbackOverloaded: the model was overloaded, and fallback.after is
	// "overloaded".
	FallbackOverloaded FallbackReason = "overloaded"
	// FallbackUsageLimit: a usage limit, with no credential to switch to.
	FallbackUsageLimit FallbackReason = "usage_limit"
)

func (AgentStart) event()          {}
func (CallStart) event()           {}
func (MessageStart) event()        {}
func (MessageUpdate) event()       {}
func (MessageEnd) event()          {}
func (CallEnd) event()             {}
func (AgentEnd) event()            {}
func (AutoRetryStart) event()      {}
func (AutoRetryEnd) event()        {}
func (AutoCompactionStart) event() {}
func (AutoCompactionEnd) event()   {}
func (StateChange) event()         {}
func (TurnSettled) event()         {}
func (EventsDropped) event()       {}
func (ModelFallback) event()       {}
func (ModelRevert) event()         {}
func (SharedLimitWait) event()     {}
