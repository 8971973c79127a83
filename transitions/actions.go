package transitions

// Action names one thing a rule does when it is taken, as data: the policy
// package carries each out in a case of its own, the diagrams
// draw them after the guard (trigger [guard] / action, action), and
// Doc says what each does.
type Action string

// The actions. An argument in parentheses is part of the name: the same
// step with another outcome is another action.
const (
	// The retry chain.
	ScheduleBackoff    Action = "scheduleBackoff"
	ScheduleRetryNow   Action = "scheduleRetryNow"
	ScheduleResetWait  Action = "scheduleResetWait"
	RemoveFailed       Action = "removeFailed"
	StartContinuation  Action = "startContinuation"
	StopTimer          Action = "stopTimer"
	AskCredentialStore Action = "askCredentialStore"
	DropDecision       Action = "dropDecision"
	EndChainFailed     Action = "endChain(failed)"
	EndChainExhausted  Action = "endChain(exhausted)"
	// EndChainExhaustedElapsed: the time budget ended the chain.
	EndChainExhaustedElapsed Action = "endChain(exhausted, elapsed)"
	EndChainCancelled        Action = "endChain(cancelled)"
	EndChainRecovered        Action = "endChain(recovered)"

	// The overflow episode and compactions.
	MarkEpisode                   Action = "markEpisode"
	ClearEpisode                  Action = "clearEpisode"
	StartOverflowRecovery         Action = "startCompaction(overflow)"
	StartThresholdCompaction      Action = "startCompaction(threshold)"
	StartCheckOverflowCompaction  Action = "startCompaction(overflow, before prompt)"
	StartCheckThresholdCompaction Action = "startCompaction(threshold, before prompt)"
	StartManualCompaction         Action = "startCompaction(manual)"
	RefuseCompaction              Action = "refuseCompaction"
	StopCompaction                Action = "stopCompaction"
	ReportRefusal                 Action = "reportRefusal"
	ReportTooLarge                Action = "reportTooLarge"

	// The run and the turn.
	CancelRun           Action = "cancelRun"
	DropPrompt          Action = "dropPrompt"
	FailTurnStartFailed Action = "failTurn(startFailed)"
	FailTurnExhausted   Action = "failTurn(exhausted)"
	// FailTurnExhaustedElapsed: the time budget ended the chain.
	FailTurnExhaustedElapsed Action = "failTurn(exhausted, elapsed)"
	FailTurnOverflow         Action = "failTurn(overflow)"
	FailTurnRecoveryFailed   Action = "failTurn(recoveryFailed)"
	FailTurnMessage          Action = "failTurn(message)"
	FailTurnAborted          Action = "failTurn(aborted)"
	FailTurnRetryCancelled   Action = "failTurn(retryCancelled)"
	FailTurnTooLarge         Action = "failTurn(tooLarge)"
	FailTurnResetTooFar      Action = "failTurn(resetTooFar)"
	// EndChainExhaustedReset: the usage limit's reset is too far to wait for.
	EndChainExhaustedReset Action = "endChain(exhausted, reset)"

	// The model fallback.
	SwitchModel Action = "switchModel"
	RevertModel Action = "revertModel"
	// ScheduleSharedWait: a limit shared by sessions holds the run's key.
	ScheduleSharedWait Action = "scheduleSharedWait"
)

