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
	// overflow is the provider's count of the request that overflowed,
	// for the compaction that recovers from it in the same input (see
	// overflowCut).
	overflow overflowCount
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
	if last := e.lastAssistant(); last != nil {
		e.decide(at, last, transitions.PromptCheck, 0, false)
	}
	return e.end(at), nil
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
		t.err = err
	}
}

// failTurnOn is failTurn for the error of a message of class class.
func (e *Engine) failTurnOn(err error, class classify.Class) {
	if t := e.turn; t != nil && t.err == nil {
		t.err, t.class = err, class
	}
}

// advanceTurn moves the turn on once nothing it waits for is in flight and
// the machine rests: it sends the prompt waiting for the check before it,
// or emits turn_settled and FinishTurn. A manual compaction is its
// caller's, not the turn's: the turn does not wait for it.
func (e *Engine) advanceTurn() {
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
