package policy

import (
	"math"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transitions"
)

// wait is the backoff in progress: its timer's identity and when it ends
// (in Unix nanoseconds: a waiting session keeps one, and a time.Time is
// three times the size); timer 0 when none is. Engine.resetWait says
// whether it waits for a usage limit's reset.
type wait struct {
	timer    TimerID
	deadline int64
}

func (w wait) pending() bool { return w.timer != 0 }

// end is when the backoff ends, in UTC.
func (w wait) end() time.Time { return time.Unix(0, w.deadline).UTC() }

// chain is what the engine knows of the retry chain in progress besides
// its attempt counter (and Engine.resetWaited): when its time budget
// started, at the decision on its first failure or at the end of its last
// wait for a reset, in Unix nanoseconds (as wait's deadline). The zero
// value: no chain, or one whose start is unknown (a snapshot of a chain
// without a budget may not have it).
type chain struct {
	start int64
}

// chainFrom is a chain whose budget starts at at.
func chainFrom(at time.Time) chain { return chain{start: max(unixNano(at), 1)} }

// lastInstant is the last instant the engine keeps, to the millisecond
// (2262-04-11T23:47:16.854Z): a deadline, a reset and a chain's start are
// kept as Unix nanoseconds, which go no further.
var lastInstant = time.UnixMilli(math.MaxInt64 / int64(time.Millisecond))

// untilLast is the time from at to lastInstant in whole milliseconds, 0
// when at is past it: no wait the engine schedules ends later, so a delay
// that would (maxDelay from today ends in 2318) waits until then instead,
// and the delayMs reported is still the wait scheduled.
func untilLast(at time.Time) time.Duration {
	return max(lastInstant.Sub(at), 0).Truncate(time.Millisecond)
}

// unixNano is t.UnixNano, saturated at int64's ends for a time outside
// the years 1678 to 2262 (where UnixNano's result is undefined): a clock
// that jumps beyond them still orders against the engine's deadlines.
func unixNano(t time.Time) int64 {
	switch {
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	}
	return t.UnixNano()
}

// started is when the chain's budget started, in UTC; the zero time when
// unknown.
func (c chain) started() time.Time {
	if c.start == 0 {
		return time.Time{}
	}
	return time.Unix(0, c.start).UTC()
}

// elapsedMs is how long the chain has run at at, in whole milliseconds:
// 0 with no chain (attempt 0), and never negative (a clock that went back
// counts as no time).
func (c chain) elapsedMs(attempt int, at time.Time) int64 {
	if attempt == 0 || c.start == 0 {
		return 0
	}
	return max(at.Sub(c.started()).Milliseconds(), 0)
}

// resetAt is the reset the backoff in progress waits for, zero when it
// waits for none.
func (e *Engine) resetAt() time.Time {
	if e.wait.pending() && e.resetWait {
		return e.wait.end()
	}
	return time.Time{}
}

// scheduleRetry schedules a retry of the message decided on after delay
// (docs/policy.md §3.4): it counts the attempt, reports it and arms the
// timer. The first retry of a chain starts its clock: the time budget
// counts from the decision on its first failure.
func (e *Engine) scheduleRetry(s *step, delay time.Duration) {
	m := s.msg
	if e.attempt == 0 {
		e.chain = chainFrom(s.at)
	}
	e.attempt++
	ev := events.AutoRetryStart{Attempt: e.attempt, MaxAttempts: e.cfg.Retry.MaxRetries, DelayMs: delay.Milliseconds(), ErrorMessage: m.ErrorMessage,
		ErrorClass: s.v.class(), Provider: m.Provider, Model: m.Model, Credential: s.credential}
	if budget := e.cfg.Retry.MaxElapsedMs; budget > 0 {
		ev.MaxElapsedMs, ev.ElapsedMs, ev.RemainingMs = budget, s.facts.ElapsedMs, budget-s.facts.ElapsedMs
	}
	e.emit(ev)
	e.recordRetry(s, ev)
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
	// The chain's first wait has its own bound (retry.maxResetWaitMs): the
	// time budget of the retries after it counts from the reset. A later
	// wait of the same chain ended within that budget (resetWithinBudget):
	// the budget still counts from the first reset, so resets that keep
	// coming end the chain once it runs out.
	if !e.resetWaited {
		e.chain, e.resetWaited = chainFrom(reset), true
	}
	ev := events.AutoRetryStart{Attempt: e.attempt, MaxAttempts: e.cfg.Retry.MaxRetries, DelayMs: ceilMs(delay).Milliseconds(), ErrorMessage: m.ErrorMessage,
		ErrorClass: s.v.class(), Provider: m.Provider, Model: m.Model, Credential: s.credential, ResetAt: reset}
	e.emit(ev)
	e.recordRetry(s, ev)
	e.startWait(reset)
	e.resetWait = true
}

// startWait arms the timer for a backoff ending at deadline.
func (e *Engine) startWait(deadline time.Time) {
	e.wait, e.resetWait = wait{timer: TimerID(e.ticket()), deadline: unixNano(deadline)}, false
	e.setShared(nil)
	ef := e.next()
	ef.Kind, ef.Timer, ef.Deadline = StartTimer, e.wait.timer, deadline
}

// sharedWait is a limit shared by the sessions of a process that holds
// the key of the session's provider and credential: the key and why, as
// the driver's limiter named them.
type sharedWait struct {
	key, reason string
}

// scheduleSharedWait waits out the shared limit that held the run about to
// start (docs/policy.md §3.9): it reports the wait and arms the timer for
// the limit's deadline. No attempt is counted: the run made no call.
func (e *Engine) scheduleSharedWait(s *step) {
	until := s.at.Add(time.Duration(s.facts.SharedHoldMs) * time.Millisecond)
	e.emit(events.SharedLimitWait{Key: s.hold.key, Until: until.UTC(), Reason: s.hold.reason})
	e.startWait(until)
	e.setShared(s.hold)
}

// setShared records the shared limit the backoff in progress waits out,
// nil for none. It is kept on the turn (an Engine keeps no room for it:
// TestEngineSize), which every run, and so every shared wait, belongs to.
func (e *Engine) setShared(sh *sharedWait) {
	if t := e.turn; t != nil {
		t.shared = sh
	}
}

// sharedWait is the shared limit the backoff in progress waits out, nil
// when it waits for none.
func (e *Engine) sharedWait() *sharedWait {
	if t := e.turn; t != nil && e.wait.pending() {
		return t.shared
	}
	return nil
}

// TimerFired is the firing of timer id. A firing that is not the backoff's
// in progress (an earlier one's, or one before the deadline) changes
// nothing; the backoff's starts the continuation.
func (e *Engine) TimerFired(at time.Time, id TimerID) []Effect {
	e.begin()
	w := e.wait
	current := w.pending() && w.timer == id && unixNano(at) >= w.deadline
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: current}})
	return e.end(at)
}

// stopWait disarms the timer of a backoff in progress.
func (e *Engine) stopWait() {
	if e.wait.pending() {
		e.wait, e.resetWait = wait{}, false
		e.setShared(nil)
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
