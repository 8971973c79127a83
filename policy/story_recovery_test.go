package policy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// playInputs feeds inputs to an engine made from setup, and returns the
// entries it appended.
func playInputs(t *testing.T, setup func(*policy.Setup), inputs ...input) *player {
	t.Helper()
	set := policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()}
	setup(&set)
	e, err := policy.New(set)
	require.NoError(t, err)
	p := &player{t: t, e: e, now: t0}
	for _, in := range inputs {
		in(p)
	}
	return p
}

// recoveries are the recovery entries of entries.
func recoveries(entries []transcript.Entry) []transcript.Entry {
	var out []transcript.Entry
	for _, en := range entries {
		if en.Type == transcript.EntryRecovery {
			out = append(out, en)
		}
	}
	return out
}

// TestRecoveryRecorded: with Setup.Recovery, the engine records each
// retry (its delay, class, credential and whether the store switched it),
// the chain's end with its limit, and the failed turn, each in the append
// of the input that decided it, before the removal of the failed message
// whose ID it names; the entries replay to the same runtime context.
// Without it, it records none.
func TestRecoveryRecorded(t *testing.T) {
	const usageLimit = "429 usage limit reached; retry-after: 30"
	on := func(s *policy.Setup) {
		s.Recovery, s.Credentials = true, true
		s.Config.Retry.MaxRetries = 2
	}
	inputs := []input{
		promptIn("hi"),
		replyWith(errorAnswer(usageLimit), policy.RunReturn{Credential: "key-a"}), switched(true), fire(),
		replyWith(errorAnswer(service503), policy.RunReturn{Credential: "key-b"}), fire(),
		reply(errorAnswer(service503)),
	}
	p := playInputs(t, on, inputs...)
	got := recoveries(p.history)
	require.Len(t, got, 4, "two retries, the chain's end, the turn's failure")
	assert.Equal(t, "retry:msg-2", got[0].ID)
	assert.Equal(t, transcript.Recovery{Kind: transcript.RecoveryRetry, Attempt: 1, MaxAttempts: 2, Class: "usage_limit", Error: usageLimit,
		Provider: "p", Model: "m", Credential: "key-a", CredentialSwitched: true}, *got[0].Recovery)
	assert.Equal(t, transcript.Recovery{Kind: transcript.RecoveryRetry, Attempt: 2, MaxAttempts: 2, DelayMs: 4000, Class: "retryable", Error: service503,
		Provider: "p", Model: "m", Credential: "key-b"}, *got[1].Recovery)
	assert.Equal(t, "chainEnd:msg-4", got[2].ID)
	assert.Equal(t, transcript.Recovery{Kind: transcript.RecoveryChainEnd, Attempt: 2, Outcome: "exhausted", Limit: "retries", Class: "retryable", Error: service503}, *got[2].Recovery)
	assert.Equal(t, transcript.RecoveryTurnFailed, got[3].Recovery.Kind)
	assert.Equal(t, "retryable", got[3].Recovery.Class)
	assert.Contains(t, got[3].Recovery.Error, "retries exhausted after 2 attempts")
	for i, en := range p.history {
		require.NoError(t, en.Validate())
		if en.ID == "retry:msg-2" {
			assert.Equal(t, transcript.Entry{Type: transcript.EntryRemoval, ID: "msg-2", Timestamp: en.Timestamp}, p.history[i+1], "the retry, then the removal it decided")
		}
	}

	// The history replays to the context the engine has.
	back, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig(), History: p.history})
	require.NoError(t, err)
	assert.Equal(t, p.e.Messages(), back.Messages())

	// Off, the same inputs record no recovery.
	off := playInputs(t, func(s *policy.Setup) { s.Credentials = true; s.Config.Retry.MaxRetries = 2 }, inputs...)
	assert.Empty(t, recoveries(off.history))
	assert.Len(t, off.history, len(p.history)-4)
}

// TestRecoveryCancelledNotRecorded: an aborted backoff records neither the
// chain's end nor the turn's failure, so that a session closed after a
// snapshot leaves the history the snapshot counts.
func TestRecoveryCancelledNotRecorded(t *testing.T) {
	p := playInputs(t, func(s *policy.Setup) { s.Recovery = true }, promptIn("hi"), reply(errorAnswer(service503)))
	before := len(p.history)
	require.Len(t, recoveries(p.history), 1)
	snap := p.e.Snapshot()
	abortIn()(p)
	assert.Len(t, p.history, before, "nothing recorded by the abort")
	_, _, err := policy.Restore(policy.Setup{Model: testModel, Recovery: true, History: p.history}, snap, p.now, 0)
	assert.NoError(t, err)
}

// TestRecoveryFailedCompactionRecorded: a compaction that fails records
// its reason and error.
func TestRecoveryFailedCompactionRecorded(t *testing.T) {
	errSummarizer := errors.New("the summarizer is down")
	p := playInputs(t, func(s *policy.Setup) { s.Recovery = true },
		promptIn("one"), reply(okAnswer("first")), promptIn("two"), reply(okAnswer("second")),
		promptIn("three"), reply(errorAnswer("prompt is too long: 213462 tokens > 200000 maximum")), summaryFailed(errSummarizer))
	got := recoveries(p.history)
	require.NotEmpty(t, got)
	assert.Equal(t, transcript.Recovery{Kind: transcript.RecoveryCompactionFailed, Reason: "overflow", Error: "Context overflow recovery failed: " + errSummarizer.Error()}, *got[0].Recovery)
}
