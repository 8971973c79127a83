package policy

import (
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transitions"
)

// wait is the backoff in progress: its timer's identity and when it ends;
// timer 0 when none is. Engine.resetWait says whether it waits for a
// usage limit's reset.
type wait struct {
	timer    TimerID
	deadline time.Time
}

func (w wait) pending() bool { return w.timer != 0 }

// resetAt is the reset the backoff in progress waits for, zero when it
// waits for none.
func (e *Engine) resetAt() time.Time {
	if e.wait.pending() && e.resetWait {
		return e.wait.deadline
	}
	return time.Time{}
}

// scheduleRetry schedules a retry of the message decided on after delay
// (docs/policy.md §3.4): it counts the attempt, reports it and arms the
// timer.
func (e *Engine) scheduleRetry(s *step, delay time.Duration) {
	m := s.msg
	e.attempt++
	e.emit(events.AutoRetryStart{Attempt: e.attempt, MaxAttempts: e.cfg.Retry.MaxRetries, DelayMs: delay.Milliseconds(), ErrorMessage: m.ErrorMessage,
		ErrorClass: s.v.class(), Provider: m.Provider, Model: m.Model, Credential: e.credential})
	e.startWait(s.at.Add(delay))
}

// scheduleResetWait schedules the retry of the message decided on for the
// reset of its limit (retry.waitForReset): it counts the attempt, reports
// it with the reset time and the delay until then, and arms the timer for
// the reset itself, so that no run starts before it.
func (e *Engine) scheduleResetWait(s *step) {
	m := s.msg
	reset := s.v.resetAt
	delay := max(reset.Sub(s.at), 0)
	e.attempt++
	e.resetWaited = true
	e.emit(events.AutoRetryStart{Attempt: e.attempt, MaxAttempts: e.cfg.Retry.MaxRetries, DelayMs: ceilMs(delay).Milliseconds(), ErrorMessage: m.ErrorMessage,
		ErrorClass: s.v.class(), Provider: m.Provider, Model: m.Model, Credential: e.credential, ResetAt: reset})
	e.startWait(reset)
	e.resetWait = true
}

// startWait arms the timer for a backoff ending at deadline.
func (e *Engine) startWait(deadline time.Time) {
	e.wait, e.resetWait = wait{timer: TimerID(e.ticket()), deadline: deadline}, false
	e.effect(Effect{Kind: StartTimer, Timer: e.wait.timer, Deadline: deadline})
}

// TimerFired is the firing of timer id. A firing that is not the backoff's
// in progress (an earlier one's, or one before the deadline) changes
// nothing; the backoff's starts the continuation.
func (e *Engine) TimerFired(at time.Time, id TimerID) []Effect {
	e.begin()
	w := e.wait
	current := w.pending() && w.timer == id && !at.Before(w.deadline)
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: current}})
	return e.end(at)
}

// stopWait disarms the timer of a backoff in progress.
func (e *Engine) stopWait() {
	if e.wait.pending() {
		e.wait, e.resetWait = wait{}, false
		e.effect(Effect{Kind: StopTimer})
	}
}

// AbortRetry cancels a pending backoff: the chain ends with auto_retry_end
// "Retry cancelled" and the turn with ErrRetryCancelled. With no backoff
// pending it does nothing.
func (e *Engine) AbortRetry(at time.Time) []Effect {
	e.begin()
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.AbortRetryCalled}})
	return e.end(at)
}
