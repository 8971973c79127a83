package fsm

import (
	"context"
	"regexp"
	"slices"
	"testing"

	looplab "github.com/looplab/fsm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// TestLooplabEdgesEqualTable reads the edge set back out of looplab's own
// Mermaid rendering of the machine it built and compares it with the table:
// the machine that runs has exactly the table's transitions.
func TestLooplabEdgesEqualTable(t *testing.T) {
	m := Default()
	out, err := looplab.VisualizeForMermaidWithGraphType(m.eng.lf, looplab.StateDiagram)
	require.NoError(t, err)
	edge := regexp.MustCompile(`(?m)^\s+(\w+) --> (\w+): (\w+)$`)
	var got []string
	for _, g := range edge.FindAllStringSubmatch(out, -1) {
		got = append(got, g[1]+" -"+g[3]+"-> "+g[2])
	}
	var want []string
	for _, r := range transitions.Table() {
		for _, from := range r.From {
			if !r.Internal(from) { // an internal rule never moves looplab
				want = append(want, string(from)+" -"+string(r.Trigger)+"-> "+string(r.To))
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
}

// TestLooplabIsConsulted: a move the looplab machine does not allow is
// refused even though a rule of the table takes it and its guard holds.
// The engine here has the whole table, but its looplab machine is built
// without the retry rule: Step must fail with ErrNotAllowed, leave the state
// as it was, and still take every move looplab does allow.
func TestLooplabIsConsulted(t *testing.T) {
	rules := transitions.Table()
	eng := build(cloneRules(rules))
	without := slices.DeleteFunc(cloneRules(rules), func(r transitions.Rule) bool { return r.Trigger == transitions.Retry })
	eng.lf = looplab.NewFSM(string(states.Idle), looplabEvents(without), nil)
	m := &Machine{at: eng.nodes[states.Classifying], eng: eng}

	retry := transitions.Facts{Signal: transitions.RunEnded, Started: true, Class: classify.Retryable, Error: true, RetryEnabled: true, MaxRetries: 3}
	want, ok := transitions.Rules(rules).Next(states.Classifying, &retry)
	require.True(t, ok)
	require.Equal(t, transitions.Retry, want.Trigger, "the table's rule for these facts")

	_, err := m.Step(t.Context(), &retry)
	require.ErrorIs(t, err, ErrNotAllowed)
	require.ErrorAs(t, err, new(looplab.InvalidEventError))
	assert.Equal(t, states.Classifying, m.State(), "a refused move changes nothing")
	require.ErrorIs(t, m.fire(t.Context(), transitions.Retry), ErrNotAllowed)
	assert.Equal(t, states.Classifying, m.State())

	// Looplab allows the next rule in line: the machine takes it.
	tr, err := m.Step(t.Context(), &transitions.Facts{Signal: transitions.RunEnded, Started: true})
	require.NoError(t, err)
	assert.Equal(t, transitions.Accept, tr.Trigger)
	assert.Equal(t, states.Idle, m.State())
}

// TestMoveAllocatesNothing: a move between two states (looplab's Can and
// SetState, no Event) allocates nothing.
func TestMoveAllocatesNothing(t *testing.T) {
	m := Default()
	agentEnd := transitions.Facts{Signal: transitions.RunEnded, Started: true}
	got := testing.AllocsPerRun(100, func() {
		if _, err := m.Step(context.Background(), &agentEnd); err != nil { // idle → classifying
			panic(err)
		}
		if _, err := m.Step(context.Background(), &agentEnd); err != nil { // settle: classifying → idle
			panic(err)
		}
	})
	assert.Zero(t, got)
	assert.Equal(t, states.Idle, m.State())
}

// TestMovesAnswerAsLooplabEvent: from every state, every event of the table
// (and one it does not have) is taken or refused as looplab's own Event
// would take or refuse it on a machine built from the same table: the same
// destination, or the same looplab error as the cause, under ErrNotAllowed
// or ErrUnknownEvent.
func TestMovesAnswerAsLooplabEvent(t *testing.T) {
	rules := transitions.Table()
	events := []transitions.Trigger{"jump", ""}
	for _, r := range rules {
		events = append(events, r.Trigger)
	}
	for _, s := range states.All() {
		for _, ev := range events {
			ref := looplab.NewFSM(string(s), looplabEvents(rules), nil)
			want := ref.Event(context.Background(), string(ev))
			m, err := DefaultIn(s)
			require.NoError(t, err)
			got := m.fire(context.Background(), ev)
			if want == nil {
				require.NoError(t, got, "%s in %s", ev, s)
				assert.Equal(t, states.State(ref.Current()), m.State(), "%s in %s", ev, s)
				continue
			}
			var te *TransitionError
			require.ErrorAs(t, got, &te, "%s in %s: looplab says %v", ev, s, want)
			assert.Equal(t, want, te.Cause, "%s in %s", ev, s)
			switch want.(type) {
			case looplab.UnknownEventError:
				assert.ErrorIs(t, got, ErrUnknownEvent)
			case looplab.InvalidEventError:
				assert.ErrorIs(t, got, ErrNotAllowed)
			default:
				t.Fatalf("%s in %s: looplab's %T", ev, s, want)
			}
			assert.Equal(t, s, m.State(), "a refused move changes nothing")
		}
	}
}
