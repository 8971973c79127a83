package policy_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

const secondQuestion = "second question, long enough too"

// secondTurn follows warmUp: a second exchange, so that a compaction has
// something to cut.
var secondTurn = []step{
	{in: promptIn(secondQuestion), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
	{in: reply(okAnswer("second answer")), want: []string{
		"message msg-4 stop", "append message:msg-4", "agent_end [msg-4]",
		"idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
	}},
}

func compactionOff(s *policy.Setup) { smallKeep(s); s.Config.Compaction.Enabled = false }

// Overflow recovery (docs/policy.md §4.2–4.3): compaction, continuation,
// refusal, failure.
func TestStoryOverflow(t *testing.T) {
	playAll(t, []story{
		{name: "an overflow compacts and continues", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}, check: func(t *testing.T, p *player) {
				assert.Equal(t, transcript.ReasonOverflow, p.request.Reason)
				assert.Equal(t, testModel, p.request.Model)
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-5 await",
				"compaction_end ok willRetry=true overflow \"summary\" kept=user-3 before=213462",
				"start_run continuation context=[compaction-5 user-3]",
				"compacting>continuing resume",
			}},
			{in: reply(okAnswer("recovered")), want: []string{
				"message msg-6 stop",
				"append message:msg-6",
				"agent_end [msg-6]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}, check: func(t *testing.T, p *player) {
				msgs := p.e.Messages()
				assert.Equal(t, transcript.RoleSummary, msgs[0].Role, "the summary comes first")
				for _, m := range msgs {
					assert.False(t, m.IsError(), "the overflow error left the runtime context")
				}
			}},
		})},
		{name: "a second overflow in the episode is refused", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-5 await",
				"compaction_end ok willRetry=true overflow \"summary\" kept=user-3 before=213462",
				"start_run continuation context=[compaction-5 user-3]",
				"compacting>continuing resume",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-6 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-6",
				"agent_end [msg-6]",
				"continuing>classifying agent_end",
				"compaction_start overflow",
				"compaction_end failed willRetry=false \"Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model.\"",
				"classifying>idle refuse",
				"turn_settled overflow",
				"finish_turn policy: context overflow not recovered: prompt is too long: 213462 tokens > 200000 maximum",
			}, check: turnFailed(policy.ErrOverflow)},
		})},
		{name: "each turn is a new episode", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-5 await",
				"compaction_end ok willRetry=true overflow \"summary\" kept=user-3 before=213462",
				"start_run continuation context=[compaction-5 user-3]",
				"compacting>continuing resume",
			}},
			{in: reply(okAnswer("recovered")), want: []string{
				"message msg-6 stop",
				"append message:msg-6",
				"agent_end [msg-6]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
			{in: promptIn("third question, long enough also"), want: []string{
				"start_run prompt user-7 context=[compaction-5 user-3 msg-6 user-7]",
				"append message:user-7",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-8 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-8",
				"agent_end [msg-8]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[compaction-5 user-3 msg-6] kept=[user-7] max=16",
				"classifying>compacting overflow",
				"append removal:msg-8",
			}},
		})},
		{name: "compaction disabled: the overflow fails the turn", setup: compactionOff, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-2 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle unrecovered",
				"turn_settled overflow",
				"finish_turn policy: context overflow not recovered: prompt is too long: 213462 tokens > 200000 maximum",
			}, check: turnFailed(policy.ErrOverflow)},
		}},
		{name: "an overflow is never retried, even one that says 503", setup: compactionOff, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("503 overloaded: prompt is too long")), want: []string{
				"message msg-2 error p/m \"503 overloaded: prompt is too long\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle unrecovered",
				"turn_settled overflow",
				"finish_turn policy: context overflow not recovered: 503 overloaded: prompt is too long",
			}, check: turnFailed(policy.ErrOverflow)},
		}},
		{name: "nothing to compact: the overflow is not recovered", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-2 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"compaction_end failed willRetry=false \"Context overflow recovery failed: policy: nothing to compact: the provider counted 213462 tokens, over the model's window of 200000, and nothing before the last message can be compacted\"",
				"classifying>compacting overflow",
				"compacting>idle recovery_failed",
				"turn_settled none",
				"finish_turn policy: context overflow not recovered: policy: nothing to compact: the provider counted 213462 tokens, over the model's window of 200000, and nothing before the last message can be compacted",
				"append removal:msg-2",
			}, check: turnFailed(policy.ErrOverflow, policy.ErrNothingToCompact)},
		}},
		{name: "the summarizer fails", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: summaryFailed(errors.New("model unavailable")), want: []string{
				"compaction_end failed willRetry=false \"Context overflow recovery failed: model unavailable\"",
				"compacting>idle recovery_failed",
				"turn_settled none",
				"finish_turn policy: context overflow not recovered: model unavailable",
			}, check: turnFailed(policy.ErrOverflow)},
		})},
		{name: "the compaction's entry cannot be written", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: summaryFailed(nil), want: []string{
				"append compaction:compaction-5 await",
			}},
			{in: appended(errors.New("disk full")), want: []string{
				"compaction_end failed willRetry=false \"Context overflow recovery failed: policy: history write failed: disk full\"",
				"compacting>idle recovery_failed",
				"turn_settled none",
				"finish_turn policy: context overflow not recovered: policy: history write failed: disk full",
			}, check: turnFailed(policy.ErrOverflow, policy.ErrHistory)},
		})},
		{name: "an overflow mid-chain ends the chain, then compacts", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-4 error p/m \"503 Service Unavailable\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"503 Service Unavailable\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-4",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1 msg-2 user-3]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-5 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-5",
				"agent_end [msg-5]",
				"continuing>classifying agent_end",
				"retry_end fail 1 failed overflow \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-5",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-6 await",
				"compaction_end ok willRetry=true overflow \"summary\" kept=user-3 before=213462",
				"start_run continuation context=[compaction-6 user-3]",
				"compacting>continuing resume",
			}},
			{in: reply(okAnswer("recovered")), want: []string{
				"message msg-7 stop",
				"append message:msg-7",
				"agent_end [msg-7]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "a silent overflow (a stop over the window) is recovered", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Provider: "p", Model: "m", Usage: &transcript.Usage{Input: 250000}}), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
		})},
		{name: "an unattributed overflow is the session model's", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: tooLong}), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
		})},
		{name: "another model's overflow is not recovered", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: tooLong, Provider: "p", Model: "other"}),
				want: []string{
					"message msg-4 error p/other \"prompt is too long: 213462 tokens > 200000 maximum\"",
					"append message:msg-4",
					"agent_end [msg-4]",
					"idle>classifying agent_end",
					"classifying>idle accept",
					"turn_settled overflow",
					"finish_turn policy: provider error: prompt is too long: 213462 tokens > 200000 maximum",
				}, check: turnFailed(policy.ErrProvider)},
		})},
		{name: "Abort during the overflow's compaction", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: abortIn(), want: []string{
				"cancel_compaction",
				"compaction_end aborted willRetry=false",
				"compacting>cancelled cancel",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: turnFailed(policy.ErrAborted)},
			{in: summarized("too late")},
		})},
		{name: "AbortCompaction during the overflow's compaction", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: abortCompactionIn(), want: []string{
				"cancel_compaction",
				"compaction_end aborted willRetry=false",
				"compacting>cancelled cancel_compaction",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: context overflow not recovered: policy: compaction cancelled",
			}, check: turnFailed(policy.ErrOverflow, policy.ErrCompactionCancelled)},
		})},
		{name: "AbortCompaction while the entry is written waits for it", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"classifying>compacting overflow",
				"append removal:msg-4",
			}},
			{in: summaryFailed(nil), want: []string{
				"append compaction:compaction-5 await",
			}},
			{in: abortCompactionIn()},
			{in: appended(nil), want: []string{
				"compaction_end ok willRetry=true overflow \"\" kept=user-3 before=213462",
				"start_run continuation context=[compaction-5 user-3]",
				"compacting>continuing resume",
			}},
		})},
	})
}

