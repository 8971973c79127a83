package transitions

import (
	"fmt"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/states"
)

// Signal says what just happened to the session: the outside occurrence that
// asks the machine to move. In Classifying, Exhausted and Cancelled the
// machine moves on its own and the signal is not read.
type Signal uint8

// The signals.
const (
	// NoSignal: nothing from outside; the machine is deciding on its own.
	NoSignal Signal = iota
	// RunEnded: a run (the user's or a continuation) returned.
	// Facts.Started says whether it produced an assistant message to
	// decide on.
	RunEnded
	// PromptCheck: a new user prompt is about to be sent and the last
	// assistant message is checked for compaction first.
	PromptCheck
	// TimerFired: a backoff timer fired. Facts.CurrentTimer says whether it
	// belongs to the backoff in progress.
	TimerFired
	// AbortRetryCalled: AbortRetry() was called.
	AbortRetryCalled
	// AbortCalled: Abort() was called.
	AbortCalled
	// AbortCompactionCalled: AbortCompaction() was called.
	AbortCompactionCalled
	// CompactionEnded: a compaction finished, with a result or without one.
	// Facts.Compacted and Facts.WillRetry say how.
	CompactionEnded
	// Replied: an assistant message of the run in flight ended; the facts
	// of the message are its.
	Replied
	// CompactCalled: Compact() was called.
	CompactCalled
	// CredentialAnswered: the credential store answered a usage limit;
	// Facts.CredentialSwitched says how, the other facts are the decision's
	// that asked.
	CredentialAnswered
	// TurnStarted: Prompt starts a turn, before the check before it: a
	// model fallback whose cooldown is over reverts to the primary here.
	TurnStarted
)

var signalNames = [...]string{
	NoSignal: "none", RunEnded: "run_ended", PromptCheck: "prompt_check", TimerFired: "timer_fired",
	AbortRetryCalled: "abort_retry", AbortCalled: "abort", AbortCompactionCalled: "abort_compaction",
	CompactionEnded: "compaction_ended", Replied: "replied", CompactCalled: "compact", CredentialAnswered: "credential_answered",
	TurnStarted: "turn_started",
}

// Valid reports whether s is one of the signals above: ranging
// `for s := Signal(0); s.Valid(); s++` visits each.
func (s Signal) Valid() bool { return int(s) < len(signalNames) }

// String returns the signal's name.
func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("Signal(%d)", uint8(s))
}

