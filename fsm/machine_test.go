package fsm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	looplab "github.com/looplab/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

func TestDefaultStartsIdle(t *testing.T) {
	m := fsm.Default()
	assert.Equal(t, states.Idle, m.State())
	assert.True(t, m.Can(transitions.AgentEnd))
	assert.False(t, m.Can(transitions.Retry))
	events := func(rs []transitions.Rule) (out []string) {
		for _, r := range rs {
			out = append(out, string(r.Trigger)+">"+string(r.To)+"/"+r.Guard.Name)
		}
		return out
	}
	assert.Equal(t, events(transitions.Table()), events(m.Rules()))
}

func TestFireWalksAChain(t *testing.T) {
	m := fsm.Default()
	ctx := context.Background()
	path := []struct {
		event transitions.Trigger
		to    states.State
	}{
		{transitions.AgentEnd, states.Classifying},
		{transitions.Retry, states.Backoff},
		{transitions.Elapsed, states.Continuing},
		{transitions.AgentEnd, states.Classifying},
		{transitions.Overflow, states.Compacting},
		{transitions.Resume, states.Continuing},
		{transitions.Cancel, states.Cancelled},
		{transitions.Reset, states.Idle},
	}
	for _, p := range path {
		require.NoError(t, m.Fire(ctx, p.event), p.event)
		assert.Equal(t, p.to, m.State(), p.event)
	}
}

func TestFireErrors(t *testing.T) {
	m := fsm.Default()
	err := m.Fire(context.Background(), "jump")
	require.Error(t, err)
	assert.ErrorIs(t, err, fsm.ErrUnknownEvent)
	var te *fsm.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, transitions.Trigger("jump"), te.Trigger)
	assert.Equal(t, states.Idle, te.State)
	assert.ErrorAs(t, err, new(looplab.UnknownEventError), "the underlying error stays reachable")

	err = m.Fire(context.Background(), transitions.Elapsed)
	assert.ErrorIs(t, err, fsm.ErrNotAllowed)
	assert.Contains(t, err.Error(), `"elapsed"`)
	assert.Contains(t, err.Error(), `"idle"`)
	assert.Equal(t, states.Idle, m.State(), "a refused event changes nothing")
}

func TestStep(t *testing.T) {
	m := fsm.Default()
	ctx := context.Background()
	mv, err := m.Step(ctx, &transitions.Facts{Signal: transitions.RunEnded, Started: true})
	require.NoError(t, err)
	assert.Equal(t, fsm.Transition{From: states.Idle, To: states.Classifying, Trigger: transitions.AgentEnd, Guard: "runEnded",
		Change: events.StateChange{From: states.Idle, To: states.Classifying, Trigger: transitions.AgentEnd}}, *mv)

	mv, err = m.Step(ctx, &transitions.Facts{Signal: transitions.RunEnded, Started: true, Class: classify.Retryable, Error: true, RetryEnabled: true, MaxRetries: 3})
	require.NoError(t, err)
	assert.Equal(t, transitions.Retry, mv.Trigger)
	assert.Equal(t, []transitions.Action{transitions.ScheduleBackoff, transitions.RemoveFailed}, mv.Actions)
	assert.Equal(t, []int{transitions.ScheduleBackoff.Index(), transitions.RemoveFailed.Index()}, mv.Indexes)
	assert.Equal(t, states.Backoff, m.State())

	// An internal rule acts and stays.
	mv, err = m.Step(ctx, &transitions.Facts{Signal: transitions.CompactCalled, AlreadyCompacted: true})
	require.NoError(t, err)
	assert.Equal(t, transitions.CompactRefused, mv.Trigger)
	assert.True(t, mv.Internal())
	assert.Nil(t, mv.Change, "an internal rule reports no state change")
	assert.Equal(t, states.Backoff, m.State())

	// A timer from an earlier backoff changes nothing.
	_, err = m.Step(ctx, &transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: false})
	assert.ErrorIs(t, err, fsm.ErrNoRule)
	assert.Equal(t, states.Backoff, m.State())

	mv, err = m.Step(ctx, &transitions.Facts{Signal: transitions.AbortRetryCalled})
	require.NoError(t, err)
	assert.Equal(t, states.Cancelled, mv.To)
	mv, err = m.Step(ctx, &transitions.Facts{})
	require.NoError(t, err)
	assert.Equal(t, transitions.Reset, mv.Trigger)
	assert.Equal(t, states.Idle, m.State())
}