// Threshold compaction after a success, and the check before a prompt
// (docs/policy.md §4.5–4.6).
func TestStoryThreshold(t *testing.T) {
	playAll(t, []story{
		{name: "at the threshold: no compaction", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(170000)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "one token over: a threshold compaction", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(170001)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start threshold",
				"start_compaction threshold cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"classifying>compacting threshold",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-5 await",
				"compaction_end ok willRetry=false threshold \"summary\" kept=user-3 before=170001",
				"compacting>idle compaction_end",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "compaction disabled: no threshold compaction", setup: compactionOff, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(190000)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "an unknown window never compacts on threshold", setup: func(s *policy.Setup) { smallKeep(s); s.Model.ContextWindow = 0 }, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(10_000_000)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "a usage that adds up past the int range is over the threshold", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Provider: "p", Model: "m", Content: transcript.TextContent("done"),
				Usage: &transcript.Usage{Input: 100, Output: 1 << 62, CacheWrite: 1 << 62}}), want: []string{
				"message msg-2 stop",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"compaction_start threshold",
				"compaction_end failed willRetry=false \"Auto-compaction failed: policy: nothing to compact\"",
				"classifying>compacting threshold",
				"compacting>idle compaction_end",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "the threshold's summarizer fails: the turn still succeeds", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(190000)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start threshold",
				"start_compaction threshold cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"classifying>compacting threshold",
			}},
			{in: summaryFailed(errors.New("model unavailable")), want: []string{
				"compaction_end failed willRetry=false \"Auto-compaction failed: model unavailable\"",
				"compacting>idle compaction_end",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "usage from before the latest compaction is stale", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(180000)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start threshold",
				"start_compaction threshold cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"classifying>compacting threshold",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-5 await",
				"compaction_end ok willRetry=false threshold \"summary\" kept=user-3 before=180000",
				"compacting>idle compaction_end",
				"turn_settled ok",
				"finish_turn ok",
			}},
			{in: promptIn("third question, long enough also"), want: []string{
				"start_run prompt user-6 context=[compaction-5 user-3 msg-4 user-6]",
				"append message:user-6",
			}}, // the check sees a stale size
			{in: reply(okAnswer("small")), want: []string{
				"message msg-7 stop",
				"append message:msg-7",
				"agent_end [msg-7]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
			{in: promptIn("fourth question, long enough again"), want: []string{
				"start_run prompt user-8 context=[compaction-5 user-3 msg-4 user-6 msg-7 user-8]",
				"append message:user-8",
			}},
			{in: reply(sized(180000)), want: []string{
				"message msg-9 stop",
				"append message:msg-9",
				"agent_end [msg-9]",
				"idle>classifying agent_end",
				"compaction_start threshold",
				"start_compaction threshold cut=[compaction-5 user-3 msg-4 user-6 msg-7] kept=[user-8 msg-9] max=170000",
				"classifying>compacting threshold",
			}}, // after the compaction: counts
		})},
		{name: "the check before a prompt compacts on an aborted message", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: func() transcript.Message {
				m := sized(180000)
				m.StopReason = transcript.StopReasonAborted
				return m
			}()}, events.AgentEnd{}), want: []string{
				"message msg-4 aborted",
				"append message:msg-4",
				"agent_end [msg-4]",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled none",
				"finish_turn policy: aborted",
			}},
			{in: promptIn("third question, long enough also"), want: []string{
				"compaction_start threshold",
				"start_compaction threshold cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting check_threshold",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-6 await",
				"compaction_end ok willRetry=false threshold \"summary\" kept=user-3 before=180000",
				"compacting>idle compaction_end",
				"start_run prompt user-5 context=[compaction-6 user-3 msg-4 user-5]",
				"append message:user-5",
			}},
			{in: reply(okAnswer("answered")), want: []string{
				"message msg-7 stop",
				"append message:msg-7",
				"agent_end [msg-7]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "the check's compaction failing never fails the turn", setup: compactionOff, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-2 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle unrecovered",
				"turn_settled overflow",
				"finish_turn policy: context overflow not recovered: prompt is too long: 213462 tokens > 200000 maximum",
			}, check: turnFailed(policy.ErrOverflow)},
			{in: set(func(e *policy.Engine) { e.SetCompactionEnabled(true) })},
			{in: promptIn("again"), want: []string{
				"compaction_start overflow",
				"compaction_end failed willRetry=false \"Context overflow recovery failed: policy: nothing to compact: the provider counted 213462 tokens, over the model's window of 200000, and nothing before the last message can be compacted\"",
				"idle>compacting check_overflow",
				"compacting>idle compaction_end",
				"start_run prompt user-3 context=[user-1 user-3]",
				"append removal:msg-2,message:user-3",
			}},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}, check: func(t *testing.T, p *player) { assert.NoError(t, p.turnErr) }},
		}},
		{name: "an overflow after the check's compaction is still recovered", setup: compactionOff, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle unrecovered",
				"turn_settled overflow",
				"finish_turn policy: context overflow not recovered: prompt is too long: 213462 tokens > 200000 maximum",
			}},
			{in: set(func(e *policy.Engine) { e.SetCompactionEnabled(true) })},
			{in: promptIn("third question, long enough also"), want: []string{
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=16",
				"idle>compacting check_overflow",
				"append removal:msg-4",
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-6 await",
				"compaction_end ok willRetry=false overflow \"summary\" kept=user-3 before=213462",
				"compacting>idle compaction_end",
				"start_run prompt user-5 context=[compaction-6 user-3 user-5]",
				"append message:user-5",
			}},
			{in: reply(errorAnswer(tooLong)), want: []string{
				"message msg-7 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-7",
				"agent_end [msg-7]",
				"idle>classifying agent_end",
				"compaction_start overflow",
				"start_compaction overflow cut=[compaction-6 user-3] kept=[user-5] max=12",
				"classifying>compacting overflow",
				"append removal:msg-7",
			}},
			{in: summarized("summary again"), want: []string{
				"append compaction:compaction-8 await",
				"compaction_end ok willRetry=true overflow \"summary agai\" kept=user-5 before=213462",
				"start_run continuation context=[compaction-8 user-5]",
				"compacting>continuing resume",
			}},
			{in: reply(okAnswer("recovered")), want: []string{
				"message msg-9 stop",
				"append message:msg-9",
				"agent_end [msg-9]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "Abort during the check's compaction drops the prompt", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(sized(190000)), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"compaction_start threshold",
				"start_compaction threshold cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"classifying>compacting threshold",
			}},
			{in: abortIn(), want: []string{
				"cancel_compaction",
				"compaction_end aborted willRetry=false",
				"compacting>cancelled cancel",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: aborted",
			}},
			{in: promptIn("third question"), want: []string{
				"compaction_start threshold",
				"start_compaction threshold cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting check_threshold",
			}},
			{in: abortIn(), want: []string{
				"cancel_compaction",
				"compaction_end aborted willRetry=false",
				"compacting>cancelled cancel",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrAborted)(t, p)
				assert.Equal(t, policy.Status{State: states.Idle, RetryEnabled: true, CompactionEnabled: true, MessageCount: 4}, p.e.Status(), "the prompt was never sent")
			}},
		})},
	})
}

