package policy

import (
	"time"

	"github.com/agentfsm/agentfsm/transitions"
)

// wait is the backoff in progress: its timer's identity and when it ends;
// timer 0 when none is.
type wait struct {
	timer    TimerID
	deadline time.Time
}

func (w wait) pending() bool { return w.timer != 0 }

// beginRetry schedules a retry of m (docs/policy.md §3.4): at once after a
// credential switch.
func (e *Engine) beginRetry(at time.Time, m *Message, v verdict, draw float64) {
	e.attempt++
	delay := retryDelay(e.cfg.Retry, e.attempt, draw, v.RetryAfter, v.HasRetryAfter)
	if v.switched {
		delay = 0
	}
	e.emit(AutoRetryStart{Attempt: e.attempt, MaxAttempts: e.cfg.Retry.MaxRetries, DelayMs: delay.Milliseconds(), ErrorMessage: m.ErrorMessage,
		ErrorClass: v.class(), Provider: m.Provider, Model: m.Model, Credential: e.credential})
	e.removeMessage(at, m.ID)
	e.startWait(at.Add(delay))
}

// startWait arms the timer for a backoff ending at deadline.
func (e *Engine) startWait(deadline time.Time) {
	e.wait = wait{timer: TimerID(e.ticket()), deadline: deadline}
	e.effect(Effect{Kind: StartTimer, Timer: e.wait.timer, Deadline: deadline})
}

// TimerFired is the firing of timer id. A firing that is not the backoff's
// in progress (an earlier one's, or one before the deadline) changes
// nothing; the backoff's starts the continuation.
func (e *Engine) TimerFired(at time.Time, id TimerID) []Effect {
	e.begin()
	w := e.wait
	current := w.pending() && w.timer == id && !at.Before(w.deadline)
	if _, ok := e.step(transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: current}); ok {
		e.wait = wait{}
		e.startRun(nil)
	}
	return e.end(at)
}

// stopWait disarms the timer of a backoff in progress.
func (e *Engine) stopWait() {
	if e.wait.pending() {
		e.wait = wait{}
		e.effect(Effect{Kind: StopTimer})
	}
}

// AbortRetry cancels a pending backoff: the chain ends with auto_retry_end
// "Retry cancelled" and the turn with ErrRetryCancelled. With no backoff
// pending it does nothing.
func (e *Engine) AbortRetry(at time.Time) []Effect {
	e.begin()
	e.abortRetry()
	return e.end(at)
}

func (e *Engine) abortRetry() {
	if _, ok := e.step(transitions.Facts{Signal: transitions.AbortRetryCalled}); !ok {
		return
	}
	e.stopWait()
	e.cancelChain()
	e.failTurn(ErrRetryCancelled)
	e.passThrough()
}

// cancelChain ends an active chain as cancelled.
func (e *Engine) cancelChain() {
	if e.attempt > 0 {
		e.emit(AutoRetryEnd{Success: false, Attempt: e.attempt, FinalError: "Retry cancelled", Outcome: RetryCancelled})
		e.attempt = 0
	}
}
