package policy

import (
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// RunID, TimerID and CompactionID name what an Engine asked its driver to
// start, so that the report of one that was cancelled or replaced is told
// apart from the current one's.
type (
	RunID        uint64
	TimerID      uint64
	CompactionID uint64
)

// EffectKind says what an Effect asks the driver to do.
type EffectKind uint8

// The effects. Each names the Effect fields it uses.
const (
	_ EffectKind = iota
	// Emit: deliver Event to the session's subscribers.
	Emit
	// StartRun: call the agent for run Run — the user's prompt when
	// Prompt is set (already the last message of Context), else a
	// continuation from Context — on Model, the model the run calls (the
	// session's own, or a fallback model). Report its events with RunEvent and its
	// end with RunReturned. Context is the engine's runtime context
	// itself, not a copy: it never changes afterwards, and must not be
	// changed (appending to it copies: it has no room beyond its end).
	StartRun
	// CancelRun: cancel run Run, with Cause as the reason.
	CancelRun
	// StartTimer: arm the session's one backoff timer to fire at
	// Deadline (at once when it has passed), replacing any armed timer,
	// and report it with TimerFired(Timer).
	StartTimer
	// StopTimer: disarm the timer.
	StopTimer
	// StartCompaction: summarize for compaction Compaction with *Request,
	// and report the answer with CompactionFinished.
	StartCompaction
	// CancelCompaction: cancel compaction Compaction.
	CancelCompaction
	// Append: append Entries to history, in order, in one write where the
	// history can. Report a failure with Appended; when Await is set,
	// report the outcome either way: the engine waits for it. The report
	// is the engine's next input, before the answer to any other effect
	// of the same input (UsageLimitAnswered, a held run's RunReturned),
	// and before Release: a failure undoes what this input recorded.
	Append
	// MarkUsageLimit: tell the credential store that the session's
	// credential hit a usage limit (block it for Hint, 0 meaning the
	// store's default), and report whether it switched to another with
	// UsageLimitAnswered. The engine decides nothing until then.
	MarkUsageLimit
	// FinishTurn: the turn settled; the Prompt waiting on it returns Err.
	FinishTurn
	// FinishCompact: a manual compaction ended; Compact returns *Result
	// (nil when it failed) and Err.
	FinishCompact
)

var effectNames = [...]string{
	Emit: "Emit", StartRun: "StartRun", CancelRun: "CancelRun", StartTimer: "StartTimer", StopTimer: "StopTimer",
	StartCompaction: "StartCompaction", CancelCompaction: "CancelCompaction", Append: "Append",
	MarkUsageLimit: "MarkUsageLimit", FinishTurn: "FinishTurn", FinishCompact: "FinishCompact",
}

// String returns the kind's name, as in the constants.
func (k EffectKind) String() string {
	if k > 0 && int(k) < len(effectNames) {
		return effectNames[k]
	}
	return fmt.Sprintf("EffectKind(%d)", uint8(k))
}

// Effect is one thing the driver must do. Kind says which; the other fields
// are set as the kind's comment says. It is one flat value rather than an
// interface, so that producing effects allocates nothing.
type Effect struct {
	Kind EffectKind

	Event events.Event

	Run     RunID
	Prompt  *transcript.Message
	Context []transcript.Message
	Model   Model
	Cause   error

	Timer    TimerID
	Deadline time.Time

	Compaction CompactionID
	Request    *SummaryRequest

	Entries []transcript.Entry
	Await   bool

	Hint time.Duration

	Err    error
	Result *transcript.Compaction
}
