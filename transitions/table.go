package transitions

import (
	"slices"

	"github.com/agentfsm/agentfsm/states"
)

// Trigger is the input that fires one rule of the table: it names the edge
// the machine takes, as the diagrams and the state_change event name it.
// Each rule has its own trigger; what happened to the session is the
// Signal in Facts, and which rule's trigger fires is the guards' choice.
type Trigger string

// The triggers, in table order.
const (
	AgentEnd       Trigger = "agent_end"
	StartFailed    Trigger = "start_failed"
	Reply          Trigger = "reply"
	AskCredentials Trigger = "ask_credentials"
	Retry          Trigger = "retry"
	RetryNow       Trigger = "retry_now"
	Exhaust        Trigger = "exhaust"
	// ExhaustElapsed: the next retry would end past the chain's time
	// budget (retry.maxElapsedMs).
	ExhaustElapsed Trigger = "exhaust_elapsed"
	// WaitReset: a usage limit whose reset is known and near enough waits
	// for it (retry.waitForReset).
	WaitReset Trigger = "wait_reset"
	// ResetTooFar: a usage limit whose reset is further away than
	// retry.maxResetWaitMs ends the chain, naming the reset time.
	ResetTooFar Trigger = "reset_too_far"
	// Fallback: the decision goes on on the next model of fallback.models
	// (a fresh chain there) instead of retrying or failing the turn.
	Fallback Trigger = "fallback"
	// FallbackCompact: as Fallback, when the context does not fit the
	// next model: the switch compacts first, then continues.
	FallbackCompact Trigger = "fallback_compact"
	// Revert: a turn starts after fallback.cooldownMs on a fallback model:
	// the session goes back to its primary model.
	Revert    Trigger = "revert"
	Overflow  Trigger = "overflow"
	Threshold Trigger = "threshold"
	Refuse    Trigger = "refuse"
	// TooLarge: an overflow no compaction can make fit fails at once.
	TooLarge    Trigger = "too_large"
	Unrecovered Trigger = "unrecovered"
	// Accept: the decision takes the run's outcome as it is (a success,
	// an abort, or an error nothing recovers): the turn ends on it.
	Accept         Trigger = "accept"
	CheckOverflow  Trigger = "check_overflow"
	CheckThreshold Trigger = "check_threshold"
	CheckRoom      Trigger = "check_room"
	CheckTooLarge  Trigger = "check_too_large"
	Elapsed        Trigger = "elapsed"
	Compact        Trigger = "compact"
	// CompactInBackoff: Compact during a backoff ends the chain first.
	CompactInBackoff Trigger = "compact_in_backoff"
	CompactRefused   Trigger = "compact_refused"
	Resume           Trigger = "resume"
	CompactionEnd    Trigger = "compaction_end"
	RecoveryFailed   Trigger = "recovery_failed"
	Abort            Trigger = "abort"
	Cancel           Trigger = "cancel"
	CancelRetry      Trigger = "cancel_retry"
	// CancelCompaction: AbortCompaction stopped the compaction in flight.
	CancelCompaction Trigger = "cancel_compaction"
	Reset            Trigger = "reset"

	// WaitShared (after reply in the table): a limit shared by the
	// sessions of a process holds the key of the run about to start: the
	// session waits in backoff until the limit's deadline instead of
	// calling.
	WaitShared Trigger = "wait_shared"
)

// String returns the trigger's name.
func (t Trigger) String() string { return string(t) }

// Guard is a named predicate over the source state and the Facts. Holds must
// be pure: the same arguments always give the same answer, and it never
// changes the facts it is handed (by pointer: a machine tries many guards
// on the same facts, and a copy of them for each would cost more than the
// guard). The facts are never nil: Next and fsm's Step take no rule for
// nil facts, and a caller of Holds must not hand it nil.
type Guard struct {
	// Name is the guard's identifier, drawn on the diagram's edges.
	Name string
	// Doc says in words when the guard holds.
	Doc string
	// Holds reports whether the guard admits the transition from the given
	// source state with the given facts.
	Holds func(from states.State, f *Facts) bool
}

