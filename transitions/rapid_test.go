package transitions_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/states"
	tr "github.com/agentfsm/agentfsm/transitions"
)

// genFacts draws facts with numbers anywhere, not only around the
// thresholds TestExhaustive picks.
func genFacts(t *rapid.T) tr.Facts {
	return tr.Facts{
		Signal:             rapid.SampledFrom(tr.Signals()).Draw(t, "signal"),
		Class:              rapid.SampledFrom(tr.Classes()).Draw(t, "class"),
		Error:              rapid.Bool().Draw(t, "error"),
		Aborted:            rapid.Bool().Draw(t, "aborted"),
		RetryEnabled:       rapid.Bool().Draw(t, "retryEnabled"),
		Attempt:            rapid.IntRange(0, 10).Draw(t, "attempt"),
		MaxRetries:         rapid.IntRange(0, 10).Draw(t, "maxRetries"),
		HintOverCap:        rapid.Bool().Draw(t, "hintOverCap"),
		CredentialSwitched: rapid.Bool().Draw(t, "credentialSwitched"),
		CompactionEnabled:  rapid.Bool().Draw(t, "compactionEnabled"),
		SameModel:          rapid.Bool().Draw(t, "sameModel"),
		Stale:              rapid.Bool().Draw(t, "stale"),
		EpisodeCompacted:   rapid.Bool().Draw(t, "episodeCompacted"),
		Tokens:             rapid.IntRange(0, 2_000_000).Draw(t, "tokens"),
		ContextWindow:      rapid.IntRange(-1, 2_000_000).Draw(t, "contextWindow"),
		ReserveTokens:      rapid.IntRange(0, 100_000).Draw(t, "reserveTokens"),
		Compacted:          rapid.Bool().Draw(t, "compacted"),
		WillRetry:          rapid.Bool().Draw(t, "willRetry"),
		CurrentTimer:       rapid.Bool().Draw(t, "currentTimer"),
		Started:            rapid.Bool().Draw(t, "started"),
		UsageLimit:         rapid.Bool().Draw(t, "usageLimit"),
		CredentialStore:    rapid.Bool().Draw(t, "credentialStore"),
		AlreadyCompacted:   rapid.Bool().Draw(t, "alreadyCompacted"),
		Committing:         rapid.Bool().Draw(t, "committing"),
		TooLarge:           rapid.Bool().Draw(t, "tooLarge"),
	}
}

// TestRandomFactsPickTheSpecRule checks, for any state and random facts, that
// at most one rule applies and that it is the one the specification names.
func TestRandomFactsPickTheSpecRule(t *testing.T) {
	rules := tr.Table()
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.SampledFrom(states.All()).Draw(t, "state")
		checkAgainstSpec(t, rules, s, genFacts(t))
	})
}
