package policy

import (
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transitions"
)

// wait is the backoff in progress: its timer's identity and when it ends;
// timer 0 when none is.
type wait struct {
	timer    TimerID
	deadline time.Time
}

func (w wait) pending() bool { return w.timer != 0 }

// chain is what the engine knows of the retry chain in progress besides
// its attempt counter: when its first failure was decided on. The zero
// value: no chain.
type chain struct {
	start time.Time
}

// elapsedMs is how long the chain has run at at, in whole milliseconds:
// 0 with no chain (attempt 0), and never negative (a clock that went back
// counts as no time).
func (c chain) elapsedMs(attempt int, at time.Time) int64 {
	if attempt == 0 || c.start.IsZero() {
		return 0
	}
	return max(at.Sub(c.start).Milliseconds(), 0)
}

// scheduleRetry schedules a retry of the message decided on after delay
// (docs/policy.md §3.4): it counts the attempt, reports it and arms the
// timer. The first retry of a chain starts its clock: the time budget
// counts from the decision on its first failure.
func (e *Engine) scheduleRetry(s *step, delay time.Duration) {
	m := s.msg
	if e.attempt == 0 {
		e.chain = chain{start: s.at}
	}
	e.attempt++
	ev := events.AutoRetryStart{Attempt: e.attempt, MaxAttempts: e.cfg.Retry.MaxRetries, DelayMs: delay.Milliseconds(), ErrorMessage: m.ErrorMessage,
		ErrorClass: s.v.class(), Provider: m.Provider, Model: m.Model, Credential: e.credential}
	if budget := e.cfg.Retry.MaxElapsedMs; budget > 0 {
		ev.MaxElapsedMs, ev.ElapsedMs, ev.RemainingMs = budget, s.facts.ElapsedMs, budget-s.facts.ElapsedMs
	}
	e.emit(ev)
	e.startWait(s.at.Add(delay))
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
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: current}})
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
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.AbortRetryCalled}})
	return e.end(at)
}