// TestLooplabWedgesOnCancelledContext shows the hazard design.md forbids:
// looplab v1.0.3 handed an already cancelled context by its Event stays "in
// transition" for good. A Machine never calls Event (a move asks Can and
// sets the state, which take no context); this test keeps the reason on
// record, and fails if the dependency changes.
func TestLooplabWedgesOnCancelledContext(t *testing.T) {
	lf := looplab.NewFSM("a", looplab.Events{{Name: "go", Src: []string{"a"}, Dst: "b"}, {Name: "back", Src: []string{"b"}, Dst: "a"}}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := lf.Event(ctx, "go")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, "a", lf.Current())
	err = lf.Event(context.Background(), "go")
	assert.ErrorAs(t, err, new(looplab.InTransitionError), "looplab is wedged for good")
}

// TestCancelledContextNeverWedges fires every rule of a full tour with an
// already cancelled context: each transition happens and the machine stays
// usable.
func TestCancelledContextNeverWedges(t *testing.T) {
	m := fsm.Default()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("user pressed esc"))
	tour := []transitions.Trigger{
		transitions.AgentEnd, transitions.Retry, transitions.Cancel, transitions.Reset,
		transitions.AgentEnd, transitions.Exhaust, transitions.Reset,
		transitions.AgentEnd, transitions.Threshold, transitions.CompactionEnd,
		transitions.AgentEnd, transitions.Overflow, transitions.Resume, transitions.StartFailed,
		transitions.AgentEnd, transitions.Refuse, transitions.AgentEnd, transitions.Unrecovered,
		transitions.CheckOverflow, transitions.RecoveryFailed, transitions.CheckThreshold, transitions.Cancel, transitions.Reset,
		transitions.Compact, transitions.CancelCompaction, transitions.Reset, transitions.AgentEnd, transitions.Retry,
		transitions.CompactInBackoff, transitions.CompactionEnd, transitions.AgentEnd, transitions.RetryNow, transitions.CancelRetry,
		transitions.Reset,
		transitions.AgentEnd, transitions.Retry, transitions.Elapsed, transitions.AgentEnd, transitions.Accept,
	}
	for _, e := range tour {
		require.NoError(t, m.Fire(ctx, e), "event %s with a cancelled context", e)
	}
	assert.Equal(t, states.Idle, m.State())
	_, err := m.Step(ctx, &transitions.Facts{Signal: transitions.RunEnded, Started: true})
	require.NoError(t, err)
	assert.Equal(t, states.Classifying, m.State())
	// A nil context is treated as Background.
	//lint:ignore SA1012 a nil context is what this line tests
	require.NoError(t, m.Fire(nil, transitions.Accept))
	assert.Equal(t, states.Idle, m.State())
}