// actionDocs says what each action does: docs/state-machine.md lists them.
var actionDocs = map[Action]string{
	ScheduleBackoff:          "counts one more attempt, draws the delay (exponential from retry.baseDelayMs, with jitter, capped at retry.maxDelayMs; the server's retry hint instead when retry.honorRetryAfter is on), emits `auto_retry_start` and arms the backoff timer",
	ScheduleRetryNow:         "as scheduleBackoff, with a delay of 0: the session already moved to a free credential",
	ScheduleResetWait:        "counts one more attempt, emits `auto_retry_start` with the reset time (`resetAt`, `resetAtMs`) and the delay until it, and arms the backoff timer for the reset itself: the continuation starts no earlier",
	RemoveFailed:             "removes the message decided on from the runtime context (history keeps it and records the removal)",
	StartContinuation:        "starts a continuation run on the runtime context",
	StopTimer:                "disarms the backoff timer, when one is armed",
	AskCredentialStore:       "tells the credential store the session's credential hit a usage limit (with the server's retry hint) and waits for its answer: the decision goes on when it comes, with credentialSwitched set",
	DropDecision:             "drops a decision waiting for the credential store's answer",
	EndChainFailed:           "ends an active chain as failed: `auto_retry_end` with the error of the message decided on (or of the run that could not start) and its class; nothing without a chain",
	EndChainExhausted:        "ends the chain as exhausted: `auto_retry_end` with the last error and limit `retries`",
	EndChainExhaustedElapsed: "ends the chain as exhausted by its time budget: `auto_retry_end` with the last error and limit `elapsed`",
	EndChainExhaustedReset:   "ends the chain as exhausted by a reset too far away: `auto_retry_end` with the last error and limit `reset`",
	EndChainCancelled:        "ends an active chain as cancelled: `auto_retry_end` \"Retry cancelled\"; nothing without a chain",
	EndChainRecovered:        "ends an active chain as recovered: `auto_retry_end` success; nothing without a chain",

	MarkEpisode:                   "marks the turn's overflow episode as compacted once: a second overflow in it is refused",
	ClearEpisode:                  "ends the turn's overflow episode: the next overflow gets its own recovery",
	StartOverflowRecovery:         "emits `auto_compaction_start` (overflow) and asks for a summary of all but the recent messages; a continuation follows it (willRetry). With nothing to compact it ends at once, failed",
	StartThresholdCompaction:      "emits `auto_compaction_start` (threshold) and asks for a summary; no continuation follows it. With nothing to compact it ends at once, failed",
	StartCheckOverflowCompaction:  "as startCompaction(overflow) for the check before a prompt: no continuation follows it and its failure does not fail the turn; the prompt is sent when it ends",
	StartCheckThresholdCompaction: "as startCompaction(threshold) for the check before a prompt; the prompt is sent when it ends",
	StartManualCompaction:         "asks for a summary with the caller's instructions, emitting no automatic compaction events; Compact returns its result, or ErrNothingToCompact at once when everything fits in the messages kept",
	RefuseCompaction:              "Compact returns ErrAlreadyCompacted; nothing else changes",
	StopCompaction:                "cancels the compaction in flight and reports it aborted (`auto_compaction_end` aborted, or ErrCompactionCancelled to Compact); an overflow recovery's turn fails with ErrOverflow",
	ReportRefusal:                 "emits the refusal pair: `auto_compaction_start` (overflow) and `auto_compaction_end` with the refusal's message",
	ReportTooLarge:                "emits `auto_compaction_start` (overflow) and `auto_compaction_end` failed with why no compaction can fit: \"the last message alone is N tokens, over the model's window of W\"",

	CancelRun:                "cancels the run in flight with the abort's cause: nothing it still reports can retry, compact or continue",
	DropPrompt:               "a prompt still waiting for the check before it is never sent",
	FailTurnStartFailed:      "fails the turn with ErrStartFailed and the run's error",
	FailTurnExhausted:        "fails the turn with an ExhaustedError (the attempts made, the last error)",
	FailTurnExhaustedElapsed: "fails the turn with an ExhaustedError naming the time budget (the attempts made, the time spent, the budget, the last error)",
	FailTurnOverflow:         "fails the turn with ErrOverflow and the provider's error",
	FailTurnRecoveryFailed:   "fails the turn with ErrOverflow and the compaction's error",
	FailTurnMessage:          "fails the turn by the message decided on: ErrAborted for an aborted one, ErrProvider for an error; a success fails nothing",
	FailTurnAborted:          "fails the turn with ErrAborted",
	FailTurnRetryCancelled:   "fails the turn with ErrRetryCancelled",
	FailTurnTooLarge:         "fails the turn with ErrOverflow and why: \"the last message alone is N tokens, over the model's window of W\", N by the calibrated count",
	FailTurnResetTooFar:      "fails the turn with an ExhaustedError that names the reset time (RFC 3339) and retry.maxResetWaitMs",

	SwitchModel:        "moves the session to the next model of fallback.models, for this run and the turns that follow until the cooldown is over, and emits `model_fallback` (from, to, why: overloaded, usage_limit or exhausted, and when the cooldown ends); a turn that fails later names every model it tried",
	RevertModel:        "moves the session back to its primary model and emits `model_revert`",
	ScheduleSharedWait: "emits `shared_limit_wait` (the key, the deadline, the reason) and arms the backoff timer for the shared limit's deadline; no attempt is counted and no message is removed (the run made no call); when the wait ends a continuation starts, which asks the limit again",
}

// Doc says what the action does, "" for an action the table does not know.
func (a Action) Doc() string { return actionDocs[a] }

// Index returns a's position in Actions(), -1 for an action the table does
// not know. A package that carries the actions out keeps one function per
// action in that order, named after it.
func (a Action) Index() int {
	if i, ok := actionIndex[a]; ok {
		return i
	}
	return -1
}

var actionIndex = func() map[Action]int {
	m := map[Action]int{}
	for i, a := range Actions() {
		m[a] = i
	}
	return m
}()

// Actions returns every action the table knows, in declaration order.
func Actions() []Action {
	return []Action{
		ScheduleBackoff, ScheduleRetryNow, RemoveFailed, StartContinuation, StopTimer, AskCredentialStore, DropDecision,
		EndChainFailed, EndChainExhausted, EndChainCancelled, EndChainRecovered,
		MarkEpisode, ClearEpisode, StartOverflowRecovery, StartThresholdCompaction, StartCheckOverflowCompaction,
		StartCheckThresholdCompaction, StartManualCompaction, RefuseCompaction, StopCompaction, ReportRefusal, ReportTooLarge,
		CancelRun, DropPrompt, FailTurnStartFailed, FailTurnExhausted, FailTurnOverflow, FailTurnRecoveryFailed,
		FailTurnMessage, FailTurnAborted, FailTurnRetryCancelled, FailTurnTooLarge,
		EndChainExhaustedElapsed, FailTurnExhaustedElapsed,
		ScheduleResetWait, FailTurnResetTooFar, EndChainExhaustedReset,
		SwitchModel, RevertModel,
		ScheduleSharedWait,
	}
}
