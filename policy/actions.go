package policy

import (
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// actions carries out the table's actions: actions[i] does
// transitions.Actions()[i] and is named after it (whose Doc says what it
// does; TestActionsAreNamedAfterTheTable checks the binding); the machine
// hands over each rule's actions by position (fsm.Transition.Indexes),
// which its table's validation keeps in range. Each is handed its own copy
// of the step, so that no step moves to the heap to be read through a
// function of the table: a change one makes to it reaches no other action
// (none makes any; what an action leaves for another goes in the Engine).
// These small functions are the only code that acts on a decision; which
// of them run, and in what order, is the table's: nothing here names an
// action or a trigger.
var actions = [...]func(e *Engine, s step){
	scheduleBackoff, scheduleRetryNow, removeFailed, startContinuation, stopTimer, askCredentialStore, dropDecision,
	endChainFailed, endChainExhausted, endChainCancelled, endChainRecovered,
	markEpisode, clearEpisode, startCompactionOverflow, startCompactionThreshold, startCompactionOverflowBeforePrompt,
	startCompactionThresholdBeforePrompt, startCompactionManual, refuseCompaction, stopCompaction, reportRefusal, reportTooLarge,
	cancelRun, dropPrompt, failTurnStartFailed, failTurnExhausted, failTurnOverflow, failTurnRecoveryFailed,
	failTurnMessage, failTurnAborted, failTurnRetryCancelled, failTurnTooLarge,
	endChainExhaustedElapsed, failTurnExhaustedElapsed,
	scheduleResetWait, failTurnResetTooFar, endChainExhaustedReset,
	switchModel, revertModel, scheduleSharedWait,
}

// The retry chain.

func scheduleBackoff(e *Engine, s step) {
	e.scheduleRetry(&s, time.Duration(s.facts.DelayMs)*time.Millisecond)
}

func scheduleRetryNow(e *Engine, s step) { e.scheduleRetry(&s, 0) }

func scheduleResetWait(e *Engine, s step) { e.scheduleResetWait(&s) }

func scheduleSharedWait(e *Engine, s step) { e.scheduleSharedWait(&s) }

func removeFailed(e *Engine, s step) { e.removeMessage(s.at, s.msg.ID) }

func startContinuation(e *Engine, _ step) {
	e.wait, e.resetWait = wait{}, false
	e.setShared(nil)
	e.startRun(nil)
}

func stopTimer(e *Engine, _ step) { e.stopWait() }

func askCredentialStore(e *Engine, s step) { e.askCredentialStore(&s) }

func dropDecision(e *Engine, _ step) { e.pending = nil }

func endChainFailed(e *Engine, s step) {
	if s.msg != nil {
		e.endChain(s.at, s.msg.ErrorMessage, events.RetryFailed, s.v.class())
	} else {
		e.endChain(s.at, s.err.Error(), events.RetryFailed, classify.None)
	}
}

func endChainExhausted(e *Engine, s step) {
	e.endChainAt(s.at, s.msg.ErrorMessage, events.RetryExhausted, s.v.class(), events.LimitRetries)
}

func endChainExhaustedElapsed(e *Engine, s step) {
	e.endChainAt(s.at, s.msg.ErrorMessage, events.RetryExhausted, s.v.class(), events.LimitElapsed)
}

func endChainExhaustedReset(e *Engine, s step) {
	e.endChainAt(s.at, s.msg.ErrorMessage, events.RetryExhausted, s.v.class(), events.LimitReset)
}

func endChainCancelled(e *Engine, s step) {
	e.endChain(s.at, "Retry cancelled", events.RetryCancelled, classify.None)
}

func endChainRecovered(e *Engine, s step) {
	if e.attempt > 0 {
		ev := events.AutoRetryEnd{Success: true, Attempt: e.attempt, Outcome: events.RetryRecovered, ResetWait: e.resetWaited}
		e.emit(ev)
		e.recordChainEnd(s.at, ev)
		e.attempt, e.chain, e.resetWaited = 0, chain{}, false
	}
}

// The overflow episode and compactions.

func markEpisode(e *Engine, _ step) { e.setEpisode(true) }

func clearEpisode(e *Engine, _ step) { e.setEpisode(false) }

func startCompactionOverflow(e *Engine, s step) {
	e.startCompaction(s.at, transcript.ReasonOverflow, true, false)
}

func startCompactionThreshold(e *Engine, s step) {
	e.startCompaction(s.at, transcript.ReasonThreshold, false, false)
}

func startCompactionOverflowBeforePrompt(e *Engine, s step) {
	e.startCompaction(s.at, transcript.ReasonOverflow, false, true)
}

func startCompactionThresholdBeforePrompt(e *Engine, s step) {
	e.startCompaction(s.at, transcript.ReasonThreshold, false, true)
}

func startCompactionManual(e *Engine, s step) { e.startManualCompaction(&s) }

func refuseCompaction(e *Engine, _ step) {
	e.effect(Effect{Kind: FinishCompact, Err: ErrAlreadyCompacted})
}

func stopCompaction(e *Engine, _ step) {
	if c := e.comp; c != nil {
		e.cancelCompaction(c)
	}
}

func reportRefusal(e *Engine, s step) {
	const refused = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
	e.emit(events.AutoCompactionStart{Reason: transcript.ReasonOverflow})
	e.emit(events.AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: refused})
	e.recordCompactionFailed(s.at, transcript.ReasonOverflow, refused)
}