func TestNewValidatesTable(t *testing.T) {
	guard := transitions.Guard{Name: "g", Holds: func(states.State, *transitions.Facts) bool { return true }}
	mutate := func(f func([]transitions.Rule) []transitions.Rule) []transitions.Rule {
		return f(transitions.Table())
	}
	cases := []struct {
		name  string
		rules []transitions.Rule
		says  string
	}{
		{"empty", nil, "no rules"},
		{"unknown source", mutate(func(r []transitions.Rule) []transitions.Rule {
			r[0].From = append(r[0].From, "sleeping")
			return r
		}), `unknown state "sleeping"`},
		{"unknown destination", mutate(func(r []transitions.Rule) []transitions.Rule { r[1].To = "limbo"; return r }), `unknown state "limbo"`},
		{"duplicate trigger", mutate(func(r []transitions.Rule) []transitions.Rule { r[2].Trigger = r[1].Trigger; return r }), `"start_failed" appears twice`},
		{"unknown action", mutate(func(r []transitions.Rule) []transitions.Rule {
			return append(r, transitions.Rule{Trigger: "spin", From: []states.State{states.Backoff}, To: states.Backoff, Guard: guard,
				Actions: []transitions.Action{"dance"}})
		}), `unknown action "dance"`},
		{"no source", mutate(func(r []transitions.Rule) []transitions.Rule { r[3].From = nil; return r }), "no source state"},
		{"no guard", mutate(func(r []transitions.Rule) []transitions.Rule { r[4].Guard = transitions.Guard{}; return r }), "no named guard"},
		{"no trigger", mutate(func(r []transitions.Rule) []transitions.Rule { r[4].Trigger = ""; return r }), "no trigger"},
		{"source listed twice", mutate(func(r []transitions.Rule) []transitions.Rule {
			i := slices.IndexFunc(r, func(x transitions.Rule) bool { return x.Trigger == transitions.Cancel })
			r[i].From = append(r[i].From, states.Backoff)
			return r
		}), `lists state "backoff" twice`},
		{"unreachable state", mutate(func(r []transitions.Rule) []transitions.Rule {
			// Without exhaust, exhaust_elapsed and reset_too_far, nothing
			// leads to exhausted.
			return slices.DeleteFunc(r, func(x transitions.Rule) bool {
				return x.Trigger == transitions.Exhaust || x.Trigger == transitions.ExhaustElapsed || x.Trigger == transitions.ResetTooFar
			})
		}), `"exhausted" cannot be reached from idle`},
		{"state that cannot reach idle", mutate(func(r []transitions.Rule) []transitions.Rule {
			return slices.DeleteFunc(r, func(x transitions.Rule) bool { return x.Trigger == transitions.Reset })
		}), `"exhausted" cannot reach idle`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := fsm.New(c.rules)
			assert.Nil(t, m)
			require.Error(t, err)
			assert.ErrorIs(t, err, fsm.ErrInvalidTable)
			assert.Contains(t, err.Error(), c.says)
		})
	}
	m, err := fsm.New(transitions.Table())
	require.NoError(t, err)
	assert.Equal(t, states.Idle, m.State())

	// A rule from a state to itself is internal: allowed.
	m, err = fsm.New(append(transitions.Table(), transitions.Rule{Trigger: "spin", From: []states.State{states.Backoff}, To: states.Backoff, Guard: guard}))
	require.NoError(t, err)
	assert.NotNil(t, m)
}

// Machines share one looplab machine: moves of one never show in another.
func TestMachinesKeepTheirOwnState(t *testing.T) {
	a, b := fsm.Default(), fsm.Default()
	_, err := a.Step(context.Background(), &transitions.Facts{Signal: transitions.RunEnded, Started: true})
	require.NoError(t, err)
	assert.Equal(t, states.Classifying, a.State())
	assert.Equal(t, states.Idle, b.State())
	assert.True(t, b.Can(transitions.AgentEnd))
	assert.False(t, a.Can(transitions.AgentEnd))
	_, err = b.Step(context.Background(), &transitions.Facts{Signal: transitions.RunEnded, Started: true, Class: classify.Retryable, Error: true, RetryEnabled: true, MaxRetries: 1})
	require.NoError(t, err)
	assert.Equal(t, states.Classifying, b.State())
}

func TestConcurrentStepsAreAtomic(t *testing.T) {
	m := fsm.Default()
	ctx := context.Background()
	done := make(chan int)
	for range 8 {
		go func() {
			n := 0
			for range 200 {
				ended := transitions.Facts{Signal: transitions.RunEnded, Started: true}
				if _, err := m.Step(ctx, &ended); err == nil {
					n++
				}
				if _, err := m.Step(ctx, &ended); err == nil {
					n++
				}
			}
			done <- n
		}()
	}
	total := 0
	for range 8 {
		total += <-done
	}
	// Every agent_end is matched by one accept; the machine ends where it began.
	assert.Equal(t, 8*400, total)
	assert.Equal(t, states.Idle, m.State())
}

// TestStepWithNoRuleAllocatesNothing: an input no rule takes (a reply in
// idle, a stale timer) is the commonest step; its ErrNoRule error is made
// once per state, not on every step.
func TestStepWithNoRuleAllocatesNothing(t *testing.T) {
	m := fsm.Default()
	ctx := context.Background()
	f := transitions.Facts{Signal: transitions.TimerFired}
	var err error
	allocs := testing.AllocsPerRun(100, func() { _, err = m.Step(ctx, &f) })
	assert.ErrorIs(t, err, fsm.ErrNoRule)
	var te *fsm.TransitionError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, states.Idle, te.State)
	assert.Zero(t, allocs)
}