// Facts is everything a guard may read: what just happened, and what is known
// about the last assistant message, the settings and the chain at that
// moment. The zero value is "nothing happened, nothing is enabled".
//
// Facts carries data only; time enters as numbers, never as a clock.
type Facts struct {
	// Signal is what just happened.
	Signal Signal

	// Class is the classification of the last assistant message M.
	Class classify.Class
	// Error reports whether M.stopReason is "error". A silent or truncated
	// overflow has Class Overflow without being an error.
	Error bool
	// Aborted reports whether M.stopReason is "aborted".
	Aborted bool
	// Started reports, with RunEnded, that the run produced an assistant
	// message M to decide on; a run without one could not start.
	Started bool
	// UsageLimit reports whether M is an error that takes the usage-limit
	// branch (the class UsageLimit, or a rule set's usage-limit hint).
	UsageLimit bool
	// CredentialStore reports that a credential store answers the
	// session's usage limits: the decision on one asks it first.
	CredentialStore bool

	// RetryEnabled is the retry.enabled setting.
	RetryEnabled bool
	// Attempt is the chain's retry counter before this decision (0 when no
	// chain is active).
	Attempt int
	// MaxRetries is the retry.maxRetries setting: −1 (any negative) for no
	// count limit.
	MaxRetries int
	// ElapsedMs is how long the chain has run, in milliseconds, from its
	// first failure to this decision: 0 when no chain is active.
	ElapsedMs int64
	// DelayMs is the delay drawn for the retry this decision would
	// schedule (attempt+1): exponential, capped, jittered, at least an
	// honoured retry hint. A retry after a credential switch goes at once
	// and does not wait it.
	DelayMs int64
	// MaxElapsedMs is the retry.maxElapsedMs setting, the chain's time
	// budget: 0 (or less) for none.
	MaxElapsedMs int64
	// HintOverCap reports that retry.honorRetryAfter is on and the server's
	// retry hint exceeds retry.maxDelayMs: the chain ends instead of sleeping.
	HintOverCap bool
	// CredentialSwitched reports, after a run ended on a usage limit, that
	// the credential store moved the session to another free credential:
	// the retry then goes at once, whatever the hint said.
	CredentialSwitched bool
	// WaitForReset is the retry.waitForReset setting: a usage limit (or a
	// retry hint above the delay cap) whose reset time is known waits for
	// the reset instead of ending the chain.
	WaitForReset bool
	// ResetKnown reports that the server said when M's limit resets: M
	// carries a retry hint.
	ResetKnown bool
	// ResetWithin reports that the reset is at most retry.maxResetWaitMs
	// away.
	ResetWithin bool
	// ResetInMs is how long until the reset, in milliseconds (with
	// ResetKnown).
	ResetInMs int64
	// ResetWaited reports that the chain in progress already waited for a
	// reset: its time budget counts from that reset, and a further wait
	// must end within the budget (resets that keep coming, with no count
	// limit, would otherwise keep the chain going for ever).
	ResetWaited bool

	// CompactionEnabled is the compaction.enabled setting.
	CompactionEnabled bool
	// SameModel reports whether M came from the session's current provider
	// and model.
	SameModel bool
	// Stale reports whether the latest compaction in history is at or after
	// M's timestamp, so M's usage says nothing about the context now.
	Stale bool
	// EpisodeCompacted reports whether this overflow episode was already
	// compacted once.
	EpisodeCompacted bool
	// Tokens is the context size M's usage reports.
	Tokens int
	// ContextWindow is the model's context window; 0 when unknown.
	ContextWindow int
	// ReserveTokens is the compaction.reserveTokens setting.
	ReserveTokens int
	// TooLarge reports, for an overflow a run ended on, that no compaction
	// can make the context fit: what every compaction keeps (the last user
	// message and what it needs) is, by the session's calibrated count, at
	// least the model's window less reserveTokens. The check before a
	// prompt does not read it.
	TooLarge bool
	// PromptTooLarge reports, with PromptCheck, that the new prompt alone
	// is, by the session's calibrated count, too large for the model's
	// window less reserveTokens (with room for a summary of one token):
	// no compaction can make it fit, and sending it would overflow.
	PromptTooLarge bool
	// PromptOverWindow reports, with PromptCheck, that the runtime context
	// with the new prompt is, by the session's calibrated count (at least
	// the last usage, and an overflow's count until a compaction), over
	// the model's window less reserveTokens: sent as it is, the request
	// would overflow.
	PromptOverWindow bool

	// Compacted reports, with CompactionEnded, that the compaction produced
	// a result (it did not fail and there was something to compact).
	Compacted bool
	// WillRetry reports, with CompactionEnded, that the compaction was an
	// overflow recovery to be followed by a continuation.
	WillRetry bool

	// Committing reports that the compaction in flight has its summary and
	// its entry is being written: it can no longer be cancelled.
	Committing bool
	// AlreadyCompacted reports, with CompactCalled, that nothing was added
	// to history since the last compaction.
	AlreadyCompacted bool

	// CurrentTimer reports, with TimerFired, that the timer belongs to the
	// backoff in progress (not to an earlier, cancelled one).
	CurrentTimer bool

	// FallbackAvailable reports that the fallback setting lists a model
	// after the one the session is on: a chain that would end can go on
	// there instead.
	FallbackAvailable bool
	// FallbackOnOverload is fallback.after "overloaded": an overload
	// switches at once, without waiting the chain out.
	FallbackOnOverload bool
	// Overloaded reports that M is an overload: HTTP 529, the error type
	// overloaded_error, or a text that says "overloaded" (a 503 among them).
	Overloaded bool
	// FallbackTooSmall reports that the context, calibrated, is over the
	// compaction threshold of the next model's window: the switch
	// compacts first.
	FallbackTooSmall bool
	// OnFallback reports, with TurnStarted, that the session is on a
	// fallback model, not its primary; CooldownOver, that fallback.cooldownMs
	// has passed since it switched there.
	OnFallback   bool
	CooldownOver bool
	// SharedHoldMs is, with RunEnded, how long a limit shared by the
	// sessions of a process (session.WithLimiter) holds the key of the
	// run's provider and credential, in milliseconds from now: above 0,
	// the run was held there and made no call; 0 when no shared limit
	// held it.
	SharedHoldMs int64
}

// CompactionThreshold returns the token count above which a context of window tokens
// compacts: window − max(floor(0.15 × window), reserve), computed in exact
// integer arithmetic (a 200,000 window gives 170,000). It cannot overflow
// for any window and reserve: the result lies in [window − MaxInt, window].
// A negative reserve counts as none; a reserve above the window gives a
// threshold below 0, which every context is over. ok is false when the
// window is unknown (0 or less): then there is no threshold and the threshold
// path never compacts.
func CompactionThreshold(window, reserve int) (limit int, ok bool) {
	if window <= 0 {
		return 0, false
	}
	return window - max(window/100*15+window%100*15/100, reserve), true
}

// OverThreshold reports whether f.Tokens is above the compaction threshold of
// f.ContextWindow and f.ReserveTokens.
func (f Facts) OverThreshold() bool {
	limit, ok := CompactionThreshold(f.ContextWindow, f.ReserveTokens)
	return ok && f.Tokens > limit
}

// retryableError reports whether M is an error the retry chain handles: a
// plain retryable error or a usage limit, after a run (the check before a
// prompt is a compaction check only). An overflow never is.
func (f *Facts) retryableError() bool {
	return (f.Class == classify.Retryable || f.Class == classify.UsageLimit) && f.Signal != PromptCheck
}

// sameModelOverflow reports whether M is an overflow the overflow path owns:
// from the current model. Such a message never reaches the threshold path,
// whether or not it is recovered.
func (f *Facts) sameModelOverflow() bool {
	return f.Class == classify.Overflow && f.SameModel
}