// Rule is one row of the transition table: in any state of From, when Guard
// holds, the machine moves to To and performs Actions, in order. A rule
// whose To is Stay (or is its source state) is internal: the machine stays
// where it is and only the actions happen.
type Rule struct {
	Trigger Trigger
	From    []states.State
	To      states.State
	Guard   Guard
	Actions []Action
}

// Stay is the To of an internal rule: the machine stays in its source
// state.
const Stay states.State = ""

// Internal reports whether r, taken from state from, leaves the machine
// where it is.
func (r Rule) Internal(from states.State) bool { return r.To == Stay || r.To == from }

// Target returns the state r leads to from state from.
func (r Rule) Target(from states.State) states.State {
	if r.To == Stay {
		return from
	}
	return r.To
}

// The guards. In classifying exactly one of them holds for any facts:
// accept's is the complement of the others, which exclude each other by
// class, settings and the credential store's answer. Everywhere else at
// most one holds.
var (
	guardRunEnded = Guard{
		Name: "runEnded",
		Doc:  "a run ended having produced an assistant message to decide on",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == RunEnded && f.Started && !f.sharedHold()
		},
	}
	guardStartFailed = Guard{
		Name: "startFailed",
		Doc:  "a run ended without producing an assistant message, and no shared limit held it: it could not start",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == RunEnded && !f.Started && !f.sharedHold()
		},
	}
	guardSharedLimitHolds = Guard{
		Name: "sharedLimitHolds",
		Doc:  "a limit shared by the sessions of a process holds the key (provider and credential) of the run about to start until a deadline still ahead (sharedHoldMs > 0): the run made no call",
		Holds: func(_ states.State, f *Facts) bool {
			return f.sharedHold()
		},
	}
	guardReplySucceeded = Guard{
		Name: "replySucceeded",
		Doc:  "an assistant message ended that is neither an error nor aborted",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == Replied && !f.Error && !f.Aborted
		},
	}
	guardAwaitingCredential = Guard{
		Name: "awaitingCredential",
		Doc:  "the run ended on a usage limit ∧ a credential store answers this session's usage limits, and has not answered yet",
		Holds: func(_ states.State, f *Facts) bool {
			return f.awaitingCredential()
		},
	}
	guardRetryAfterSwitch = Guard{
		Name: "retryAfterSwitch",
		Doc:  "retryable error ∧ retry enabled ∧ attempt < maxRetries (or maxRetries −1) ∧ the credential store switched the session to a free credential ∧ elapsed ≤ maxElapsedMs (or no budget) (∧ not the check before a prompt) ∧ no fallback due",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.retryableError() && f.RetryEnabled && f.countLeft() && f.CredentialSwitched && f.retryWithinBudget() &&
				!f.awaitingCredential() && !f.fallbackDue(from)
		},
	}
	guardRetryAllowed = Guard{
		Name: "retryAllowed",
		Doc:  "retryable error ∧ retry enabled ∧ attempt < maxRetries (or maxRetries −1) ∧ no credential switch ∧ no retry hint above the delay cap ∧ elapsed + the drawn delay ≤ maxElapsedMs (or no budget) ∧ no wait for a reset (∧ not the check before a prompt) ∧ no fallback due",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.retryableError() && f.RetryEnabled && f.countLeft() && !f.CredentialSwitched && !f.HintOverCap &&
				f.retryWithinBudget() && !f.waitsForReset() && !f.awaitingCredential() && !f.fallbackDue(from)
		},
	}
	guardResetWithin = Guard{
		Name: "resetWithin",
		Doc:  "retryable error ∧ retry enabled ∧ attempt < maxRetries (or maxRetries −1) ∧ no credential switch ∧ (a usage limit ∨ a retry hint above the delay cap) ∧ waitForReset ∧ the reset time known ∧ at most maxResetWaitMs away ∧ (the chain's first wait for a reset, which has its own bound, ∨ elapsed + the time until the reset ≤ maxElapsedMs, or no budget) (∧ not the check before a prompt) ∧ no fallback due",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.waitsForReset() && f.ResetWithin && f.resetWithinBudget() && !f.awaitingCredential() && !f.fallbackDue(from)
		},
	}
	guardResetTooFar = Guard{
		Name: "resetTooFar",
		Doc:  "as resetWithin, but the reset is more than maxResetWaitMs away ∧ no fallback due",
		Holds: func(from states.State, f *Facts) bool {
			return f.resetTooFar(from) && !f.fallbackDue(from)
		},
	}
	guardRetriesExhausted = Guard{
		Name: "retriesExhausted",
		Doc:  "retryable error ∧ retry enabled ∧ (attempt ≥ maxRetries, not −1 ∨ a retry hint above the delay cap, no credential switch and no wait for a reset) (∧ not the check before a prompt) ∧ no fallback due",
		Holds: func(from states.State, f *Facts) bool {
			return f.chainExhausted(from) && !f.fallbackDue(from)
		},
	}
	guardBudgetExhausted = Guard{
		Name: "budgetExhausted",
		Doc:  "retryable error ∧ retry enabled ∧ attempt < maxRetries (or maxRetries −1) ∧ maxElapsedMs > 0 ∧ (no retry hint above the delay cap that ends the chain ∧ no wait for a reset ∧ elapsed + the delay of the retry (0 after a credential switch) > maxElapsedMs ∨ a wait for a reset at most maxResetWaitMs away, not the chain's first, that would end past maxElapsedMs) (∧ not the check before a prompt) ∧ no fallback due",
		Holds: func(from states.State, f *Facts) bool {
			return f.budgetExhausted(from) && !f.fallbackDue(from)
		},
	}
	guardOverflowRecoverable = Guard{
		Name: "overflowRecoverable",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction enabled ∧ episode not yet compacted ∧ not tooLarge (from idle: only the check before a prompt, whose prompt is not promptTooLarge)",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.sameModelOverflow() && !f.Stale && f.CompactionEnabled && !f.EpisodeCompacted &&
				!f.tooLarge() && !f.promptTooLarge() && !f.awaitingCredential()
		},
	}
	guardOverflowTooLarge = Guard{
		Name: "overflowTooLarge",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction enabled ∧ episode not yet compacted ∧ what every compaction keeps leaves, calibrated, no room for a summary under the window less reserveTokens (tooLarge; not the check before a prompt)",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.sameModelOverflow() && !f.Stale && f.CompactionEnabled && !f.EpisodeCompacted &&
				f.tooLarge() && !f.awaitingCredential()
		},
	}
	guardOverThreshold = Guard{
		Name: "overThreshold",
		Doc:  "not an error ∧ not aborted (except before a prompt) ∧ not a same-model overflow ∧ not stale ∧ compaction enabled ∧ tokens over the threshold (from idle: only the check before a prompt, whose prompt is not promptTooLarge)",
		Holds: func(from states.State, f *Facts) bool {
			skipAborted := f.Aborted && f.Signal != PromptCheck
			return decides(from, f) && f.successLike() && !skipAborted && !f.sameModelOverflow() && !f.Stale &&
				f.CompactionEnabled && f.OverThreshold() && !f.promptTooLarge() && !f.awaitingCredential()
		},
	}
	guardPromptTooLarge = Guard{
		Name: "promptTooLarge",
		Doc:  "the check before a prompt ∧ the new prompt alone leaves, calibrated, no room for a summary under the window less reserveTokens (whatever the settings: no compaction can make it fit)",
		Holds: func(from states.State, f *Facts) bool {
			return from == states.Idle && f.promptTooLarge()
		},
	}
	guardPromptOverWindow = Guard{
		Name: "promptOverWindow",
		Doc:  "the check before a prompt ∧ compaction enabled ∧ the context with the new prompt is, calibrated, over the window less reserveTokens ∧ not promptTooLarge ∧ neither overflowRecoverable nor overThreshold holds",
		Holds: func(from states.State, f *Facts) bool {
			return from == states.Idle && f.Signal == PromptCheck && f.CompactionEnabled && f.PromptOverWindow && !f.PromptTooLarge &&
				!guardOverflowRecoverable.Holds(from, f) && !guardOverThreshold.Holds(from, f)
		},
	}
	guardOverflowRepeated = Guard{
		Name: "overflowRepeated",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction enabled ∧ episode already compacted once",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.sameModelOverflow() && !f.Stale && f.CompactionEnabled && f.EpisodeCompacted && !f.awaitingCredential()
		},
	}
	guardOverflowNotCompacted = Guard{
		Name: "overflowNotCompacted",
		Doc:  "overflow ∧ same model ∧ not stale ∧ compaction disabled",
		Holds: func(from states.State, f *Facts) bool {
			return decides(from, f) && f.sameModelOverflow() && !f.Stale && !f.CompactionEnabled && !f.awaitingCredential()
		},
	}
	guardNothingToDo = Guard{
		Name: "nothingToDo",
		Doc:  "a run's end or the credential store's answer, and none of awaitingCredential, fallbackSwitch, fallbackCompact, retryAfterSwitch, retryAllowed, resetWithin, resetTooFar, retriesExhausted, budgetExhausted, overflowRecoverable, overflowTooLarge, overThreshold, overflowRepeated, overflowNotCompacted holds",
		Holds: func(from states.State, f *Facts) bool {
			if !decides(from, f) {
				return false
			}
			for _, g := range []*Guard{&guardAwaitingCredential, &guardFallbackSwitch, &guardFallbackCompact, &guardRetryAfterSwitch, &guardRetryAllowed, &guardResetWithin, &guardResetTooFar, &guardRetriesExhausted, &guardBudgetExhausted,
				&guardOverflowRecoverable, &guardOverflowTooLarge, &guardOverThreshold, &guardOverflowRepeated, &guardOverflowNotCompacted} {
				if g.Holds(from, f) {
					return false
				}
			}
			return true
		},
	}
	guardFallbackSwitch = Guard{
		Name: "fallbackSwitch",
		Doc:  "fallback due (retryable error ∧ a next model in fallback.models ∧ (an overload with fallback.after \"overloaded\" ∨ a usage limit no credential switch answered ∨ retry off ∨ the chain would end: retriesExhausted, budgetExhausted or resetTooFar before the fallback)) ∧ not (the context over the next model's compaction threshold ∧ compaction enabled)",
		Holds: func(from states.State, f *Facts) bool {
			return f.fallbackDue(from) && !(f.FallbackTooSmall && f.CompactionEnabled)
		},
	}
	guardFallbackCompact = Guard{
		Name: "fallbackCompact",
		Doc:  "fallback due ∧ the context, calibrated, over the next model's compaction threshold ∧ compaction enabled",
		Holds: func(from states.State, f *Facts) bool {
			return f.fallbackDue(from) && f.FallbackTooSmall && f.CompactionEnabled
		},
	}
	guardCooldownOver = Guard{
		Name: "cooldownOver",
		Doc:  "a turn starts ∧ the session is on a fallback model ∧ fallback.cooldownMs has passed since it switched there",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == TurnStarted && f.OnFallback && f.CooldownOver
		},
	}
	guardCurrentTimerFired = Guard{
		Name: "currentTimerFired",
		Doc:  "the timer of the backoff in progress fired",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == TimerFired && f.CurrentTimer
		},
	}
	guardCompactRequested = Guard{
		Name: "compactRequested",
		Doc:  "Compact() ∧ something was added to history since the last compaction",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == CompactCalled && !f.AlreadyCompacted
		},
	}
	guardAlreadyCompacted = Guard{
		Name: "alreadyCompacted",
		Doc:  "Compact() ∧ nothing was added to history since the last compaction",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == CompactCalled && f.AlreadyCompacted
		},
	}
	guardCompactedWillRetry = Guard{
		Name: "compactedWillRetry",
		Doc:  "the compaction succeeded ∧ it is an overflow recovery (willRetry)",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == CompactionEnded && f.Compacted && f.WillRetry
		},
	}
	guardCompactionEnded = Guard{
		Name: "compactionEnded",
		Doc:  "the compaction ended, with or without a result, and it is no overflow recovery (no willRetry)",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == CompactionEnded && !f.WillRetry
		},
	}
	guardRecoveryFailed = Guard{
		Name: "recoveryFailed",
		Doc:  "the compaction of an overflow recovery (willRetry) ended without a result",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == CompactionEnded && !f.Compacted && f.WillRetry
		},
	}
	guardAbortCalled = Guard{
		Name: "abortCalled",
		Doc:  "Abort()",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == AbortCalled
		},
	}
	guardAbortRetryCalled = Guard{
		Name: "abortRetryCalled",
		Doc:  "AbortRetry()",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == AbortRetryCalled
		},
	}
	guardAbortCompactionCalled = Guard{
		Name: "abortCompactionCalled",
		Doc:  "AbortCompaction() ∧ the compaction's entry is not being written yet (past that it cannot be cancelled)",
		Holds: func(_ states.State, f *Facts) bool {
			return f.Signal == AbortCompactionCalled && !f.Committing
		},
	}
	guardAlways = Guard{
		Name:  "always",
		Doc:   "always, at once",
		Holds: func(states.State, *Facts) bool { return true },
	}
)