// Machines on one table, the default's and one built by New on a copy of
// it, step at once without a race (-race) and each keeps its own state;
// every Transition Step hands over is the table's rule from that state,
// its Indexes the positions of its actions, and two machines taking the
// same rule from the same state are handed the same Transition (the
// table's own, which the doc tells callers not to change).
func TestMachinesSharingATableStepAtOnce(t *testing.T) {
	custom, err := fsm.New(transitions.Table())
	require.NoError(t, err)
	newCustom := func() *fsm.Machine {
		m, err := fsm.New(transitions.Table())
		require.NoError(t, err)
		return m
	}
	rules := map[transitions.Trigger]transitions.Rule{}
	for _, r := range transitions.Table() {
		rules[r.Trigger] = r
	}
	ended := transitions.Facts{Signal: transitions.RunEnded, Started: true}
	failed := transitions.Facts{Signal: transitions.RunEnded, Started: true, Class: classify.Retryable, Error: true, RetryEnabled: true, MaxRetries: 3}
	fired := transitions.Facts{Signal: transitions.TimerFired, CurrentTimer: true}
	machines := []*fsm.Machine{fsm.Default(), fsm.Default(), custom, newCustom(), fsm.Default()}
	seen := make([][]*fsm.Transition, len(machines))
	done := make(chan struct{})
	for i, m := range machines {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 400 {
				// agent_end, retry, elapsed, agent_end, accept: back to idle.
				for _, f := range []transitions.Facts{ended, failed, fired, ended, ended} {
					tr, err := m.Step(context.Background(), &f)
					if err != nil {
						t.Errorf("machine %d: %v", i, err)
						return
					}
					seen[i] = append(seen[i], tr)
				}
			}
		}()
	}
	for range machines {
		<-done
	}
	for i, m := range machines {
		assert.Equal(t, states.Idle, m.State(), "machine %d", i)
		for j, tr := range seen[i] {
			r, ok := rules[tr.Trigger]
			require.True(t, ok, "machine %d, step %d: %q is no rule of the table", i, j, tr.Trigger)
			assert.Equal(t, r.To, tr.To, "machine %d, step %d", i, j)
			assert.Equal(t, r.Actions, tr.Actions, "machine %d, step %d", i, j)
			require.Len(t, tr.Indexes, len(r.Actions))
			for k, a := range r.Actions {
				assert.Equal(t, transitions.Actions()[tr.Indexes[k]], a, "machine %d, step %d, action %d", i, j, k)
			}
		}
	}
	// The default machines are handed the very same Transitions.
	for j := range seen[0] {
		assert.Same(t, seen[0][j], seen[1][j], "step %d", j)
	}
}

// DefaultIn builds a machine in every state of the table, and refuses a
// state it does not have, naming it.
func TestDefaultIn(t *testing.T) {
	for _, s := range states.All() {
		m, err := fsm.DefaultIn(s)
		require.NoError(t, err, s)
		assert.Equal(t, s, m.State())
	}
	for _, s := range []states.State{"", "bogus", "Idle", "idle "} {
		m, err := fsm.DefaultIn(s)
		assert.Nil(t, m)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("fsm: unknown state %q", s))
	}
}

// Step handed no facts (nil) is refused with ErrNoFacts, naming what was
// wrong, and the machine stays where it was: no guard reads through nil.
func TestStepWithNilFacts(t *testing.T) {
	for _, s := range states.All() {
		m, err := fsm.DefaultIn(s)
		require.NoError(t, err)
		var tr *fsm.Transition
		require.NotPanics(t, func() { tr, err = m.Step(context.Background(), nil) }, s)
		assert.Nil(t, tr, s)
		assert.ErrorIs(t, err, fsm.ErrNoFacts, s)
		assert.Contains(t, err.Error(), "nil", s)
		assert.Equal(t, s, m.State(), "a refused step changes nothing")
	}
}

// A zero Machine, which New or Default did not build, answers State with
// no state and refuses Step with ErrNotBuilt rather than panic.
func TestZeroMachine(t *testing.T) {
	var m fsm.Machine
	require.NotPanics(t, func() { assert.Equal(t, states.State(""), m.State()) })
	var err error
	require.NotPanics(t, func() {
		_, err = m.Step(context.Background(), &transitions.Facts{Signal: transitions.RunEnded, Started: true})
	})
	assert.ErrorIs(t, err, fsm.ErrNotBuilt)
	assert.Contains(t, err.Error(), "New or Default")
}
