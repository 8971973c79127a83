package policy_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
)

// The engine's allocations, counted exactly (docs/performance.md): a count,
// not a time, so that the test holds on a loaded machine. A move between
// two states allocates nothing (package fsm asks looplab's Can and sets its
// state, TestMoveAllocatesNothing there), so what is left is the engine's
// own; the aim for a turn is 60.

// TestDecisionAllocations: the decision at a run's end on a transient
// error allocates one value, auto_retry_start in its Event interface.
func TestDecisionAllocations(t *testing.T) {
	const runs = 50
	type ready struct {
		e   *policy.Engine
		run policy.RunID
	}
	pool := make([]ready, runs+1) // AllocsPerRun calls once more to warm up
	for i := range pool {
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
		require.NoError(t, err)
		pool[i] = ready{e, ended(t, e, t0)}
	}
	next := 0
	got := testing.AllocsPerRun(runs, func() {
		r := pool[next]
		next++
		r.e.RunReturned(t0, r.run, policy.RunReturn{Draw: 0.5})
		r.e.Release() // as the driver does: the next decision reuses the room
	})
	for _, r := range pool {
		require.Equal(t, "backoff", string(r.e.Status().State))
	}
	assert.LessOrEqual(t, got, float64(1+poolMisses), "a decision allocates %v", got)
}

// TestTurnAllocations: a turn with three retries allocates no more than 26
// values (the aim: 60): the prompt and its ID, each run (its
// first message inside it, where the history entry points too), each
// answer's ID, and the events that carry data. The room of the effects and
// entries comes back through Release, which the player calls as a driver
// does (without it, more: after each wait).
func TestTurnAllocations(t *testing.T) {
	// A prompt, four runs of four events and a return each, three timers:
	// under the race detector each may miss the pool once (it drops a
	// quarter of what is put back).
	const turnInputs = 1 + 4*5 + 3
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
	require.NoError(t, err)
	at := t0
	turn := newTurnPlayer()
	got := testing.AllocsPerRun(20, func() { at = turn.play(t, e, at) })
	assert.LessOrEqual(t, got, float64(25+turnInputs*poolMisses), "a turn allocates %v", got)
	assert.Equal(t, "idle", string(e.Status().State))
}

// TestReleaseTakesTheRoomBack: once the driver releases an input's effects,
// their room holds nothing (no event, message or error stays reachable
// through the pool), the engine keeps none while it waits, and the next
// input, which takes a room from the pool, answers as ever. Release twice,
// or before any input, does nothing.
func TestReleaseTakesTheRoomBack(t *testing.T) {
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
	require.NoError(t, err)
	e.Release()
	run := ended(t, e, t0) // releases each input's effects
	effects := e.RunReturned(t0, run, policy.RunReturn{Draw: 0.5})
	require.NotEmpty(t, effects)
	var timer policy.TimerID
	for _, ef := range effects {
		if ef.Kind == policy.StartTimer {
			timer = ef.Timer
		}
	}
	require.NotZero(t, timer, "the decision arms the backoff's timer")
	room := policy.Room(e)
	require.Len(t, room, 6, "the room of the decision's effects")
	e.Release()
	e.Release()
	assert.Nil(t, policy.Room(e), "a released engine keeps no room")
	for i, ef := range room {
		assert.Zero(t, ef, "effect %d of the released room", i)
	}
	next := e.TimerFired(t0.Add(time.Hour), timer)
	assert.Equal(t, "continuing", string(e.Status().State))
	assert.Condition(t, func() bool {
		for _, ef := range next {
			if ef.Kind == policy.StartRun {
				return true
			}
		}
		return false
	}, "the backoff's end starts the retry: %v", next)
}

// TestUnreleasedEffectsGoAtTheNextInput: a driver that does not release
// an input's effects finds them cleared by the next input, so that a room
// released later holds only the last input's, and the room past an
// input's effects is zero (the engine writes only the fields of the
// effects it makes there).
func TestUnreleasedEffectsGoAtTheNextInput(t *testing.T) {
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
	require.NoError(t, err)
	first, err := e.Prompt(t0, "hi")
	require.NoError(t, err)
	run := runOfB(t, first)
	n := len(first)
	second := e.RunEvent(t0, run, events.AgentStart{})
	require.Less(t, len(second), n, "the second input makes fewer effects than the first")
	room := policy.Room(e)
	require.Len(t, room, 6, "the room of the second input's effects")
	for i, ef := range room[len(second):] {
		assert.Zero(t, ef, "effect %d past the second input's", len(second)+i)
	}
	e.Release()
	for i, ef := range room {
		assert.Zero(t, ef, "effect %d of the released room", i)
	}
}

// TestDriverAppendingToEffectsReachesNoInput: a driver may append to the
// effects it is handed (its own work list, say); what it appends never
// shows in the engine's later effects, whether it releases them or not,
// nor in another engine's, which may take the released room.
func TestDriverAppendingToEffectsReachesNoInput(t *testing.T) {
	driver := policy.Effect{Kind: policy.Emit, Run: 99, Timer: 99, Compaction: 99, Hint: time.Hour, Await: true, Err: errors.New("the driver's"), Cause: errors.New("the driver's")}
	for _, release := range []bool{false, true} {
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
		require.NoError(t, err)
		var all [][]policy.Effect
		input := func(effects []policy.Effect) {
			all = append(all, slices.Clone(effects))
			for len(effects) < 8 {
				effects = append(effects, driver) // the driver's own work
			}
			if release {
				e.Release()
			}
		}
		effects, err := e.Prompt(t0, "hi")
		require.NoError(t, err)
		run := runOfB(t, effects)
		input(effects)
		for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: benchFailure}, events.MessageEnd{Message: benchFailure}, events.AgentEnd{}} {
			input(e.RunEvent(t0, run, ev))
		}
		input(e.RunReturned(t0, run, policy.RunReturn{Draw: 0.5}))
		other, err := policy.New(policy.Setup{SessionID: "other", Model: testModel, Config: policy.DefaultConfig()})
		require.NoError(t, err)
		otherEffects, err := other.Prompt(t0, "hello")
		require.NoError(t, err)
		all = append(all, otherEffects)
		for i, effects := range all {
			for j, ef := range effects {
				assert.False(t, ef.Run == 99 || ef.Timer == 99 || ef.Compaction == 99 || ef.Hint == time.Hour || ef.Await || ef.Err != nil || ef.Cause != nil,
					"release %v: input %d's effect %d carries what the driver appended: %+v", release, i, j, ef)
			}
		}
	}
}
