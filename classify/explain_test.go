package classify_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// Issue item 5: every verdict says which rule decided it.
func TestExplain(t *testing.T) {
	pattern := func(expr, group, effect string) classify.Why {
		t.Helper()
		for _, p := range classify.PatternList() {
			if p.Expr == expr && string(p.Group) == group {
				return classify.Why{Rule: classify.RulePattern, Pattern: expr, Group: group, Source: p.Source, Effect: effect}
			}
		}
		t.Fatalf("no pattern %s in %s", expr, group)
		return classify.Why{}
	}
	cases := []struct {
		name  string
		rules classify.Rules
		m     classify.Message
		class classify.Class
		why   []classify.Why
	}{
		{"not an error", classify.Extended, classify.Message{StopReason: transcript.StopReasonStop},
			classify.None, []classify.Why{{Rule: classify.RuleStopReason, Value: "stop", Effect: "none"}}},
		{"a silent overflow", classify.Extended, classify.Message{StopReason: transcript.StopReasonStop, Usage: transcript.Usage{Input: 250000}, ContextWindow: 200000},
			classify.Overflow, []classify.Why{{Rule: classify.RuleSilentOverflow, Value: "stop, input 250000 + cacheRead 0 > context window 200000", Effect: "overflow"}}},
		{"a truncated overflow", classify.Seed, classify.Message{StopReason: transcript.StopReasonLength, Usage: transcript.Usage{Input: 199000}, ContextWindow: 200000},
			classify.Overflow, []classify.Why{{Rule: classify.RuleTruncatedOverflow, Value: "length, output 0, input 199000 + cacheRead 0 ≥ 99% of context window 200000", Effect: "overflow"}}},
		{"an overflow pattern", classify.Extended, errMsg("prompt is too long: 213462 tokens > 200000 maximum"),
			classify.Overflow, []classify.Why{pattern(`prompt is too long`, "overflow", "overflow")}},
		{"an overflow error type", classify.Extended, classify.Message{StopReason: transcript.StopReasonError, ErrorType: "context_length_exceeded"},
			classify.Overflow, []classify.Why{{Rule: classify.RuleErrorType, Value: `"context_length_exceeded"`, Effect: "overflow"}}},
		{"a throttle that reads like an overflow", classify.Extended, errMsg("Throttling error: Too many tokens, please wait before trying again."),
			classify.Retryable, []classify.Why{pattern(`^(Throttling error|Service unavailable):`, "not-overflow", "not an overflow"), pattern(`throttl`, "extended-retry", "retryable")}},
		{"a typed 429 whose text reads like an overflow", classify.Extended, classify.Message{StopReason: transcript.StopReasonError, Status: 429, ErrorMessage: "token limit exceeded"},
			classify.Retryable, []classify.Why{pattern(`token limit exceeded`, "overflow", "ignored: a typed throttle is not an overflow"), {Rule: classify.RuleStatus, Value: "429", Effect: "throttle (never an overflow)"}}},
		{"a typed status with a usage text", classify.Extended, classify.Message{StopReason: transcript.StopReasonError, Status: 400, ErrorMessage: "Your credit balance is too low"},
			classify.UsageLimit, []classify.Why{{Rule: classify.RuleStatus, Value: "400", Effect: "permanent"}, pattern(`credit balance is too low`, "extended-usage", "usage limit")}},
		{"a Go error", classify.Seed, classify.Message{StopReason: transcript.StopReasonError, Err: syscall.ECONNRESET},
			classify.Retryable, []classify.Why{{Rule: classify.RuleGoError, Value: `"connection reset by peer"`, Effect: "transient"}}},
		{"a retry pattern and a hint", classify.Extended, errMsg("503 Service Unavailable; retry-after: 3"),
			classify.Retryable, []classify.Why{pattern(`\b(429|500|502|503|504|52[0-4]|529)\b`, "extended-retry", "retryable"), {Rule: classify.RuleTextHint, Value: "3s", Effect: "wait"}}},
		{"a hint in the headers", classify.Extended, classify.Message{StopReason: transcript.StopReasonError, ErrorMessage: "overloaded", Headers: map[string]string{"Retry-After": "7"}},
			classify.Retryable, []classify.Why{pattern(`overloaded`, "extended-retry", "retryable"), {Rule: classify.RuleHeaderHint, Value: "7s", Effect: "wait"}}},
		{"seed: a usage limit takes the branch", classify.Seed, errMsg("429 usage limit reached"),
			classify.Retryable, []classify.Why{pattern(`usage.?limit`, "seed-retry", "retryable"), pattern(`usage.?limit|usage_limit_reached|limit_reached`, "usage-flag", "the usage-limit branch")}},
		{"no pattern", classify.Extended, errMsg("Invalid API key"),
			classify.Fatal, []classify.Why{{Rule: classify.RuleNoPattern, Value: "extended", Effect: "fatal"}}},
		{"nothing at all", classify.Seed, classify.Message{StopReason: transcript.StopReasonError},
			classify.Fatal, []classify.Why{{Rule: classify.RuleNoPattern, Effect: "fatal"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, why := c.rules.Explain(c.m, now)
			assert.Equal(t, c.rules.Classify(c.m, now), res, "Explain answers as Classify does")
			assert.Equal(t, c.class, res.Class)
			assert.Equal(t, c.why, why)
			for _, w := range why {
				assert.NotEmpty(t, w.String())
			}
		})
	}
	_, why := classify.Extended.Explain(errMsg("overloaded"), now)
	require.Len(t, why, 1)
	assert.Equal(t, "pattern `overloaded` (extended-retry; Anthropic, Google): retryable", why[0].String())
	_, why = classify.Extended.Explain(classify.Message{StopReason: transcript.StopReasonError, Err: errors.New("boom")}, now)
	assert.Equal(t, "no pattern of the extended rules matched: fatal", why[0].String())
}

// Explain and Classify agree on every corpus row, under both rule sets.
func TestExplainAgreesOnCorpus(t *testing.T) {
	for _, r := range readCorpus(t) {
		for _, rules := range []classify.Rules{classify.Seed, classify.Extended} {
			m := errMsg(r.message)
			res, why := rules.Explain(m, now)
			require.Equal(t, rules.Classify(m, now), res, "line %d", r.line)
			require.NotEmpty(t, why, "line %d", r.line)
			for _, w := range why {
				require.NotEqual(t, "?", w.Pattern, "line %d: the scanner matched a group no regexp of it matches", r.line)
			}
		}
	}
}
