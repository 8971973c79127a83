package fsm_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/fsm"
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
		f := transitions.Facts{
			Signal:             transitions.Signal(rapid.IntRange(0, 10).Draw(t, "signal")),
			Class:              rapid.SampledFrom(classes()).Draw(t, "class"),
			Error:              rapid.Bool().Draw(t, "error"),
			Aborted:            rapid.Bool().Draw(t, "aborted"),
			Started:            rapid.Bool().Draw(t, "started"),
			UsageLimit:         rapid.Bool().Draw(t, "usageLimit"),
			CredentialStore:    rapid.Bool().Draw(t, "credentialStore"),
			RetryEnabled:       rapid.Bool().Draw(t, "retryEnabled"),
			Attempt:            rapid.IntRange(0, 4).Draw(t, "attempt"),
			MaxRetries:         rapid.IntRange(0, 4).Draw(t, "maxRetries"),
			HintOverCap:        rapid.Bool().Draw(t, "hintOverCap"),
			CredentialSwitched: rapid.Bool().Draw(t, "credentialSwitched"),
			CompactionEnabled:  rapid.Bool().Draw(t, "compactionEnabled"),
			SameModel:          rapid.Bool().Draw(t, "sameModel"),
			Stale:              rapid.Bool().Draw(t, "stale"),
			EpisodeCompacted:   rapid.Bool().Draw(t, "episodeCompacted"),
			Tokens:             rapid.IntRange(0, 300).Draw(t, "tokens"),
			ContextWindow:      rapid.IntRange(0, 300).Draw(t, "contextWindow"),
			ReserveTokens:      rapid.IntRange(0, 100).Draw(t, "reserveTokens"),
			Compacted:          rapid.Bool().Draw(t, "compacted"),
			WillRetry:          rapid.Bool().Draw(t, "willRetry"),
			Committing:         rapid.Bool().Draw(t, "committing"),
			AlreadyCompacted:   rapid.Bool().Draw(t, "alreadyCompacted"),
			CurrentTimer:       rapid.Bool().Draw(t, "currentTimer"),
		}
		m, err := fsm.DefaultIn(from)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := rules.Next(from, f)
		tr, err := m.Step(t.Context(), f)
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

// classes returns every class of classify, in order.
func classes() []classify.Class {
	var out []classify.Class
	for c := classify.None; c.Valid(); c++ {
		out = append(out, c)
	}
	return out
}
