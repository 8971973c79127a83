package fsm

import (
	"errors"
	"fmt"

	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// Sentinel errors. Every error a Machine returns matches one of them with
// errors.Is.
var (
	// ErrInvalidTable: the table given to New breaks a structural rule.
	ErrInvalidTable = errors.New("fsm: invalid transition table")
	// ErrUnknownEvent: the trigger is not in the table.
	ErrUnknownEvent = errors.New("fsm: unknown event")
	// ErrNotAllowed: the trigger exists but does not leave the current state.
	ErrNotAllowed = errors.New("fsm: event not allowed in the current state")
	// ErrNoRule: no rule's guard holds for the facts in the current state.
	ErrNoRule = errors.New("fsm: no rule applies")
	// ErrNotBuilt: Step on a zero Machine, which New or Default did not
	// build: it has no table.
	ErrNotBuilt = errors.New("fsm: the Machine was not built: make it with New or Default")
	// ErrNoFacts: Step was handed nil facts, which no guard can read.
	ErrNoFacts = errors.New("fsm: nil facts: Step needs the facts of the input")
	// ErrInTransition: the underlying machine reports a transition still in
	// progress. A Machine never leaves one open; seeing this is a bug.
	ErrInTransition = errors.New("fsm: transition in progress")
	// ErrInternal: the underlying machine failed in a way it documents as a
	// bug of its own.
	ErrInternal = errors.New("fsm: internal error")
)

// TransitionError says which trigger failed in which state, and why. Err is one
// of the sentinels above; Cause, when set, is the underlying machine's error.
type TransitionError struct {
	Trigger transitions.Trigger
	State   states.State
	Err     error
	Cause   error
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("%v: trigger %q in state %q", e.Err, e.Trigger, e.State)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns the sentinel and, when there is one, the cause.
func (e *TransitionError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}
