package policy_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

const service503 = "503 Service Unavailable"

func statusIs(want policy.Status) func(t *testing.T, p *player) {
	return func(t *testing.T, p *player) {
		t.Helper()
		assert.Equal(t, want, p.e.Status())
	}
}

func retrySetup(f func(c *policy.RetryConfig)) func(*policy.Setup) {
	return func(s *policy.Setup) { f(&s.Config.Retry) }
}

// The retry chain (docs/policy.md §3): each step and each ending.
func TestStoryRetryChain(t *testing.T) {
	stories := []story{
		{name: "an error then a success", steps: []step{
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
			}, check: statusIs(policy.Status{State: states.Backoff, Attempt: 1, Retrying: true, RetryEnabled: true, CompactionEnabled: true, MessageCount: 1})},
			{in: elapse(time.Second)},
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
			}, check: func(t *testing.T, p *player) {
				assert.Equal(t, "[user-1 msg-3]", ids(p.e.Messages()), "the failed message is removed by identity")
				assert.Equal(t, policy.Status{State: states.Idle, RetryEnabled: true, CompactionEnabled: true, MessageCount: 2}, p.e.Status())
			}},
		}},
		{name: "three failures then a success", steps: []step{
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
			{in: reply(errorAnswer("overloaded")), want: []string{
				"message msg-3 error p/m \"overloaded\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_start 2/3 4000ms retryable \"overloaded\"",
				"start_timer 4s",
				"classifying>backoff retry",
				"append removal:msg-3",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer("429 rate limit")), want: []string{
				"message msg-4 error p/m \"429 rate limit\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"continuing>classifying agent_end",
				"retry_start 3/3 8000ms retryable \"429 rate limit\"",
				"start_timer 8s",
				"classifying>backoff retry",
				"append removal:msg-4",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-5 stop",
				"retry_end ok 3 recovered",
				"append message:msg-5",
				"agent_end [msg-5]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "exhausted", steps: []step{
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
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-3 error p/m \"503 Service Unavailable\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_start 2/3 4000ms retryable \"503 Service Unavailable\"",
				"start_timer 4s",
				"classifying>backoff retry",
				"append removal:msg-3",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-4 error p/m \"503 Service Unavailable\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"continuing>classifying agent_end",
				"retry_start 3/3 8000ms retryable \"503 Service Unavailable\"",
				"start_timer 8s",
				"classifying>backoff retry",
				"append removal:msg-4",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer("502 Bad Gateway")), want: []string{
				"message msg-5 error p/m \"502 Bad Gateway\"",
				"append message:msg-5",
				"agent_end [msg-5]",
				"continuing>classifying agent_end",
				"retry_end fail 3 exhausted retryable \"502 Bad Gateway\" limit=retries",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 3 attempts: 502 Bad Gateway",
			}, check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrExhausted, policy.ErrProvider)(t, p)
				var ex *policy.ExhaustedError
				require.ErrorAs(t, p.turnErr, &ex)
				assert.Equal(t, 3, ex.Attempts)
				assert.Equal(t, "502 Bad Gateway", ex.Last)
				assert.Equal(t, 0, p.e.Status().Attempt)
			}},
		}},
		{name: "maxRetries 0: exhausted with no chain", setup: retrySetup(func(c *policy.RetryConfig) { c.MaxRetries = 0 }), steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-2 error p/m \"503 Service Unavailable\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 0 attempts: 503 Service Unavailable",
			}, check: func(t *testing.T, p *player) {
				var ex *policy.ExhaustedError
				require.ErrorAs(t, p.turnErr, &ex)
				assert.Equal(t, 0, ex.Attempts)
			}},
		}},
		{name: "retry switched off mid-chain", steps: []step{
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
			{in: set(func(e *policy.Engine) { e.SetRetryEnabled(false) })},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer("overloaded")), want: []string{
				"message msg-3 error p/m \"overloaded\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_end fail 1 failed retryable \"overloaded\"",
				"classifying>idle accept",
				"turn_settled retryable",
				"finish_turn policy: provider error: overloaded",
			}, check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrProvider)(t, p)
				assert.NotErrorIs(t, p.turnErr, policy.ErrExhausted)
				assert.Equal(t, "[user-1 msg-3]", ids(p.e.Messages()), "the user's message and the last error remain")
			}},
		}},
		{name: "retry disabled: no chain", setup: retrySetup(func(c *policy.RetryConfig) { c.Enabled = false }), steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-2 error p/m \"503 Service Unavailable\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled retryable",
				"finish_turn policy: provider error: 503 Service Unavailable",
			}, check: turnFailed(policy.ErrProvider)},
		}},
		{name: "a fatal error after a retry ends the chain", steps: []step{
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
			{in: reply(errorAnswer("401 invalid x-api-key")), want: []string{
				"message msg-3 error p/m \"401 invalid x-api-key\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_end fail 1 failed fatal \"401 invalid x-api-key\"",
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: 401 invalid x-api-key",
			}, check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrProvider)(t, p)
				assert.NotErrorIs(t, p.turnErr, policy.ErrExhausted)
			}},
		}},
		{name: "a fatal error at once: no chain", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("400 invalid_request_error: bad tool schema")), want: []string{
				"message msg-2 error p/m \"400 invalid_request_error: bad tool schema\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: 400 invalid_request_error: bad tool schema",
			}, check: turnFailed(policy.ErrProvider)},
		}},
		{name: "a retried run with tools ends the chain at its first success", steps: []step{
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
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: answer(transcript.StopReasonToolUse, "read a file")}),
				want: []string{
					"message msg-3 toolUse",
					"retry_end ok 1 recovered",
					"append message:msg-3",
				}, check: statusIs(policy.Status{State: states.Continuing, RetryEnabled: true, CompactionEnabled: true, Streaming: true, MessageCount: 2})},
			{in: feed(events.MessageEnd{Message: toolResult("t1")}, events.MessageEnd{Message: answer(transcript.StopReasonToolUse, "edit it")}, events.MessageEnd{Message: toolResult("t2")}), want: []string{
				"message msg-4 toolResult",
				"append message:msg-4",
				"message msg-5 toolUse",
				"append message:msg-5",
				"message msg-6 toolResult",
				"append message:msg-6",
			}},
			{in: feed(events.MessageEnd{Message: okAnswer("done")}, events.AgentEnd{}), want: []string{
				"message msg-7 stop",
				"append message:msg-7",
				"agent_end [msg-3 msg-4 msg-5 msg-6 msg-7]",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "a failure after a tool's success starts a new chain", steps: []step{
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
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: answer(transcript.StopReasonToolUse, "x")}, events.MessageEnd{Message: toolResult("t1")}), want: []string{
				"message msg-3 toolUse",
				"retry_end ok 1 recovered",
				"append message:msg-3",
				"message msg-4 toolResult",
				"append message:msg-4",
			}},
			{in: feed(events.MessageEnd{Message: errorAnswer("overloaded")}, events.AgentEnd{}), want: []string{
				"message msg-5 error p/m \"overloaded\"",
				"append message:msg-5",
				"agent_end [msg-3 msg-4 msg-5]",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"continuing>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"overloaded\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-5",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1 msg-3 msg-4]",
				"backoff>continuing elapsed",
			}},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-6 stop",
				"retry_end ok 1 recovered",
				"append message:msg-6",
				"agent_end [msg-6]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "the cap (maxDelayMs) bounds the wait", setup: retrySetup(func(c *policy.RetryConfig) { c.MaxDelayMs = 3000 }), steps: []step{
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
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-3 error p/m \"503 Service Unavailable\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_start 2/3 3000ms retryable \"503 Service Unavailable\"",
				"start_timer 3s",
				"classifying>backoff retry",
				"append removal:msg-3",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer(service503)), want: []string{
				"message msg-4 error p/m \"503 Service Unavailable\"",
				"append message:msg-4",
				"agent_end [msg-4]",
				"continuing>classifying agent_end",
				"retry_start 3/3 3000ms retryable \"503 Service Unavailable\"",
				"start_timer 3s",
				"classifying>backoff retry",
				"append removal:msg-4",
			}},
		}},
		{name: "jitter takes the run's draw", setup: retrySetup(func(c *policy.RetryConfig) { c.Jitter = 0.5 }), steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: replyWith(errorAnswer(service503), policy.RunReturn{Draw: 0.5}), want: []string{
				"message msg-2 error p/m \"503 Service Unavailable\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 1500ms retryable \"503 Service Unavailable\"",
				"start_timer 1.5s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}}, // 2000 × (1 − 0.5 × 0.5)
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: replyWith(errorAnswer(service503), policy.RunReturn{Draw: 0.5}), want: []string{
				"message msg-3 error p/m \"503 Service Unavailable\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_start 2/3 3000ms retryable \"503 Service Unavailable\"",
				"start_timer 3s",
				"classifying>backoff retry",
				"append removal:msg-3",
			}},
		}},
		{name: "honorRetryAfter: the longer of the hint and the backoff", setup: retrySetup(func(c *policy.RetryConfig) { c.HonorRetryAfter = true }), steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("429 rate limit; retry-after: 5")), want: []string{
				"message msg-2 error p/m \"429 rate limit; retry-after: 5\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 5000ms retryable \"429 rate limit; retry-after: 5\"",
				"start_timer 5s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
			{in: fire(), want: []string{
				"start_run continuation context=[user-1]",
				"backoff>continuing elapsed",
			}},
			{in: reply(errorAnswer("429 rate limit; retry-after: 1")), want: []string{
				"message msg-3 error p/m \"429 rate limit; retry-after: 1\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_start 2/3 4000ms retryable \"429 rate limit; retry-after: 1\"",
				"start_timer 4s",
				"classifying>backoff retry",
				"append removal:msg-3",
			}},
		}},
		{name: "the defaults honour a hint", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("429 rate limit; retry-after: 10")), want: []string{
				"message msg-2 error p/m \"429 rate limit; retry-after: 10\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 10000ms retryable \"429 rate limit; retry-after: 10\"",
				"start_timer 10s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "the reference's policy ignores a hint", setup: func(s *policy.Setup) { s.Config = policy.ReferenceConfig() }, steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("429 rate limit; retry-after: 5")), want: []string{
				"message msg-2 error p/m \"429 rate limit; retry-after: 5\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"429 rate limit; retry-after: 5\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "a hint above the cap ends the chain", setup: retrySetup(func(c *policy.RetryConfig) { c.HonorRetryAfter, c.MaxDelayMs = true, 10_000 }), steps: []step{
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
			{in: reply(errorAnswer("429 rate limit; retry-after: 60")), want: []string{
				"message msg-3 error p/m \"429 rate limit; retry-after: 60\"",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"retry_end fail 1 exhausted retryable \"429 rate limit; retry-after: 60\" limit=retries",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 1 attempts: 429 rate limit; retry-after: 60",
			}, check: turnFailed(policy.ErrExhausted)},
		}},
		{name: "a hint at the cap is waited", setup: retrySetup(func(c *policy.RetryConfig) { c.HonorRetryAfter, c.MaxDelayMs = true, 10_000 }), steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("429 rate limit; retry-after: 10")), want: []string{
				"message msg-2 error p/m \"429 rate limit; retry-after: 10\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 10000ms retryable \"429 rate limit; retry-after: 10\"",
				"start_timer 10s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "the seed rules miss ECONNRESET", setup: retrySetup(func(c *policy.RetryConfig) { c.Rules = classify.Seed }), steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("read ECONNRESET")), want: []string{
				"message msg-2 error p/m \"read ECONNRESET\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: read ECONNRESET",
			}, check: turnFailed(policy.ErrProvider)},
		}},
		{name: "the extended rules retry ECONNRESET", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(errorAnswer("read ECONNRESET")), want: []string{
				"message msg-2 error p/m \"read ECONNRESET\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"read ECONNRESET\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "a typed status with no text is retried", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, HTTPStatus: 529, Provider: "p", Model: "m"}), want: []string{
				"message msg-2 error p/m \"\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
		{name: "the retry names the run's credential", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: replyWith(errorAnswer(service503), policy.RunReturn{Credential: "key-a"}), want: []string{
				"message msg-2 error p/m \"503 Service Unavailable\"",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"503 Service Unavailable\" cred=key-a",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-2",
			}},
		}},
	}
	for _, c := range []struct {
		name   string
		base   int64
		jitter float64
	}{{"a base at the int64 limit with jitter", math.MaxInt64, 0.5}, {"a base of 10^13 ms", 10_000_000_000_000, 0}} {
		stories = append(stories, story{name: "a huge delay saturates: " + c.name,
			setup: func(s *policy.Setup) {
				s.Config = policy.ReferenceConfig() // no cap
				s.Config.Retry.BaseDelayMs, s.Config.Retry.Jitter = c.base, c.jitter
			},
			steps: []step{
				{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
				{in: reply(errorAnswer(service503)), want: []string{
					`message msg-2 error p/m "503 Service Unavailable"`, "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end",
					// the longest delay from t0 would end in 2318: the wait ends at
					// the last instant the engine keeps instead.
					"retry_start 1/3 " + ms(lastInstant.Sub(t0)) + ` retryable "503 Service Unavailable"`, "start_timer " + lastInstant.Sub(t0).String(),
					"classifying>backoff retry", "append removal:msg-2",
				}},
				{in: abortRetryIn(), check: turnFailed(policy.ErrRetryCancelled), want: cancelledLines(1)},
			}})
	}
	// AbortRetry in each of the chain's three waits.
	for wait := 1; wait <= 3; wait++ {
		steps := []step{{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}}
		for n := 1; n <= wait; n++ {
			if n > 1 {
				steps = append(steps, step{in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"}})
			}
			from := "continuing"
			if n == 1 {
				from = "idle"
			}
			id := fmt.Sprintf("msg-%d", n+1)
			delay := time.Duration(1<<(n-1)) * 2 * time.Second
			steps = append(steps, step{in: reply(errorAnswer(service503)), want: []string{
				fmt.Sprintf(`message %s error p/m "503 Service Unavailable"`, id), "append message:" + id, "agent_end [" + id + "]",
				from + ">classifying agent_end",
				fmt.Sprintf(`retry_start %d/3 %dms retryable "503 Service Unavailable"`, n, delay.Milliseconds()), "start_timer " + delay.String(),
				"classifying>backoff retry", "append removal:" + id,
			}})
		}
		steps = append(steps,
			step{in: elapse(time.Second)},
			step{in: abortRetryIn(), want: cancelledLines(wait), check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrRetryCancelled)(t, p)
				assert.Equal(t, policy.Status{State: states.Idle, RetryEnabled: true, CompactionEnabled: true, MessageCount: 1}, p.e.Status())
			}},
			step{in: fire()}, // the cancelled wait's timer changes nothing
		)
		stories = append(stories, story{name: fmt.Sprintf("AbortRetry during wait %d", wait), steps: steps})
	}
	playAll(t, stories)
}

