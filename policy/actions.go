package policy

import (
	"fmt"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transitions"
)

// actions carries out each action of the table (transitions.Action, whose
// Doc says what each does). They are the only code that acts on a
// decision; which of them run, and in what order, is the table's.
var actions map[transitions.Action]func(e *Engine, s *step)

func init() {
	actions = map[transitions.Action]func(e *Engine, s *step){
		transitions.ScheduleBackoff: func(e *Engine, s *step) {
			e.scheduleRetry(s, retryDelay(e.cfg.Retry, e.attempt+1, s.draw, s.v.RetryAfter, s.v.HasRetryAfter))
		},
		transitions.ScheduleRetryNow: func(e *Engine, s *step) { e.scheduleRetry(s, 0) },
		transitions.RemoveFailed:     func(e *Engine, s *step) { e.removeMessage(s.at, s.msg.ID) },
		transitions.StartContinuation: func(e *Engine, _ *step) {
			e.wait = wait{}
			e.startRun(nil)
		},
		transitions.StopTimer:          func(e *Engine, _ *step) { e.stopWait() },
		transitions.AskCredentialStore: (*Engine).askCredentialStore,
		transitions.DropDecision:       func(e *Engine, _ *step) { e.pending = nil },
		transitions.EndChainFailed: func(e *Engine, s *step) {
			if s.msg != nil {
				e.endChain(s.msg.ErrorMessage, RetryFailed, s.v.class())
			} else {
				e.endChain(s.err.Error(), RetryFailed, classify.None)
			}
		},
		transitions.EndChainExhausted: func(e *Engine, s *step) { e.endChain(s.msg.ErrorMessage, RetryExhausted, s.v.class()) },
		transitions.EndChainCancelled: func(e *Engine, _ *step) { e.endChain("Retry cancelled", RetryCancelled, classify.None) },
		transitions.EndChainRecovered: func(e *Engine, _ *step) {
			if e.attempt > 0 {
				e.emit(AutoRetryEnd{Success: true, Attempt: e.attempt, Outcome: RetryRecovered})
				e.attempt = 0
			}
		},

		transitions.MarkEpisode:                   func(e *Engine, _ *step) { e.setEpisode(true) },
		transitions.ClearEpisode:                  func(e *Engine, _ *step) { e.setEpisode(false) },
		transitions.StartOverflowRecovery:         func(e *Engine, s *step) { e.startCompaction(s.at, ReasonOverflow, true, false) },
		transitions.StartThresholdCompaction:      func(e *Engine, s *step) { e.startCompaction(s.at, ReasonThreshold, false, false) },
		transitions.StartCheckOverflowCompaction:  func(e *Engine, s *step) { e.startCompaction(s.at, ReasonOverflow, false, true) },
		transitions.StartCheckThresholdCompaction: func(e *Engine, s *step) { e.startCompaction(s.at, ReasonThreshold, false, true) },
		transitions.StartManualCompaction:         (*Engine).startManualCompaction,
		transitions.RefuseCompaction: func(e *Engine, _ *step) {
			e.effect(Effect{Kind: FinishCompact, Err: ErrAlreadyCompacted})
		},
		transitions.StopCompaction: func(e *Engine, _ *step) {
			if c := e.comp; c != nil {
				e.cancelCompaction(c)
			}
		},
		transitions.ReportRefusal: func(e *Engine, _ *step) {
			const refused = "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."
			e.emit(AutoCompactionStart{Reason: ReasonOverflow})
			e.emit(AutoCompactionEnd{Aborted: false, WillRetry: false, ErrorMessage: refused})
		},

		transitions.CancelRun: func(e *Engine, s *step) {
			if r := e.run; r != nil {
				r.aborted = true
				e.effect(Effect{Kind: CancelRun, Run: r.id, Cause: s.err})
			}
		},
		transitions.DropPrompt: func(e *Engine, _ *step) {
			if e.turn != nil {
				e.turn.prompt = nil
			}
		},
		transitions.FailTurnStartFailed: func(e *Engine, s *step) { e.failTurn(fmt.Errorf("%w: %w", ErrStartFailed, s.err)) },
		transitions.FailTurnExhausted: func(e *Engine, s *step) {
			e.failTurnOn(&ExhaustedError{Attempts: s.facts.Attempt, Last: s.msg.ErrorMessage, Err: s.msg.Err}, s.v.class())
		},
		transitions.FailTurnOverflow: func(e *Engine, s *step) {
			e.failTurnOn(providerError(ErrOverflow, overflowText(s.msg), s.msg.Err), s.v.class())
		},
		transitions.FailTurnRecoveryFailed: func(e *Engine, s *step) { e.failTurn(fmt.Errorf("%w: %w", ErrOverflow, s.err)) },
		transitions.FailTurnMessage: func(e *Engine, s *step) {
			switch m := s.msg; {
			case m.StopReason == classify.StopReasonAborted:
				e.failTurn(ErrAborted)
			case m.IsError():
				e.failTurnOn(providerError(ErrProvider, m.ErrorMessage, m.Err), s.v.class())
			}
		},
		transitions.FailTurnAborted:        func(e *Engine, _ *step) { e.failTurn(ErrAborted) },
		transitions.FailTurnRetryCancelled: func(e *Engine, _ *step) { e.failTurn(ErrRetryCancelled) },
	}
}
