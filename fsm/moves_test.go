package fsm_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/fsm"
	"github.com/agentfsm/agentfsm/internal/factsgen"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// TestStepTakesTheRuleNextPicks: in any state and for any facts, Step takes
// the rule the table's Next picks (the machine keeps, per state, the rules
// that leave it), or none when Next has none.
func TestStepTakesTheRuleNextPicks(t *testing.T) {
	rules := transitions.Table()
	rapid.Check(t, func(t *rapid.T) {
		from := rapid.SampledFrom(states.All()).Draw(t, "state")
		f := factsgen.Draw(t, factsgen.Bounds{Attempts: 4, Tokens: 300})

		m, err := fsm.DefaultIn(from)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := rules.Next(from, &f)
		tr, err := m.Step(t.Context(), &f)
		switch {
		case !ok && err == nil:
			t.Fatalf("%s: Step took %s where Next has no rule", from, tr.Trigger)
		case !ok:
			return
		case err != nil:
			t.Fatalf("%s: Next picks %s, Step failed: %v", from, want.Trigger, err)
		case tr.Trigger != want.Trigger || tr.To != want.Target(from) || tr.Guard != want.Guard.Name || len(tr.Actions) != len(want.Actions):
			t.Fatalf("%s: Next picks %+v, Step took %+v", from, want, tr)
		case m.State() != want.Target(from):
			t.Fatalf("%s: the machine is in %s after %s, not %s", from, m.State(), tr.Trigger, want.Target(from))
		}
	})
}