func reportTooLarge(e *Engine, s step) {
	e.emit(events.AutoCompactionStart{Reason: transcript.ReasonOverflow})
	msg := "Context overflow recovery failed: " + s.v.tooLarge.Error()
	e.emit(events.AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: msg})
	e.recordCompactionFailed(s.at, transcript.ReasonOverflow, msg)
}

// The run and the turn.

func cancelRun(e *Engine, s step) {
	if r := e.run; r != nil {
		r.aborted = true
		e.effect(Effect{Kind: CancelRun, Run: r.id, Cause: s.err})
	}
}

func dropPrompt(e *Engine, _ step) {
	if e.turn != nil {
		e.turn.prompt = nil
	}
}

func failTurnStartFailed(e *Engine, s step) { e.failTurn(fmt.Errorf("%w: %w", ErrStartFailed, s.err)) }

func failTurnExhausted(e *Engine, s step) {
	e.failTurnOn(&ExhaustedError{Attempts: s.facts.Attempt, Last: s.msg.ErrorMessage, Err: s.msg.Err}, s.v.class())
}

func failTurnExhaustedElapsed(e *Engine, s step) {
	f := s.facts
	delay := time.Duration(f.DelayMs) * time.Millisecond
	switch {
	case f.CredentialSwitched:
		delay = 0
	case f.ResetWaited && f.WaitForReset && f.ResetKnown && (f.UsageLimit || f.HintOverCap):
		// A further wait for a reset, past the budget.
		delay = time.Duration(f.ResetInMs) * time.Millisecond
	}
	e.failTurnOn(&ExhaustedError{Attempts: f.Attempt, Last: s.msg.ErrorMessage, Err: s.msg.Err,
		Budget: msToDuration(f.MaxElapsedMs), Elapsed: msToDuration(f.ElapsedMs), Delay: delay}, s.v.class())
}

func failTurnOverflow(e *Engine, s step) {
	e.failTurnOn(providerError(ErrOverflow, overflowText(s.msg), s.msg.Err), s.v.class())
}

func failTurnRecoveryFailed(e *Engine, s step) { e.failTurn(fmt.Errorf("%w: %w", ErrOverflow, s.err)) }

func failTurnMessage(e *Engine, s step) {
	switch m := s.msg; {
	case m.StopReason == transcript.StopReasonAborted:
		e.failTurn(ErrAborted)
	case m.IsError():
		e.failTurnOn(providerError(ErrProvider, m.ErrorMessage, m.Err), s.v.class())
	}
}

func failTurnAborted(e *Engine, _ step) { e.failTurn(ErrAborted) }

func failTurnRetryCancelled(e *Engine, _ step) { e.failTurn(ErrRetryCancelled) }

func failTurnResetTooFar(e *Engine, s step) {
	e.failTurnOn(&ExhaustedError{Attempts: s.facts.Attempt, Last: s.msg.ErrorMessage, Err: s.msg.Err,
		ResetAt: s.v.resetAt, MaxResetWaitMs: e.cfg.Retry.MaxResetWaitMs}, s.v.class())
}

func failTurnTooLarge(e *Engine, s step) {
	e.failTurnOn(fmt.Errorf("%w: %w", ErrOverflow, s.v.tooLarge), s.v.class())
}

// The model fallback.

func switchModel(e *Engine, s step) { e.switchModel(&s) }

func revertModel(e *Engine, _ step) { e.revertModel() }