// Compact: the manual compaction's outcomes (docs/policy.md §4.7).
func TestStoryManualCompaction(t *testing.T) {
	playAll(t, []story{
		{name: "nothing to compact, then a compaction, then already compacted", setup: smallKeep, steps: with([]step{
			{in: compactIn(""), want: []string{
				"finish_compact policy: nothing to compact",
				"idle>compacting compact",
				"compacting>idle compaction_end",
			}, check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.compactErr, policy.ErrNothingToCompact) }},
		}, warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: reply(okAnswer("second answer")), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
			{in: compactIn("keep the numbers"), want: []string{
				"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000 \"keep the numbers\"",
				"idle>compacting compact",
			}, check: func(t *testing.T, p *player) {
				require.NoError(t, p.compactErr)
				assert.Equal(t, "keep the numbers", p.request.Instructions)
			}},
			{in: summarized("summary"), want: []string{
				"append compaction:compaction-5 await",
				"finish_compact manual \"summary\" kept=user-3 before=120",
				"compacting>idle compaction_end",
			}},
			{in: compactIn(""), want: []string{
				"finish_compact policy: already compacted",
			}, check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.compactErr, policy.ErrAlreadyCompacted) }},
		})},
		{name: "Compact during a run is busy", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn(secondQuestion), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: compactIn(""), check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.compactErr, policy.ErrBusy) }},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
				"agent_end [msg-4]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		})},
		{name: "Compact during a compaction is busy", setup: smallKeep, steps: with(warmUp, secondTurn, []step{
			{in: compactIn(""), want: []string{
				"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting compact",
			}},
			{in: compactIn(""), check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.compactErr, policy.ErrBusy) }},
		})},
		{name: "AbortCompaction cancels a manual compaction", setup: smallKeep, steps: with(warmUp, secondTurn, []step{
			{in: compactIn(""), want: []string{
				"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting compact",
			}},
			{in: abortCompactionIn(), want: []string{
				"cancel_compaction",
				"finish_compact policy: compaction cancelled",
				"compacting>cancelled cancel_compaction",
				"cancelled>idle reset",
			}, check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.compactErr, policy.ErrCompactionCancelled) }},
			{in: summarized("too late")},
		})},
		{name: "Abort cancels a manual compaction", setup: smallKeep, steps: with(warmUp, secondTurn, []step{
			{in: compactIn(""), want: []string{
				"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting compact",
			}},
			{in: abortIn(), want: []string{
				"cancel_compaction",
				"finish_compact policy: compaction cancelled",
				"compacting>cancelled cancel",
				"cancelled>idle reset",
			}, check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.compactErr, policy.ErrCompactionCancelled) }},
		})},
		{name: "the summarizer fails a manual compaction", setup: smallKeep, steps: with(warmUp, secondTurn, []step{
			{in: compactIn(""), want: []string{
				"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting compact",
			}},
			{in: summaryFailed(errors.New("model unavailable")), want: []string{
				"finish_compact model unavailable",
				"compacting>idle compaction_end",
			}, check: func(t *testing.T, p *player) { assert.ErrorContains(t, p.compactErr, "model unavailable") }},
		})},
		{name: "a prompt during a manual compaction runs beside it", setup: smallKeep, steps: with(warmUp, secondTurn, []step{
			{in: compactIn(""), want: []string{
				"start_compaction manual cut=[user-1 msg-2] kept=[user-3 msg-4] max=170000",
				"idle>compacting compact",
			}},
			{in: promptIn(secondQuestion), check: func(t *testing.T, p *player) { assert.ErrorIs(t, p.promptErr, policy.ErrBusy) }},
		})},
	})
}

