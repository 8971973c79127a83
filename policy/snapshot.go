package policy

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// SnapshotVersion is the version of the Snapshot format this package
// writes, and the only one it reads.
const SnapshotVersion = 1

// Snapshot is an Engine's state as a serializable value: what Resume needs,
// with the session's history, to go on in another process. It refers to
// history by position and copies no message, and it holds no secret.
type Snapshot struct {
	Version   int    `json:"version"`
	SessionID string `json:"sessionId"`
	Config    Config `json:"config"`
	// State is the machine's state: idle, backoff, continuing or
	// compacting.
	State            states.State `json:"state"`
	Attempt          int          `json:"attempt"`
	EpisodeCompacted bool         `json:"episodeCompacted,omitempty"`
	// History is how many entries the session had written to its history.
	History int `json:"history"`
	// Deadline is when the backoff in progress ends (state backoff).
	Deadline *time.Time `json:"deadline,omitempty"`
	// Run is what was in flight: "run" (the user's), "continuation",
	// "compaction", or empty when nothing was.
	InFlight string `json:"inFlight,omitempty"`
	// Compaction is the reason of the compaction in flight, and
	// CompactionCheck whether it was the check before a prompt's.
	Compaction      CompactionReason `json:"compaction,omitempty"`
	CompactionCheck bool             `json:"compactionCheck,omitempty"`
	// Turn reports a user's turn in flight.
	Turn bool `json:"turn,omitempty"`
}

// What a Snapshot's InFlight names.
const (
	inFlightRun          = "run"
	inFlightContinuation = "continuation"
	inFlightCompaction   = "compaction"
)

// Snapshot returns the engine's state. A manual compaction in flight is not
// part of it: its caller is in this process.
func (e *Engine) Snapshot() Snapshot {
	s := Snapshot{
		Version: SnapshotVersion, SessionID: e.id, Config: e.cfg, State: e.state(),
		Attempt: e.attempt, History: e.ctx.nextSeq, Turn: e.turn != nil,
		EpisodeCompacted: e.turn != nil && e.turn.episodeCompacted,
	}
	if w := e.wait; w.pending() {
		d := w.deadline
		s.Deadline = &d
	}
	switch {
	case e.pending != nil && e.pending.continuation:
		// The decision waits on the credential store: the run is as good
		// as in flight, and is decided on again as interrupted.
		s.State, s.InFlight = states.Continuing, inFlightContinuation
	case e.pending != nil:
		s.State, s.InFlight = states.Idle, inFlightRun
	case e.run != nil && e.run.continuation:
		s.InFlight = inFlightContinuation
	case e.run != nil:
		s.InFlight = inFlightRun
	case e.comp != nil && !e.comp.manual:
		s.InFlight = inFlightCompaction
		s.Compaction, s.CompactionCheck = e.comp.reason, e.comp.check
	}
	return s
}

// ErrSnapshot matches every error Resume returns for a snapshot it cannot
// resume.
var ErrSnapshot = errors.New("policy: cannot resume the snapshot")

// errInterrupted is the error of a run or compaction that was in flight
// when its snapshot was taken.
var errInterrupted = errors.New("interrupted: the session was resumed from a snapshot")

// interruptedError marks the message of an interrupted run: the decision
// weighs it as a transient failure of its attempt.
type interruptedError struct{}

func (*interruptedError) Error() string { return errInterrupted.Error() }
func (*interruptedError) Unwrap() error { return errInterrupted }

// Resume rebuilds an Engine from a snapshot and the session's history
// (setup.History, which may hold entries written after the snapshot by a
// run in flight), at time at, and returns the effects that go on from
// there. An engine snapshotted with nothing in flight resumes exactly: a
// backoff fires at its original deadline (at once if that has passed) with
// the same attempt. A run in flight is resumed as interrupted: it goes
// through the decision as a transient failure of its attempt, so the
// chain's limits still hold (draw is the jitter's random number for that
// decision); a compaction in flight ends as failed. A turn in flight
// settles as it would have, with no caller waiting.
//
// The snapshot's Config and session ID win over setup's. A snapshot of
// another version, of another session or with more history than setup
// holds is refused with an error matching ErrSnapshot.
func Resume(setup Setup, snap Snapshot, at time.Time, draw float64) (*Engine, []Effect, error) {
	switch {
	case snap.Version != SnapshotVersion:
		return nil, nil, fmt.Errorf("%w: version %d (this version reads %d)", ErrSnapshot, snap.Version, SnapshotVersion)
	case setup.SessionID != "" && setup.SessionID != snap.SessionID:
		return nil, nil, fmt.Errorf("%w: it is session %q's, not %q's", ErrSnapshot, snap.SessionID, setup.SessionID)
	case setup.Before < 0:
		return nil, nil, fmt.Errorf("%w: negative Before %d", ErrSnapshot, setup.Before)
	case snap.History > setup.Before+len(setup.History):
		return nil, nil, fmt.Errorf("%w: it counts %d history entries, the history has %d", ErrSnapshot, snap.History, setup.Before+len(setup.History))
	case snap.History < setup.Before+len(setup.History) && snap.InFlight == "":
		return nil, nil, fmt.Errorf("%w: the history moved on after it (%d entries, the snapshot counts %d)", ErrSnapshot, setup.Before+len(setup.History), snap.History)
	case snap.Attempt < 0:
		return nil, nil, fmt.Errorf("%w: negative attempt %d", ErrSnapshot, snap.Attempt)
	}
	setup.SessionID, setup.Config = snap.SessionID, snap.Config
	e, err := New(setup)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	want := map[states.State]string{
		states.Idle: "", states.Backoff: "", states.Continuing: inFlightContinuation, states.Compacting: inFlightCompaction,
	}
	inFlight, ok := want[snap.State]
	if !ok || (snap.InFlight != inFlight && !(snap.State == states.Idle && snap.InFlight == inFlightRun)) {
		return nil, nil, fmt.Errorf("%w: state %q with %q in flight", ErrSnapshot, snap.State, snap.InFlight)
	}
	if (snap.State == states.Backoff) != (snap.Deadline != nil) {
		return nil, nil, fmt.Errorf("%w: state %q and a deadline do not go together", ErrSnapshot, snap.State)
	}
	if e.machine, err = fsm.DefaultIn(snap.State); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSnapshot, err)
	}
	e.attempt = snap.Attempt
	e.begin()
	if snap.Turn {
		e.turn = &turn{episodeCompacted: snap.EpisodeCompacted}
	}
	switch snap.InFlight {
	case inFlightRun, inFlightContinuation:
		r := &run{id: RunID(e.ticket()), continuation: snap.InFlight == inFlightContinuation, emitted: true}
		e.failRun(at, r, &interruptedError{})
		e.decide(at, r.last, transitions.RunEnded, draw, r.continuation)
	case inFlightCompaction:
		c := &compaction{reason: snap.Compaction, check: snap.CompactionCheck}
		c.willRetry = c.reason == ReasonOverflow && !c.check
		e.compactionFailed(at, c, errInterrupted)
	}
	if snap.Deadline != nil {
		e.startWait(*snap.Deadline)
	}
	return e, e.end(at), nil
}
