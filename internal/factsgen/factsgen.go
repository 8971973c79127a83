// Package factsgen draws transitions.Facts for property tests: every field
// of Facts, each signal and class, numbers within the bounds a test asks
// for. Tests of transitions and fsm share it, so that a fact added to Facts
// is drawn by both once it is added here. Only tests import it.
package factsgen

import (
	"math"

	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transitions"
)

// Bounds are the largest numbers drawn: Attempts for the attempt and the
// retry limit, Tokens for the token counts and the window (which may also
// be -1, unknown, when Tokens is over 1000).
type Bounds struct{ Attempts, Tokens int }

// Draw draws facts: every signal and class, every flag either way, numbers
// within b (and maxRetries -1, no count limit), the chain's milliseconds
// small or extreme.
func Draw(t *rapid.T, b Bounds) transitions.Facts {
	minWindow := 0
	if b.Tokens > 1000 {
		minWindow = -1
	}
	return transitions.Facts{
		Signal:             rapid.SampledFrom(signals()).Draw(t, "signal"),
		Class:              rapid.SampledFrom(classes()).Draw(t, "class"),
		Error:              rapid.Bool().Draw(t, "error"),
		Aborted:            rapid.Bool().Draw(t, "aborted"),
		RetryEnabled:       rapid.Bool().Draw(t, "retryEnabled"),
		Attempt:            rapid.IntRange(0, b.Attempts).Draw(t, "attempt"),
		MaxRetries:         rapid.IntRange(-1, b.Attempts).Draw(t, "maxRetries"),
		ElapsedMs:          millis().Draw(t, "elapsedMs"),
		DelayMs:            millis().Draw(t, "delayMs"),
		MaxElapsedMs:       millis().Draw(t, "maxElapsedMs"),
		HintOverCap:        rapid.Bool().Draw(t, "hintOverCap"),
		CredentialSwitched: rapid.Bool().Draw(t, "credentialSwitched"),
		CompactionEnabled:  rapid.Bool().Draw(t, "compactionEnabled"),
		SameModel:          rapid.Bool().Draw(t, "sameModel"),
		Stale:              rapid.Bool().Draw(t, "stale"),
		EpisodeCompacted:   rapid.Bool().Draw(t, "episodeCompacted"),
		Tokens:             rapid.IntRange(0, b.Tokens).Draw(t, "tokens"),
		ContextWindow:      rapid.IntRange(minWindow, b.Tokens).Draw(t, "contextWindow"),
		ReserveTokens:      rapid.IntRange(0, b.Tokens/20).Draw(t, "reserveTokens"),
		Compacted:          rapid.Bool().Draw(t, "compacted"),
		WillRetry:          rapid.Bool().Draw(t, "willRetry"),
		CurrentTimer:       rapid.Bool().Draw(t, "currentTimer"),
		Started:            rapid.Bool().Draw(t, "started"),
		UsageLimit:         rapid.Bool().Draw(t, "usageLimit"),
		CredentialStore:    rapid.Bool().Draw(t, "credentialStore"),
		AlreadyCompacted:   rapid.Bool().Draw(t, "alreadyCompacted"),
		Committing:         rapid.Bool().Draw(t, "committing"),
		TooLarge:           rapid.Bool().Draw(t, "tooLarge"),
		WaitForReset:       rapid.Bool().Draw(t, "waitForReset"),
		ResetKnown:         rapid.Bool().Draw(t, "resetKnown"),
		ResetWithin:        rapid.Bool().Draw(t, "resetWithin"),
		PromptTooLarge:     rapid.Bool().Draw(t, "promptTooLarge"),
		PromptOverWindow:   rapid.Bool().Draw(t, "promptOverWindow"),
		ResetInMs:          millis().Draw(t, "resetInMs"),
		ResetWaited:        rapid.Bool().Draw(t, "resetWaited"),
		FallbackAvailable:  rapid.Bool().Draw(t, "fallbackAvailable"),
		FallbackOnOverload: rapid.Bool().Draw(t, "fallbackOnOverload"),
		Overloaded:         rapid.Bool().Draw(t, "overloaded"),
		FallbackTooSmall:   rapid.Bool().Draw(t, "fallbackTooSmall"),
		OnFallback:         rapid.Bool().Draw(t, "onFallback"),
		CooldownOver:       rapid.Bool().Draw(t, "cooldownOver"),
		SharedHoldMs:       millis().Draw(t, "sharedHoldMs"),
	}
}

// millis draws a number of milliseconds: mostly small (around a
// budget's edge), sometimes an extreme (0, the largest, a negative one
// no engine makes) that the guards must take without overflowing.
func millis() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(0, 100),
		rapid.SampledFrom([]int64{0, -1, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64}),
	)
}

func signals() []transitions.Signal {
	var out []transitions.Signal
	for s := transitions.Signal(0); s.Valid(); s++ {
		out = append(out, s)
	}
	return out
}

func classes() []classify.Class {
	var out []classify.Class
	for c := classify.None; c.Valid(); c++ {
		out = append(out, c)
	}
	return out
}
