package policy

import (
	"context"
	"time"

	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// step is one input on its way through the table: the facts the guards
// read, and what the actions of the rule taken need to know besides.
type step struct {
	at    time.Time
	facts transitions.Facts
	// msg is the message decided on, with what its classification said.
	msg *transcript.Message
	v   verdict
	// draw is the random number for a retry's jitter.
	draw float64
	// err is the run's error for start_failed, the compaction's for
	// recovery_failed, the abort's cause for cancel and abort.
	err error
	// instructions are Compact's.
	instructions string
	// continuation: the run decided on was a continuation.
	continuation bool
	// credential is the ID of the credential the run decided on called
	// its provider with: the retry it leads to names it.
	credential string
	// hold is the shared limit that held the run (SharedHoldMs).
	hold *sharedWait
}

// fire is the engine's one generic step: it takes the rule of the table
// that applies to s, carries out the rule's actions in order, reports the
// move once they are done (state_change: the transition is complete), and
// goes on with the same facts while the machine is in a state
// that decides at once (classifying, and the pass-through exhausted and
// cancelled). Then it takes, in turn, the steps the actions raised. It
// reports whether a rule applied to s.
func (e *Engine) fire(s *step) bool {
	took := e.take(s)
	e.drain()
	return took
}

// drain takes the raised steps, in the order they were raised.
func (e *Engine) drain() {
	sc := e.work()
	for i := 0; i < len(sc.raised); i++ {
		r := sc.raised[i]
		e.take(&r)
	}
	clear(sc.raised) // the scratch keeps no message or error of a step
	sc.raised = sc.raised[:0]
}

// take takes the rules that apply to in, as fire says. The guards read
// in's facts through a pointer, which their table's functions keep from
// the stack: they read a copy in the input's scratch (Facts holds no
// pointer, so the copy is a plain one), and in stays where its caller made
// it. Actions raise steps rather than take them, so a take is never nested
// in another; one that were would read a copy of its own.
func (e *Engine) take(in *step) bool {
	sc := e.work()
	if sc.taking {
		f := in.facts
		return e.takeStep(in, &f)
	}
	sc.taking, sc.facts = true, in.facts
	took := e.takeStep(in, &sc.facts)
	sc.taking = false
	return took
}

func (e *Engine) takeStep(s *step, f *transitions.Facts) bool {
	took := false
	for {
		tr, err := e.machine.Step(context.Background(), f)
		if err != nil {
			// The machine is built from the validated table and fed one
			// input at a time: its only error is ErrNoRule.
			return took
		}
		took = true
		for _, i := range tr.Indexes {
			// The table is validated: it names only actions policy
			// carries out (TestActionsAreNamedAfterTheTable).
			actions[i](e, *s)
		}
		if !tr.Internal() {
			e.emit(tr.Change)
		}
		if tr.Internal() || !onward(tr.To) {
			return took
		}
	}
}

// onward reports whether the machine decides at once in s, on the facts
// that brought it there.
func onward(s states.State) bool { return s == states.Classifying || s.PassThrough() }

// raise queues a step that an action or a report caused: it is taken once
// the rule in progress is done, or at the end of the input.
func (e *Engine) raise(s step) {
	sc := e.work()
	sc.raised = append(sc.raised, s)
}
