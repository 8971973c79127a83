package transitions_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/internal/factsgen"
	"github.com/agentfsm/agentfsm/states"
	tr "github.com/agentfsm/agentfsm/transitions"
)

// genFacts draws facts with numbers anywhere, not only around the
// thresholds TestExhaustive picks.
func genFacts(t *rapid.T) tr.Facts {
	return factsgen.Draw(t, factsgen.Bounds{Attempts: 10, Tokens: 2_000_000})
}

// TestRandomFactsPickTheSpecRule checks, for any state and random facts, that
// at most one rule applies and that it is the one the specification names.
func TestRandomFactsPickTheSpecRule(t *testing.T) {
	rules := tr.Table()
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.SampledFrom(states.All()).Draw(t, "state")
		f := genFacts(t)
		checkAgainstSpec(t, rules, s, &f)
	})
}