// cancelledLines are AbortRetry's effects in the chain's wait number n.
func cancelledLines(n int) []string {
	return []string{
		"stop_timer", fmt.Sprintf(`retry_end fail %d cancelled none "Retry cancelled"`, n), "backoff>cancelled cancel_retry", "cancelled>idle reset",
		"turn_settled none", "finish_turn policy: retry cancelled",
	}
}

func toolResult(id string) transcript.Message {
	return transcript.Message{Role: transcript.RoleToolResult, ToolCallID: id, ToolName: "read", Content: transcript.TextContent("42 lines")}
}

// Aborts, AbortRetry and AbortCompaction with nothing to stop, and at each
// point of a run (docs/policy.md §7).
func TestStoryAborts(t *testing.T) {
	aborted := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonAborted, Provider: "p", Model: "m"}
	playAll(t, []story{
		{name: "AbortRetry and AbortCompaction with nothing to stop do nothing", steps: []step{
			{in: abortRetryIn()},
			{in: abortCompactionIn()},
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: abortRetryIn()},
			{in: abortCompactionIn()},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-2 stop",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "Abort when idle does nothing", steps: []step{
			{in: abortIn()},
		}},
		{name: "Abort of the user's run", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{})},
			{in: abortIn(), want: []string{
				"cancel_run user",
			}},
			{in: feed(events.MessageEnd{Message: aborted}, events.AgentEnd{}), want: []string{
				"message msg-2 aborted",
				"append message:msg-2",
				"agent_end [msg-2]",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: turnFailed(policy.ErrAborted)},
		}},
		{name: "Abort during a continuation", steps: []step{
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
			{in: feed(events.AgentStart{})},
			{in: abortIn(), want: []string{
				"cancel_run user",
				"retry_end fail 1 cancelled none \"Retry cancelled\"",
				"continuing>cancelled cancel",
				"cancelled>idle reset",
			}},
			{in: feed(events.MessageEnd{Message: aborted}, events.AgentEnd{}), want: []string{
				"message msg-3 aborted",
				"append message:msg-3",
				"agent_end [msg-3]",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrAborted)(t, p)
				assert.Equal(t, policy.Status{State: states.Idle, RetryEnabled: true, CompactionEnabled: true, MessageCount: 2}, p.e.Status())
			}},
		}},
		{name: "Abort during a continuation's tail cancels the chain", steps: []step{
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
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: errorAnswer(service503)}), want: []string{
				"message msg-3 error p/m \"503 Service Unavailable\"",
				"append message:msg-3",
			}},
			{in: abortIn(), want: []string{
				"cancel_run user",
				"retry_end fail 1 cancelled none \"Retry cancelled\"",
				"continuing>cancelled cancel",
				"cancelled>idle reset",
			}},
			{in: feed(events.AgentEnd{}), want: []string{
				"agent_end [msg-3]",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: turnFailed(policy.ErrAborted)},
		}},
		{name: "Abort during a run's tail: its overflow starts no compaction", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn("second question, long enough to compact"), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: errorAnswer(tooLong)}), want: []string{
				"message msg-4 error p/m \"prompt is too long: 213462 tokens > 200000 maximum\"",
				"append message:msg-4",
			}},
			{in: abortIn(), want: []string{
				"cancel_run user",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"agent_end [msg-4]",
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: turnFailed(policy.ErrAborted)},
		})},
		{name: "Abort during a run's tail: its size starts no compaction", setup: smallKeep, steps: with(warmUp, []step{
			{in: promptIn("second question, long enough to compact"), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: sized(190_000)}), want: []string{
				"message msg-4 stop",
				"append message:msg-4",
			}},
			{in: abortIn(), want: []string{
				"cancel_run user",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"agent_end [msg-4]",
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: turnFailed(policy.ErrAborted)},
		})},
		{name: "an aborted run that returns its context's cause without ending is not retried", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{}, events.MessageStart{Message: transcript.Message{Role: transcript.RoleAssistant}})},
			{in: abortIn(), want: []string{
				"cancel_run user",
			}},
			{in: returned(policy.RunReturn{Err: errors.New("context deadline exceeded")}), want: []string{
				"agent_end []",
				"turn_settled none",
				"finish_turn policy: aborted",
			}, check: turnFailed(policy.ErrAborted)},
		}},
		{name: "a second Abort changes nothing", steps: []step{
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
			{in: abortIn(), want: []string{
				"stop_timer",
				"retry_end fail 1 cancelled none \"Retry cancelled\"",
				"backoff>cancelled cancel",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: aborted",
			}},
			{in: abortIn()},
		}},
	})
}