// A usage limit asks the credential store (docs/policy.md §3.3): a switch
// retries at once, no switch waits as any retry does; a hint over the cap
// ends the chain only when there is no switch.
func TestStoryUsageLimit(t *testing.T) {
	creds := func(s *policy.Setup) { s.Credentials = true }
	overCap := func(s *policy.Setup) {
		s.Credentials = true
		s.Config.Retry.HonorRetryAfter, s.Config.Retry.MaxDelayMs = true, 60_000
	}
	reference := func(s *policy.Setup) { s.Config = policy.ReferenceConfig(); s.Credentials = true }
	const usageLimit = "429 usage limit reached"
	stories := []story{
		{name: "a switch retries at once", setup: creds, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: replyWith(errorAnswer(usageLimit+"; retry-after: 30"), policy.RunReturn{Credential: "key-a"}), want: []string{
				"message msg-2 error p/m \"429 usage limit reached; retry-after: 30\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"mark_usage_limit 30s",
			}},
			{in: switched(true), want: []string{
				"retry_start 1/3 0ms usage_limit \"429 usage limit reached; retry-after: 30\" cred=key-a",
				"start_timer 0s",
				"classifying>backoff retry_now",
				"append removal:msg-2",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-3 stop",
				"retry_end ok 1 recovered",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "no credential store: a plain retry", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(usageLimit)), want: []string{
				"message msg-2 error p/m \"429 usage limit reached\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms usage_limit \"429 usage limit reached\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "no provider: the store is not asked", setup: func(s *policy.Setup) { s.Credentials = true; s.Model.Provider = "" }, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(usageLimit)), want: []string{
				"message msg-2 error p/m \"429 usage limit reached\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms usage_limit \"429 usage limit reached\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "a hint over the cap switches first", setup: overCap, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(usageLimit + "; retry-after: 3600")), want: []string{
				"message msg-2 error p/m \"429 usage limit reached; retry-after: 3600\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"mark_usage_limit 1h0m0s",
			}},
			{in: switched(true), want: []string{
				"retry_start 1/3 0ms usage_limit \"429 usage limit reached; retry-after: 3600\"",
				"start_timer 0s",
				"classifying>backoff retry_now",
				"append removal:msg-2",
			}},
		}},
		{name: "a hint over the cap without a switch ends the chain", setup: overCap, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(usageLimit + "; retry-after: 3600")), want: []string{
				"message msg-2 error p/m \"429 usage limit reached; retry-after: 3600\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"mark_usage_limit 1h0m0s",
			}},
			{in: switched(false), want: []string{
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled usage_limit",
				"finish_turn policy: retries exhausted after 0 attempts: 429 usage limit reached; retry-after: 3600",
			}, check: turnFailed(policy.ErrExhausted)},
		}},
		{name: "a usage limit after the last retry: exhausted, even with a switch", setup: func(s *policy.Setup) { s.Credentials = true; s.Config.Retry.MaxRetries = 1 }, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-2 error p/m \"503 Service Unavailable\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/1 2000ms retryable \"503 Service Unavailable\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer(usageLimit)), want: []string{
				"message msg-3 error p/m \"429 usage limit reached\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"mark_usage_limit 0s",
			}},
			{in: switched(true), want: []string{
				"retry_end fail 1 exhausted usage_limit \"429 usage limit reached\" limit=retries",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled usage_limit",
				"finish_turn policy: retries exhausted after 1 attempts: 429 usage limit reached",
			}},
		}},
		{name: "a switch in a continuation counts the next attempt", setup: creds, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-2 error p/m \"503 Service Unavailable\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"503 Service Unavailable\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer(usageLimit)), want: []string{
				"message msg-3 error p/m \"429 usage limit reached\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"mark_usage_limit 0s",
			}},
			{in: switched(true), want: []string{
				"retry_start 2/3 0ms usage_limit \"429 usage limit reached\"",
				"start_timer 0s",
				"classifying>backoff retry_now",
				"append removal:msg-3",
			}},
		}},
	}
	for _, c := range []struct {
		name        string
		setup       func(*policy.Setup)
		text        string
		block, wait time.Duration
	}{
		{"the reference's policy, with a hint", reference, usageLimit + "; retry-after-ms: 45000", 45 * time.Second, 2 * time.Second},
		{"the reference's policy, without a hint", reference, usageLimit, 0, 2 * time.Second},
		{"the defaults, with a hint", creds, usageLimit + "; retry-after-ms: 45000", 45 * time.Second, 45 * time.Second},
		{"the defaults, without a hint", creds, usageLimit, 0, 2 * time.Second},
	} {
		stories = append(stories, story{name: "no switch: " + c.name, setup: c.setup, steps: []step{
			{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
			{in: reply(errorAnswer(c.text)), want: []string{
				fmt.Sprintf("message msg-2 error p/m %q", c.text), "append message:msg-2", "agent_end [msg-2]",
				"idle>classifying agent_end", "mark_usage_limit " + c.block.String(),
			}},
			{in: switched(false), want: []string{
				fmt.Sprintf("retry_start 1/3 %dms usage_limit %q", c.wait.Milliseconds(), c.text), "start_timer " + c.wait.String(),
				"classifying>backoff retry", "append removal:msg-2",
			}},
		}})
	}
	playAll(t, stories)
}
