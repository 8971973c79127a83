package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
)

// A provider that says a short context overflowed (issue 23 item 6: a
// scripted overflow after a few short turns, with the default settings)
// is believed: the estimate is too small to calibrate (under 1,024
// tokens) and any ratio within the bounds leaves it under
// keepRecentTokens, yet the provider counted 210,345 tokens. The
// compaction cuts by the overflow's own count and the turn continues,
// instead of failing with "nothing to compact".
func TestStoryOverflowOfShortContextCompacts(t *testing.T) {
	play(t, story{steps: []step{
		{in: promptIn("one"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(okAnswer("first answer")), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("two"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(okAnswer("second answer")), want: []string{
			"message msg-4 stop", "append message:msg-4", "agent_end [msg-4]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("three"), want: []string{"start_run prompt user-5 context=[user-1 msg-2 user-3 msg-4 user-5]", "append message:user-5"}},
		{in: reply(errorAnswer("400 prompt is too long: 210345 tokens > 200000 maximum")), want: []string{
			`message msg-6 error p/m "400 prompt is too long: 210345 tokens > 200000 maximum"`, "append message:msg-6", "agent_end [msg-6]",
			"idle>classifying agent_end", "compaction_start overflow",
			"start_compaction overflow cut=[user-1 msg-2 user-3] kept=[msg-4 user-5] max=8",
			"classifying>compacting overflow", "append removal:msg-6",
		}, check: func(t *testing.T, p *player) {
			r := p.request
			if !assert.NotNil(t, r, "the overflow starts a compaction") {
				return
			}
			assert.NotEmpty(t, r.Messages, "something is summarized")
			assert.Equal(t, transcript.RoleUser, r.Kept[len(r.Kept)-1].Role)
			// By the overflow's count (210,345 tokens for the request),
			// the kept messages leave room for the summary's budget
			// under the threshold.
			est := sizes.Tokens(append(append([]transcript.Message(nil), r.Messages...), r.Kept...)...)
			kept := sizes.Tokens(r.Kept...)
			assert.LessOrEqual(t, float64(kept)*210345/float64(est), float64(usable))
		}},
		{in: summarized("summary"), want: []string{
			"append compaction:compaction-7 await",
			`compaction_end ok willRetry=true overflow "summary" kept=msg-4 before=210345`,
			"start_run continuation context=[compaction-7 msg-4 user-5]",
			"compacting>continuing resume",
		}},
		{in: reply(okAnswer("after")), want: []string{
			"message msg-8 stop", "append message:msg-8", "agent_end [msg-8]", "continuing>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
	}})
}

// An overflow whose text gives no count says at least that the request
// was over the window: the short context is cut by that, and the
// compaction's TokensBefore is the size by that count (the window + 1).
func TestStoryOverflowWithoutCountOfShortContextCompacts(t *testing.T) {
	play(t, story{steps: []step{
		{in: promptIn("one"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(okAnswer("first answer")), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("two"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(errorAnswer("context length exceeded")), want: []string{
			`message msg-4 error p/m "context length exceeded"`, "append message:msg-4", "agent_end [msg-4]",
			"idle>classifying agent_end", "compaction_start overflow",
			"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=4",
			"classifying>compacting overflow", "append removal:msg-4",
		}},
		{in: summarized("summary"), want: []string{
			"append compaction:compaction-5 await",
			`compaction_end ok willRetry=true overflow "summ" kept=user-3 before=200001`,
			"start_run continuation context=[compaction-5 user-3]",
			"compacting>continuing resume",
		}},
	}})
}