// Runs that could not start (docs/policy.md §3.5), agents that fail
// mid-run or panic.
func TestStoryStartFailures(t *testing.T) {
	noRoute := errors.New("no route to host")
	playAll(t, []story{
		{name: "the user's run fails to start: the machine stays idle", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: returned(policy.RunReturn{Err: errors.New("model offline")}), want: []string{
				"turn_settled none",
				"finish_turn policy: run could not start: model offline",
			}, check: turnFailed(policy.ErrStartFailed)},
			{in: promptIn("again"), want: []string{
				"start_run prompt user-2 context=[user-1 user-2]",
				"append message:user-2",
			}},
		}},
		{name: "a continuation fails to start: the chain ends with its error", steps: []step{
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
			{in: returned(policy.RunReturn{Err: errors.New("no credentials left")}), want: []string{
				"retry_end fail 1 failed none \"no credentials left\"",
				"continuing>idle start_failed",
				"turn_settled none",
				"finish_turn policy: run could not start: no credentials left",
			}, check: turnFailed(policy.ErrStartFailed)},
		}},
		{name: "a user's run with no model call could not start", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{}, events.AgentEnd{}), want: []string{
				"agent_end []",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"turn_settled none",
				"finish_turn policy: run could not start: the run produced no assistant message",
			}, check: turnFailed(policy.ErrStartFailed)},
		}},
		{name: "a continuation with no model call could not start", steps: []step{
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
			{in: feed(events.AgentStart{}, events.AgentEnd{}), want: []string{
				"agent_end []",
			}},
			{in: returned(policy.RunReturn{}), want: []string{
				"retry_end fail 1 failed none \"the run produced no assistant message\"",
				"continuing>idle start_failed",
				"turn_settled none",
				"finish_turn policy: run could not start: the run produced no assistant message",
			}, check: turnFailed(policy.ErrStartFailed)},
		}},
		{name: "a continuation failing before its model call could not start", steps: []step{
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
			{in: feed(events.AgentStart{})},
			{in: returned(policy.RunReturn{Err: errors.New("fetch failed")}), want: []string{
				"agent_end []",
				"retry_end fail 1 failed none \"fetch failed\"",
				"continuing>idle start_failed",
				"turn_settled none",
				"finish_turn policy: run could not start: fetch failed",
			}, check: turnFailed(policy.ErrStartFailed)},
		}},
		{name: "a user's run failing before its model call could not start", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{})},
			{in: returned(policy.RunReturn{Err: noRoute}), want: []string{
				"agent_end []",
				"turn_settled none",
				"finish_turn policy: run could not start: no route to host",
			}, check: turnFailed(policy.ErrStartFailed, noRoute)},
		}},
		{name: "an agent that stops mid-run with an error: its message, retried", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{}, events.MessageStart{Message: transcript.Message{Role: transcript.RoleAssistant}})},
			{in: returned(policy.RunReturn{Err: errors.New("503 stream reset")}), want: []string{
				"message msg-2 error p/m \"503 stream reset\"",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"retry_start 1/3 2000ms retryable \"503 stream reset\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append message:msg-2,removal:msg-2",
			}},
		}},
		{name: "an agent that stops mid-run without an error", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{}, events.MessageStart{Message: transcript.Message{Role: transcript.RoleAssistant}})},
			{in: returned(policy.RunReturn{}), want: []string{
				"message msg-2 error p/m \"the agent stopped without ending the run\"",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: the agent stopped without ending the run",
				"append message:msg-2",
			}, check: turnFailed(policy.ErrProvider)},
		}},
		{name: "a panic before anything is fatal", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: returned(policy.RunReturn{Panic: "503 overloaded"}), want: []string{
				"message msg-2 error p/m \"the agent panicked: 503 overloaded\"",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: the agent panicked: 503 overloaded",
				"append message:msg-2",
			}, check: turnFailed(policy.ErrProvider)},
			{in: promptIn("again"), want: []string{
				"start_run prompt user-3 context=[user-1 msg-2 user-3]",
				"append message:user-3",
			}},
		}},
		{name: "a panic mid-run is fatal", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{}, events.MessageStart{Message: transcript.Message{Role: transcript.RoleAssistant}})},
			{in: returned(policy.RunReturn{Panic: errors.New("503 overloaded")}), want: []string{
				"message msg-2 error p/m \"the agent panicked: 503 overloaded\"",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: the agent panicked: 503 overloaded",
				"append message:msg-2",
			}, check: turnFailed(policy.ErrProvider)},
		}},
		{name: "a panic after the run ended leaves its messages standing", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: okAnswer("done")}, events.AgentEnd{}), want: []string{
				"message msg-2 stop",
				"append message:msg-2",
				"agent_end [msg-2]",
			}},
			{in: returned(policy.RunReturn{Panic: "late"}), want: []string{
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "the events of a run that returned are dropped", steps: []step{
			{in: promptIn("hi"), want: []string{
				"start_run prompt user-1 context=[user-1]",
				"append message:user-1",
			}},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-2 stop",
				"append message:msg-2",
				"agent_end [msg-2]",
				"idle>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
			{in: feed(events.MessageEnd{Message: errorAnswer(service503)}, events.AgentEnd{})},
			{in: returned(policy.RunReturn{})},
		}},
	})
}