// decides reports whether the facts are a decision's: in idle only the
// check before a prompt, elsewhere (classifying) a run's end or the
// credential store's answer.
func decides(from states.State, f *Facts) bool {
	if from == states.Idle {
		return f.Signal == PromptCheck
	}
	return f.Signal == RunEnded || f.Signal == CredentialAnswered
}

// Shorthands for the table.
var (
	idle        = states.Idle
	classifying = states.Classifying
	backoff     = states.Backoff
	continuing  = states.Continuing
	compacting  = states.Compacting
	exhausted   = states.Exhausted
	cancelled   = states.Cancelled
)

func from(s ...states.State) []states.State { return s }

func do(a ...Action) []Action { return a }

var table = Rules{
	// A run ends.
	{AgentEnd, from(idle, continuing), classifying, guardRunEnded, nil},
	{StartFailed, from(idle, continuing), idle, guardStartFailed, do(EndChainFailed, FailTurnStartFailed)},
	{Reply, from(idle, continuing), Stay, guardReplySucceeded, do(ClearEpisode, EndChainRecovered)},
	{WaitShared, from(idle, continuing), backoff, guardSharedLimitHolds, do(ScheduleSharedWait)},

	// The decision at agent_end.
	{AskCredentials, from(classifying), Stay, guardAwaitingCredential, do(AskCredentialStore)},
	{Retry, from(classifying), backoff, guardRetryAllowed, do(ScheduleBackoff, RemoveFailed)},
	{RetryNow, from(classifying), backoff, guardRetryAfterSwitch, do(ScheduleRetryNow, RemoveFailed)},
	{Fallback, from(classifying), continuing, guardFallbackSwitch, do(EndChainFailed, RemoveFailed, SwitchModel, StartContinuation)},
	{FallbackCompact, from(classifying), compacting, guardFallbackCompact, do(EndChainFailed, RemoveFailed, SwitchModel, StartOverflowRecovery)},
	{Exhaust, from(classifying), exhausted, guardRetriesExhausted, do(EndChainExhausted, FailTurnExhausted)},
	{ExhaustElapsed, from(classifying), exhausted, guardBudgetExhausted, do(EndChainExhaustedElapsed, FailTurnExhaustedElapsed)},
	{WaitReset, from(classifying), backoff, guardResetWithin, do(ScheduleResetWait, RemoveFailed)},
	{ResetTooFar, from(classifying), exhausted, guardResetTooFar, do(EndChainExhaustedReset, FailTurnResetTooFar)},
	{Overflow, from(classifying), compacting, guardOverflowRecoverable, do(EndChainFailed, MarkEpisode, RemoveFailed, StartOverflowRecovery)},
	{TooLarge, from(classifying), idle, guardOverflowTooLarge, do(EndChainFailed, ReportTooLarge, FailTurnTooLarge)},
	{Threshold, from(classifying), compacting, guardOverThreshold, do(EndChainFailed, StartThresholdCompaction)},
	{Refuse, from(classifying), idle, guardOverflowRepeated, do(EndChainFailed, ReportRefusal, FailTurnOverflow)},
	{Unrecovered, from(classifying), idle, guardOverflowNotCompacted, do(EndChainFailed, FailTurnOverflow)},
	{Accept, from(classifying), idle, guardNothingToDo, do(EndChainFailed, FailTurnMessage)},

	// A turn starts: a fallback whose cooldown is over goes back to the
	// primary model.
	{Revert, from(idle), Stay, guardCooldownOver, do(RevertModel)},

	// The check before a prompt.
	{CheckOverflow, from(idle), compacting, guardOverflowRecoverable, do(RemoveFailed, StartCheckOverflowCompaction)},
	{CheckThreshold, from(idle), compacting, guardOverThreshold, do(StartCheckThresholdCompaction)},
	{CheckRoom, from(idle), compacting, guardPromptOverWindow, do(StartCheckThresholdCompaction)},
	{CheckTooLarge, from(idle), Stay, guardPromptTooLarge, do(ReportTooLarge, DropPrompt, FailTurnTooLarge)},

	// A backoff ends.
	{Elapsed, from(backoff), continuing, guardCurrentTimerFired, do(StartContinuation)},

	// A compaction asked for, and a compaction's end.
	{Compact, from(idle), compacting, guardCompactRequested, do(StartManualCompaction)},
	{CompactInBackoff, from(backoff), compacting, guardCompactRequested, do(StopTimer, EndChainCancelled, FailTurnRetryCancelled, StartManualCompaction)},
	{CompactRefused, from(idle, backoff), Stay, guardAlreadyCompacted, do(RefuseCompaction)},
	{Resume, from(compacting), continuing, guardCompactedWillRetry, do(StartContinuation)},
	{CompactionEnd, from(compacting), idle, guardCompactionEnded, nil},
	{RecoveryFailed, from(compacting), idle, guardRecoveryFailed, do(FailTurnRecoveryFailed)},

	// Aborts.
	{Abort, from(idle), Stay, guardAbortCalled, do(FailTurnAborted, CancelRun, DropPrompt)},
	{Cancel, from(classifying, backoff, continuing, compacting), cancelled, guardAbortCalled,
		do(FailTurnAborted, CancelRun, DropDecision, StopTimer, EndChainCancelled, StopCompaction, DropPrompt)},
	{CancelRetry, from(backoff), cancelled, guardAbortRetryCalled, do(StopTimer, EndChainCancelled, FailTurnRetryCancelled)},
	{CancelCompaction, from(compacting), cancelled, guardAbortCompactionCalled, do(StopCompaction)},

	// The pass-through states.
	{Reset, from(exhausted, cancelled), idle, guardAlways, nil},
}

// Rules is a transition table: the rules in order.
type Rules []Rule

// Table returns the transition table, in the order of the policy's
// specification. The result is a deep copy: changing it changes nothing here.
func Table() Rules {
	out := make(Rules, len(table))
	for i, r := range table {
		r.From = slices.Clone(r.From)
		r.Actions = slices.Clone(r.Actions)
		out[i] = r
	}
	return out
}

// Next returns the rule of rs that applies in state from with facts f, and
// ok = false when none does (the occurrence changes nothing in that state,
// such as AbortRetry with no wait pending or a timer from an earlier
// backoff). The rule shares its From and Actions with rs: do not change
// them.
//
// Table's guards are written so that at most one rule applies; the
// package's tests check that over every state and every combination of
// facts. The guards read f; nothing changes it. Nil facts take no rule.
func (rs Rules) Next(from states.State, f *Facts) (r Rule, ok bool) {
	if f == nil {
		return Rule{}, false
	}
	for i := range rs {
		r := &rs[i]
		if slices.Contains(r.From, from) && r.Guard.Holds(from, f) {
			return *r, true
		}
	}
	return Rule{}, false
}
