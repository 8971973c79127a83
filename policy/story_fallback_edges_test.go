package policy_test

import (
	"errors"
	"testing"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
)

// What counts as an overload for fallback.after "overloaded", at the edges
// of the text: the error's own text when it has one, the Go error's when
// it has none, "overloaded" in any case and at its very end.
func TestStoryOverloadText(t *testing.T) {
	prompted := step{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}
	toB := []string{
		"model_fallback m>b overloaded until=5m0s",
		"start_run continuation context=[user-1] model=b/200000",
		"classifying>continuing fallback",
		"append removal:msg-2",
	}
	switched := func(text string) step {
		return step{in: reply(unnamed(errorAnswer(text))), want: append(failedOn("msg-2", "m", text, states.Idle), toB...)}
	}
	goErr := func(text string, err error) step {
		m := unnamed(errorAnswer(text))
		m.Err = err
		return step{in: reply(m)}
	}
	overloadedErr := goErr("", errors.New("upstream: server OVERLOADED"))
	overloadedErr.want = append(failedOn("msg-2", "m", "", states.Idle), toB...)
	// The error's own text wins over the Go error's: a 503 that does not
	// say it is overloaded retries, whatever the Go error says.
	notOverloaded := goErr("503 Service Unavailable", errors.New("overloaded"))
	notOverloaded.want = append(failedOn("msg-2", "m", "503 Service Unavailable", states.Idle),
		"retry_start 1/1 2000ms retryable \"503 Service Unavailable\"",
		"start_timer 2s",
		"classifying>backoff retry",
		"append removal:msg-2",
	)
	playAll(t, []story{
		{name: "a text that ends with the word", setup: onOverload("b"), steps: []step{prompted, switched("503 upstream overloaded")}},
		{name: "a text that is the word alone", setup: onOverload("b"), steps: []step{prompted, switched("Overloaded")}},
		{name: "no text: the Go error's", setup: onOverload("b"), steps: []step{prompted, overloadedErr}},
		{name: "a text of its own: the Go error's is not read", setup: onOverload("b"), steps: []step{prompted, notOverloaded}},
	})
}

// A turn that failed on the only model it tried names no models: the list
// is for a turn that moved down the chain.
func TestStoryFallbackOneModelTriedNamesNone(t *testing.T) {
	play(t, story{setup: onOverload("b"), steps: []step{
		{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(unnamed(errorAnswer("401 invalid x-api-key"))), want: append(failedOn("msg-2", "m", "401 invalid x-api-key", states.Idle),
			"classifying>idle accept",
			"turn_settled fatal",
			"finish_turn policy: provider error: 401 invalid x-api-key",
		), check: turnFailed(policy.ErrProvider)},
	}})
}

// A fallback model whose compaction threshold the context reaches exactly
// takes it as it is; one token over, the switch compacts first.
func TestStoryFallbackThresholdEdge(t *testing.T) {
	// The context before the switch: "hi", 20,000 characters and "more",
	// 5,002 estimated tokens. With a reserve of 1,000 (over 15 % of the
	// window) the threshold is the window less 1,000.
	window := func(w int) func(*policy.Setup) {
		return func(s *policy.Setup) {
			s.Config.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "small", ContextWindow: w}}, After: "overloaded"}
			s.Config.Compaction.ReserveTokens = 1000
			s.Config.Compaction.KeepRecentTokens = 5
		}
	}
	first := []step{
		{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(20000, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("more"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
	}
	playAll(t, []story{
		{name: "at the threshold the switch goes on at once", setup: window(6002), steps: with(first, []step{
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-4", "m", overloaded, states.Idle),
				"model_fallback m>small overloaded until=5m0s",
				"start_run continuation context=[user-1 msg-2 user-3] model=small/6002",
				"classifying>continuing fallback",
				"append removal:msg-4",
			)},
		})},
		{name: "one token over it the switch compacts", setup: window(6001), steps: with(first, []step{
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-4", "m", overloaded, states.Idle),
				"model_fallback m>small overloaded until=5m0s",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=5000",
				"classifying>compacting fallback_compact",
				"append removal:msg-4",
			)},
		})},
	})
}
