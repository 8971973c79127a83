package policy_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
)

// The check before a prompt weighs the prompt (docs/policy.md §4.6), and
// an overflow's count outlives the turn it failed. Issue 23's leftovers.

// smallWindow is a 20,000-token window with a reserve of 2,000: 18,000
// usable, a threshold of 17,000.
func smallWindow(s *policy.Setup) {
	s.Model.ContextWindow = 20000
	s.Config.Compaction.ReserveTokens = 2000
}

// A context that grew past the window without a count to say so (answers
// without usage), then a prompt: the request, context and prompt, would
// be 29,000 tokens for a 20,000-token window. The check before the prompt
// compacts first, making room for the prompt, and the prompt goes with a
// context that fits. It used to be sent as it was, and overflowed.
func TestStoryPromptOverTheWindowCompactsFirst(t *testing.T) {
	p := play(t, story{setup: smallWindow, steps: []step{
		{in: promptIn("q1"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(48000, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("q2"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(answerOf(48000, nil)), want: []string{
			"message msg-4 stop", "append message:msg-4", "agent_end [msg-4]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn(strings.Repeat("p", 20000)), want: []string{
			"compaction_start threshold",
			"start_compaction threshold cut=[user-1 msg-2 user-3] kept=[msg-4] max=4000",
			"idle>compacting check_room",
		}},
		{in: summarized("summary"), want: []string{
			"append compaction:compaction-6 await",
			`compaction_end ok willRetry=false threshold "summary" kept=msg-4 before=24002`,
			"compacting>idle compaction_end",
			"start_run prompt user-5 context=[compaction-6 msg-4 user-5]",
			"append message:user-5",
		}},
	}})
	assert.LessOrEqual(t, calibrated(p.e, p.runContext), 20000-2000, "the request fits the window less the reserve")
}

// A prompt that alone leaves no room under the window less the reserve is
// not sent: no model call, and the turn fails with the too_large reason,
// whether or not the session has anything before it and whatever the
// settings.
func TestStoryPromptAloneOverTheWindowIsNotSent(t *testing.T) {
	const why = "the last message alone is 20000 tokens, over the model's window of 20000 less its reserve of 2000"
	failed := []string{
		"compaction_start overflow",
		`compaction_end failed willRetry=false "Context overflow recovery failed: ` + why + `"`,
		"turn_settled overflow",
		"finish_turn policy: context overflow not recovered: " + why,
	}
	huge := strings.Repeat("p", 80000)
	t.Run("first turn", func(t *testing.T) {
		p := play(t, story{setup: smallWindow, steps: []step{{in: promptIn(huge), want: failed, check: turnFailed(policy.ErrOverflow)}}})
		assert.Empty(t, p.history, "nothing written: the prompt was never sent")
	})
	t.Run("later turn", func(t *testing.T) {
		play(t, story{setup: smallWindow, steps: []step{
			{in: promptIn("q1"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
			{in: reply(answerOf(480, nil)), want: []string{
				"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
			}},
			{in: promptIn(huge), want: failed, check: turnFailed(policy.ErrOverflow)},
			// The session goes on.
			{in: promptIn("q3"), want: []string{"start_run prompt user-4 context=[user-1 msg-2 user-4]", "append message:user-4"}},
		}})
	})
	t.Run("compaction off", func(t *testing.T) {
		setup := func(s *policy.Setup) { smallWindow(s); s.Config.Compaction.Enabled = false }
		play(t, story{setup: setup, steps: []step{{in: promptIn(huge), want: failed, check: turnFailed(policy.ErrOverflow)}}})
	})
}

// An overflow whose recovery failed (here the summarizer failed) leaves
// its count standing: the check before the next prompt sizes the context
// by it and compacts before sending, rather than send a request the
// provider just said is over the window. The count survives a snapshot,
// and the compaction that ends it, or a call's usage, retires it.
func TestStoryOverflowCountOutlivesItsFailedTurn(t *testing.T) {
	steps := []step{
		{in: promptIn(strings.Repeat("q", 8000)), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(8000, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("b"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(errorAnswer("prompt is too long: 230000 tokens > 200000 maximum")), want: []string{
			`message msg-4 error p/m "prompt is too long: 230000 tokens > 200000 maximum"`, "append message:msg-4", "agent_end [msg-4]",
			"idle>classifying agent_end", "compaction_start overflow",
			"start_compaction overflow cut=[user-1] kept=[msg-2 user-3] max=2956",
			"classifying>compacting overflow", "append removal:msg-4",
		}},
		{in: summaryFailed(errors.New("boom")), want: []string{
			`compaction_end failed willRetry=false "Context overflow recovery failed: boom"`,
			"compacting>idle recovery_failed", "turn_settled none", "finish_turn policy: context overflow not recovered: boom",
		}, check: func(t *testing.T, p *player) {
			assert.Equal(t, 230000, p.e.Snapshot().OverflowTokens)
			assert.True(t, p.e.Snapshot().OverflowCounted)
		}},
	}
	next := []string{
		"compaction_start threshold",
		"start_compaction threshold cut=[user-1] kept=[msg-2 user-3] max=2956",
		"idle>compacting check_room",
	}
	p := play(t, story{steps: append(steps, step{in: promptIn("next"), want: next})})
	summarized("summary")(p)
	assert.Zero(t, p.e.Snapshot().OverflowTokens, "the compaction retires the count")
	assert.Less(t, calibrated(p.e, p.runContext), usable)

	// Restored from a snapshot taken between the turns, the engine
	// still knows.
	p = play(t, story{steps: steps})
	snap := p.e.Snapshot()
	b, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"overflowTokens":230000,"overflowCounted":true`)
	e, _, err := policy.Restore(policy.Setup{SessionID: "s", Model: testModel, History: p.history}, snap, t0, 0)
	require.NoError(t, err)
	p2 := &player{t: t, e: e, now: t0}
	assert.Equal(t, next, promptIn("next")(p2))

	// A negative count, or one past what is kept, is refused, naming the
	// field.
	for _, bad := range []int{-1, math.MaxInt32 + 1} {
		snap.OverflowTokens = bad
		_, _, err = policy.Restore(policy.Setup{SessionID: "s", Model: testModel, History: p.history}, snap, t0, 0)
		require.ErrorIs(t, err, policy.ErrSnapshot)
		assert.ErrorContains(t, err, "overflowTokens")
	}
}

// After an overflow the summary's limit is by the overflow's count: what
// is kept and a summary of MaxChars fit under the threshold by that count
// (and by the session's calibration), not the raw default of a quarter of
// the threshold. Here a short context the provider counts as 210,345
// tokens: every estimated token is about 19,000 by its count.
func TestStorySummaryLimitFollowsTheOverflowCount(t *testing.T) {
	p := play(t, story{steps: []step{
		{in: promptIn("one"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(okAnswer("first answer")), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("two"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
	}})
	est := sizes.Tokens(p.runContext...)
	reply(errorAnswer("400 prompt is too long: 210345 tokens > 200000 maximum"))(p)
	require.NotNil(t, p.request)
	perToken := 210345 / float64(est)
	kept := float64(sizes.Tokens(p.request.Kept...)) * perToken
	summary := float64((p.request.MaxChars+3)/4) * perToken
	assert.LessOrEqual(t, kept+summary, 170000.0, "the kept part and the summary fit under the threshold by the provider's count (MaxChars %d)", p.request.MaxChars)
	assert.Less(t, p.request.MaxChars, 170000, "not the raw default")
}

// Without a context window there is no fit to test: the limit an
// overflow's text names does not stand in for one, so a large last message
// is no reason to refuse (no too_large), the summary has no limit, and the
// cut is the keepRecentTokens walk.
func TestStoryNoWindowNoFitTest(t *testing.T) {
	noWindow := func(s *policy.Setup) { s.Model.ContextWindow = 0 }
	play(t, story{setup: noWindow, steps: []step{
		{in: promptIn("a"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(100, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn(strings.Repeat("q", 1000000)), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(errorAnswer("prompt is too long: 300000 tokens > 200000 maximum")), want: []string{
			`message msg-4 error p/m "prompt is too long: 300000 tokens > 200000 maximum"`, "append message:msg-4", "agent_end [msg-4]",
			"idle>classifying agent_end", "compaction_start overflow",
			"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=0",
			"classifying>compacting overflow", "append removal:msg-4",
		}},
	}})
}
