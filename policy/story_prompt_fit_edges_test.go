package policy_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// The check before a prompt at the edges of its sums (docs/policy.md
// §4.6), in smallWindow's 18,000 usable tokens (20,000 less a reserve of
// 2,000). A prompt of n characters weighs ceil(n/4) estimated tokens; the
// calibration is 1.

// tokensOf is a text of n estimated tokens.
func tokensOf(n int) string { return strings.Repeat("p", 4*n) }

// A prompt alone fits when it leaves room for a summary of one token: one
// token under the usable room it is sent; at the usable room exactly it is
// not.
func TestStoryPromptAloneAtTheEdge(t *testing.T) {
	const why = "the last message alone is 18000 tokens, over the model's window of 20000 less its reserve of 2000"
	playAll(t, []story{
		{name: "one token under the room", setup: smallWindow, steps: []step{
			{in: promptIn(tokensOf(17999)), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		}},
		{name: "the whole room", setup: smallWindow, steps: []step{
			{in: promptIn(tokensOf(18000)), want: []string{
				"compaction_start overflow",
				`compaction_end failed willRetry=false "Context overflow recovery failed: ` + why + `"`,
				"turn_settled overflow",
				"finish_turn policy: context overflow not recovered: " + why,
			}, check: turnFailed(policy.ErrOverflow)},
		}},
	})
}

// A reserve that leaves no room at all (the window less it is 0) is no fit
// to test: the prompt is sent as it is, on the first turn as on a later
// one.
func TestStoryPromptNoRoomNoFitTest(t *testing.T) {
	noRoom := func(s *policy.Setup) {
		s.Model.ContextWindow = 2000
		s.Config.Compaction.ReserveTokens = 2000
	}
	play(t, story{setup: noRoom, steps: []step{
		{in: promptIn("q1"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(40, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("q2"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
	}})
}

// The context and the prompt together fit when they fill the usable room
// exactly; one token more compacts first. The context is sized by its
// estimate, or by the last call's usage when that is larger.
func TestStoryPromptWithContextAtTheEdge(t *testing.T) {
	// By the estimate: "q1" (1 token) and an answer of 8,999: 9,000.
	byEstimate := []step{
		{in: promptIn("q1"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(4*8999, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
	}
	// By the usage: the answer is short, the call counted 16,000.
	byUsage := []step{
		{in: promptIn("q1"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(sized(16000)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
	}
	sent := []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}
	compacts := []string{
		"compaction_start threshold",
		"start_compaction threshold cut=[user-1] kept=[msg-2] max=17000",
		"idle>compacting check_room",
	}
	// The usage's context is two short messages: keepRecentTokens keeps
	// both, so the compaction has nothing to cut and the prompt goes on.
	triesToCompact := []string{
		"compaction_start threshold",
		`compaction_end failed willRetry=false "Auto-compaction failed: policy: nothing to compact"`,
		"idle>compacting check_room",
		"compacting>idle compaction_end",
		"start_run prompt user-3 context=[user-1 msg-2 user-3]",
		"append message:user-3",
	}
	playAll(t, []story{
		{name: "by the estimate, exactly the room", setup: smallWindow, steps: with(byEstimate, []step{{in: promptIn(tokensOf(9000)), want: sent}})},
		{name: "by the estimate, one token over", setup: smallWindow, steps: with(byEstimate, []step{{in: promptIn(tokensOf(9001)), want: compacts}})},
		{name: "by the usage, exactly the room", setup: smallWindow, steps: with(byUsage, []step{{in: promptIn(tokensOf(2000)), want: sent}})},
		{name: "by the usage, one token over", setup: smallWindow, steps: with(byUsage, []step{{in: promptIn(tokensOf(2001)), want: triesToCompact}})},
	})
}

// With recovery recorded, a first prompt too large for the window records
// its failed compaction and its failed turn about no message: their IDs
// are their kinds and a colon.
func TestStoryPromptTooLargeRecordedOnAnEmptyContext(t *testing.T) {
	const why = "the last message alone is 18000 tokens, over the model's window of 20000 less its reserve of 2000"
	p := play(t, story{setup: func(s *policy.Setup) { smallWindow(s); s.Recovery = true }, steps: []step{
		{in: promptIn(tokensOf(18000)), want: []string{
			"compaction_start overflow",
			`compaction_end failed willRetry=false "Context overflow recovery failed: ` + why + `"`,
			"turn_settled overflow",
			"finish_turn policy: context overflow not recovered: " + why,
			"append recovery:compactionFailed:,recovery:turnFailed:",
		}, check: turnFailed(policy.ErrOverflow)},
	}})
	var ids []string
	for _, en := range p.history {
		require.Equal(t, transcript.EntryRecovery, en.Type)
		ids = append(ids, en.ID)
	}
	assert.Equal(t, []string{"compactionFailed:", "turnFailed:"}, ids)
}
