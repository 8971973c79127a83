package policy

import (
	"time"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// turn is the user's turn in flight.
type turn struct {
	err error
	// class is the class of the error in the message that failed the
	// turn, when one did.
	class classify.Class
	// prompt is the user's message, waiting for the check before a prompt
	// to finish; nil once sent.
	prompt *transcript.Message
	// episodeCompacted marks the turn's overflow episode as compacted
	// once: each turn starts a new episode.
	episodeCompacted bool
	// shared is the limit shared by sessions that the backoff in
	// progress waits out (wait_shared); nil for any other backoff.
	shared *sharedWait
}

// busy reports whether a turn, a run or a compaction is in flight.
func (e *Engine) busy() bool {
	return e.turn != nil || e.run != nil || e.pending != nil || e.comp != nil || e.state() != states.Idle
}

// Prompt starts a turn with text as the user's next message: the check
// before a prompt (docs/policy.md §4.6), then the user's run. It returns
// ErrBusy, and no effects, while a turn, a run or a compaction is in
// flight. The turn ends with a FinishTurn effect, once the run, every retry
// it triggers and any overflow recovery have settled.
func (e *Engine) Prompt(at time.Time, text string) ([]Effect, error) {
	if e.busy() {
		return nil, ErrBusy
	}
	e.begin()
	e.turn = &turn{prompt: &transcript.Message{ID: e.ctx.newID("user"), Role: transcript.RoleUser, Content: transcript.TextContent(wiretext.String(text)), Timestamp: at.UnixMilli()}}
	if fb := e.fb; fb != nil {
		e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.TurnStarted, OnFallback: fb.at > 0, CooldownOver: at.UnixNano() >= fb.until}})
		fb.from = fb.at
	}
	e.checkPrompt(at)
	return e.end(at), nil
}

// checkPrompt is the check before a prompt (docs/policy.md §4.6): the
// compaction check on the last assistant message, and whether the prompt
// fits. With the model's window known, the prompt alone is weighed
// (PromptTooLarge: no compaction can make room for it, so it is not sent)
// and the runtime context with it (PromptOverWindow): its calibrated size,
// at least the last call's usage and the count of an overflow that still
// stands, plus the prompt's, over the window less reserveTokens.
func (e *Engine) checkPrompt(at time.Time) {
	last := e.lastAssistant()
	var f transitions.Facts
	var v verdict
	if last != nil {
		f, v = e.facts(at, last, transitions.PromptCheck, 0)
	} else {
		f = e.settingsFacts(at, transitions.PromptCheck)
	}
	if window := e.window(); window > 0 {
		if tl := e.promptTooLarge(window); tl != nil {
			f.PromptTooLarge = true
			// The turn fails as an overflow would, saying why.
			v = verdict{Result: classify.Result{Class: classify.Overflow}, tooLarge: tl}
		} else {
			size := max(e.calib.tokens(e.ctx.est), e.overflow().tokens)
			if last != nil && !f.Stale {
				size = max(size, f.Tokens)
			}
			size += e.promptTokens()
			// A reserve that leaves no room at all is no fit to test,
			// as for tooLarge: the threshold path compacts then.
			usable := window - max(e.cfg.Compaction.ReserveTokens, 0)
			f.PromptOverWindow = usable > 0 && size > usable
		}
	}
	if last == nil && !f.PromptTooLarge && !f.PromptOverWindow {
		return // nothing to check: the prompt is sent
	}
	e.fire(&step{at: at, facts: f, msg: last, v: v})
}

// sendPrompt starts the user's run once the check before it is done.
func (e *Engine) sendPrompt() {
	msg := e.turn.prompt
	e.turn.prompt = nil
	e.recordMessage(msg)
	e.startRun(msg)
}

// setEpisode marks or clears the overflow episode of the turn in flight.
func (e *Engine) setEpisode(compacted bool) {
	if e.turn != nil {
		e.turn.episodeCompacted = compacted
	}
}

// failTurn records why the turn in flight failed; the first reason wins.
func (e *Engine) failTurn(err error) {
	if t := e.turn; t != nil && t.err == nil {
		t.err = e.withModelsTried(err)
	}
}

// failTurnOn is failTurn for the error of a message of class class.
func (e *Engine) failTurnOn(err error, class classify.Class) {
	if t := e.turn; t != nil && t.err == nil {
		t.err, t.class = e.withModelsTried(err), class
	}
}

// advanceTurn moves the turn on once nothing it waits for is in flight and
// the machine rests: it sends the prompt waiting for the check before it,
// or emits turn_settled and FinishTurn. A manual compaction is its
// caller's, not the turn's: the turn does not wait for it.
func (e *Engine) advanceTurn(at time.Time) {
	t := e.turn
	if t == nil {
		return
	}
	manual := e.comp != nil && e.comp.manual
	if e.run != nil || e.pending != nil || (e.comp != nil && !manual) || e.wait.pending() || (e.state() != states.Idle && !manual) {
		return
	}
	if t.prompt != nil {
		e.sendPrompt()
		return
	}
	e.turn = nil
	e.emit(events.TurnSettled{Err: t.err, ErrorClass: t.class})
	e.recordTurnFailed(at, t.err, t.class)
	e.effect(Effect{Kind: FinishTurn, Err: t.err})
}

// Abort stops whatever the session is doing: it cancels a pending backoff,
// the run in flight and any compaction, ends an active chain as cancelled,
// and fails the turn in flight with ErrAborted. Nothing the cancelled run
// still reports can start a retry, a compaction or a continuation. cause is
// the reason the run's cancellation carries.
func (e *Engine) Abort(at time.Time, cause error) []Effect {
	e.begin()
	e.fire(&step{at: at, facts: transitions.Facts{Signal: transitions.AbortCalled}, err: cause})
	return e.end(at)
}

// promptTooLarge returns why the prompt waiting for the check before it
// cannot fit a window of window tokens: alone, calibrated, it leaves no
// room under the window less reserveTokens for a summary of one estimated
// token (as tooLarge weighs the last message of an overflow). nil when it
// does, or when the window leaves no room at all.
func (e *Engine) promptTooLarge(window int) *tooLargeError {
	usable := window - max(e.cfg.Compaction.ReserveTokens, 0)
	if usable <= 0 {
		return nil
	}
	n := e.promptTokens()
	if n+e.calib.tokens(1) <= usable {
		return nil
	}
	return &tooLargeError{Tokens: n, Window: window, Reserve: max(e.cfg.Compaction.ReserveTokens, 0)}
}
