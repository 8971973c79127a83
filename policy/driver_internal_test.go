package policy

import (
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// promptRun sends text as a prompt and returns the run it started and the
// prompt's message ID, the effects released as a driver releases them.
func promptRun(t *testing.T, e *Engine, at time.Time, text string) (RunID, string) {
	t.Helper()
	effects, err := e.Prompt(at, text)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Release()
	return startedRun(t, effects)
}

// startedRun returns the run effects start and the ID of the last message
// of its context.
func startedRun(t *testing.T, effects []Effect) (RunID, string) {
	t.Helper()
	for _, ef := range effects {
		if ef.Kind == StartRun {
			return ef.Run, ef.Context[len(ef.Context)-1].ID
		}
	}
	t.Fatal("no run started")
	return 0, ""
}

// answerRun plays run as one call answered by m, each event released, and
// returns the effects of its return, unreleased.
func answerRun(e *Engine, at time.Time, run RunID, m transcript.Message) []Effect {
	for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
		e.RunEvent(at, run, ev)
		e.Release()
	}
	return e.RunReturned(at, run, RunReturn{})
}