// awaitingCredential reports whether the decision on a run's usage limit
// waits for the credential store's answer.
func (f *Facts) awaitingCredential() bool {
	return f.Signal == RunEnded && f.UsageLimit && f.CredentialStore
}

// tooLarge reports whether TooLarge holds for a decision that reads it:
// not the check before a prompt, whose prompt is not in the context yet.
func (f *Facts) tooLarge() bool { return f.TooLarge && f.Signal != PromptCheck }

// countLeft reports whether the chain's count limit allows one more
// retry: no count limit (MaxRetries negative), or Attempt below it.
func (f *Facts) countLeft() bool { return f.MaxRetries < 0 || f.Attempt < f.MaxRetries }

// withinBudget reports whether a retry that waits delayMs from now ends
// within the chain's time budget: no budget, or ElapsedMs + delayMs at
// most MaxElapsedMs. Negative figures count as 0; the sum cannot overflow.
func (f *Facts) withinBudget(delayMs int64) bool {
	if f.MaxElapsedMs <= 0 {
		return true
	}
	elapsed, delay := max(f.ElapsedMs, 0), max(delayMs, 0)
	return elapsed <= f.MaxElapsedMs && delay <= f.MaxElapsedMs-elapsed
}

// retryWithinBudget reports whether the retry the decision would make ends
// within the time budget: at once after a credential switch, after
// DelayMs otherwise.
func (f *Facts) retryWithinBudget() bool {
	if f.CredentialSwitched {
		return f.withinBudget(0)
	}
	return f.withinBudget(f.DelayMs)
}

// promptTooLarge reports whether PromptTooLarge holds for the check before
// a prompt, the one decision that reads it.
func (f *Facts) promptTooLarge() bool { return f.PromptTooLarge && f.Signal == PromptCheck }

// resetWithinBudget reports whether a wait for the reset fits the time
// budget: the chain's first wait has its own bound (retry.maxResetWaitMs)
// and the budget counts from its reset; a later wait must end within the
// budget, as any retry.
func (f *Facts) resetWithinBudget() bool { return !f.ResetWaited || f.withinBudget(f.ResetInMs) }

// hintEndsChain reports whether the server's retry hint ends the chain: it
// is above the delay cap and no credential switch made it moot.
func (f *Facts) hintEndsChain() bool {
	return f.HintOverCap && !f.CredentialSwitched
}

// waitsForReset reports whether the chain waits for the reset of M's limit
// rather than retrying on its own delays or ending on the hint: M is a
// retryable error of a chain that may retry, a usage limit or a rate limit
// whose hint is over the cap, no credential switched, the setting is on
// and the reset time is known.
func (f *Facts) waitsForReset() bool {
	return f.retryableError() && f.RetryEnabled && f.countLeft() && !f.CredentialSwitched &&
		(f.UsageLimit || f.HintOverCap) && f.WaitForReset && f.ResetKnown
}

// fallbackDue reports whether the decision on M switches to the next model
// of the fallback list (with one there to switch to): M is a retryable
// error and an overload while fallback.after is "overloaded", a usage
// limit no credential switch answered, or an error on which the chain
// would end: retries off, or the limits of the exhaust, exhaust_elapsed
// and reset_too_far rules.
func (f *Facts) fallbackDue(from states.State) bool {
	if !decides(from, f) || !f.retryableError() || !f.FallbackAvailable || f.awaitingCredential() {
		return false
	}
	return (f.Overloaded && f.FallbackOnOverload) || (f.UsageLimit && !f.CredentialSwitched) || !f.RetryEnabled ||
		f.chainExhausted(from) || f.budgetExhausted(from) || f.resetTooFar(from)
}

// chainExhausted, budgetExhausted and resetTooFar are the conditions of
// the guards retriesExhausted, budgetExhausted and resetTooFar, before a
// fallback takes the decision over.
func (f *Facts) chainExhausted(from states.State) bool {
	return decides(from, f) && f.retryableError() && f.RetryEnabled && (!f.countLeft() || (f.hintEndsChain() && !f.waitsForReset())) && !f.awaitingCredential()
}

func (f *Facts) budgetExhausted(from states.State) bool {
	return decides(from, f) && f.retryableError() && f.RetryEnabled && f.countLeft() && !f.awaitingCredential() &&
		((!f.hintEndsChain() && !f.retryWithinBudget() && !f.waitsForReset()) || (f.waitsForReset() && f.ResetWithin && !f.resetWithinBudget()))
}

func (f *Facts) resetTooFar(from states.State) bool {
	return decides(from, f) && f.waitsForReset() && !f.ResetWithin && !f.awaitingCredential()
}

// sharedHold reports whether a shared limit held the run that ended: it
// made no call, and the session waits out the limit's deadline.
func (f *Facts) sharedHold() bool { return f.Signal == RunEnded && f.SharedHoldMs > 0 }

// successLike reports whether M is not an error: no error class, or a silent
// or truncated overflow (Class Overflow without stopReason "error").
func (f *Facts) successLike() bool {
	return !f.Error && (f.Class == classify.None || f.Class == classify.Overflow)
}
