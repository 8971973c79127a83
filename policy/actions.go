package policy

import (
	"fmt"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transitions"
)

// act carries out the action a of the table (transitions.Action, whose Doc
// says what each does) for the step s, and reports whether it knows a. Its
// cases are the only code that acts on a decision; which of them run, and
// in what order, is the table's. A switch rather than a map of functions:
// a call through a function value would move every step to the heap.
func (e *Engine) act(a transitions.Action, s *step) bool {
	switch a {
	case transitions.ScheduleBackoff:
		e.scheduleRetry(s, retryDelay(e.cfg.Retry, e.attempt+1, s.draw, s.v.RetryAfter, s.v.HasRetryAfter))
	case transitions.ScheduleRetryNow:
		e.scheduleRetry(s, 0)
	case transitions.RemoveFailed:
		e.removeMessage(s.at, s.msg.ID)
	case transitions.StartContinuation:
		e.wait = wait{}
		e.startRun(nil)
	case transitions.StopTimer:
		e.stopWait()
	case transitions.AskCredentialStore:
		e.askCredentialStore(s)
	case transitions.DropDecision:
		e.pending = nil
	case transitions.EndChainFailed:
		if s.msg != nil {
			e.endChain(s.msg.ErrorMessage, RetryFailed, s.v.class())
		} else {
			e.endChain(s.err.Error(), RetryFailed, classify.None)
		}
	case transitions.EndChainExhausted:
		e.endChain(s.msg.ErrorMessage, RetryExhausted, s.v.class())
	case transitions.EndChainCancelled:
		e.endChain("Retry cancelled", RetryCancelled, classify.None)
	case transitions.EndChainRecovered:
		if e.attempt > 0 {
			e.emit(AutoRetryEnd{Success: true, Attempt: e.attempt, Outcome: RetryRecovered})
			e.attempt = 0
		}

	case transitions.MarkEpisode:
		e.setEpisode(true)
	case transitions.ClearEpisode:
		e.setEpisode(false)
	case transitions.StartOverflowRecovery:
		e.startCompaction(s.at, ReasonOverflow, true, false)
	case transitions.StartThresholdCompaction:
		e.startCompaction(s.at, ReasonThreshold, false, false)
	case transitions.StartCheckOverflowCompaction:
		e.startCompaction(s.at, ReasonOverflow, false, true)
	case transitions.StartCheckThresholdCompaction:
		e.startCompaction(s.at, ReasonThreshold, false, true)
	case transitions.StartManualCompaction:
		e.startManualCompaction(s)
	case transitions.RefuseCompaction:
		e.effect(Effect{Kind: FinishCompact, Err: ErrAlreadyCompacted})
	case transitions.StopCompaction:
		if c := e.comp; c != nil {
			e.cancelCompaction(c)
		}
	case transitions.ReportRefusal:
		const refused = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
		e.emit(AutoCompactionStart{Reason: ReasonOverflow})
		e.emit(AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: refused})

	case transitions.CancelRun:
		if r := e.run; r != nil {
			r.aborted = true
			e.effect(Effect{Kind: CancelRun, Run: r.id, Cause: s.err})
		}
	case transitions.DropPrompt:
		if e.turn != nil {
			e.turn.prompt = nil
		}
	case transitions.FailTurnStartFailed:
		e.failTurn(fmt.Errorf("%w: %w", ErrStartFailed, s.err))
	case transitions.FailTurnExhausted:
		e.failTurnOn(&ExhaustedError{Attempts: s.facts.Attempt, Last: s.msg.ErrorMessage, Err: s.msg.Err}, s.v.class())
	case transitions.FailTurnOverflow:
		e.failTurnOn(providerError(ErrOverflow, overflowText(s.msg), s.msg.Err), s.v.class())
	case transitions.FailTurnRecoveryFailed:
		e.failTurn(fmt.Errorf("%w: %w", ErrOverflow, s.err))
	case transitions.FailTurnMessage:
		switch m := s.msg; {
		case m.StopReason == classify.StopReasonAborted:
			e.failTurn(ErrAborted)
		case m.IsError():
			e.failTurnOn(providerError(ErrProvider, m.ErrorMessage, m.Err), s.v.class())
		}
	case transitions.FailTurnAborted:
		e.failTurn(ErrAborted)
	case transitions.FailTurnRetryCancelled:
		e.failTurn(ErrRetryCancelled)
	default:
		return false
	}
	return true
}
