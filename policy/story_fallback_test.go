package policy_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// The model fallback chain (issue 25 §1): the fallback, fallback_compact
// and revert rules.

const overloaded = "529 overloaded_error: Overloaded"

// fallbackTo turns the fallback setting on with models ids, after
// exhaustion, and one retry a chain.
func fallbackTo(ids ...string) func(*policy.Setup) {
	return func(s *policy.Setup) {
		fb := &policy.FallbackConfig{}
		for _, id := range ids {
			fb.Models = append(fb.Models, policy.FallbackModel{ID: id})
		}
		s.Config.Fallback = fb
		s.Config.Retry.MaxRetries = 1
	}
}

// onOverload is fallbackTo with fallback.after "overloaded".
func onOverload(ids ...string) func(*policy.Setup) {
	return func(s *policy.Setup) {
		fallbackTo(ids...)(s)
		s.Config.Fallback.After = "overloaded"
	}
}

// unnamed is m as an agent that names no model sends it: the session's
// model in use is its.
func unnamed(m transcript.Message) transcript.Message {
	m.Provider, m.Model = "", ""
	return m
}

// failedOn is the lines of a run whose model answered text, the message
// msg, decided on.
func failedOn(msg, model, text string, from states.State) []string {
	return []string{
		"message " + msg + " error p/" + model + " \"" + text + "\"",
		"append message:" + msg,
		"agent_end [" + msg + "]",
		string(from) + ">classifying agent_end",
	}
}

func TestStoryFallback(t *testing.T) {
	prompted := step{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}
	retried := step{in: reply(unnamed(errorAnswer("503 Service Unavailable"))), want: append(failedOn("msg-2", "m", "503 Service Unavailable", states.Idle),
		"retry_start 1/1 2000ms retryable \"503 Service Unavailable\"",
		"start_timer 2s",
		"classifying>backoff retry",
		"append removal:msg-2",
	)}
	fired := step{in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"}}
	// The chain on m runs out: the turn goes on on b, a fresh chain there.
	switchedOver := step{in: reply(unnamed(errorAnswer("503 Service Unavailable"))), want: append(failedOn("msg-3", "m", "503 Service Unavailable", states.Continuing),
		"retry_end fail 1 failed retryable \"503 Service Unavailable\"",
		"model_fallback m>b exhausted until=5m0s",
		"start_run continuation context=[user-1] model=b/200000",
		"classifying>continuing fallback",
		"append removal:msg-3",
	), check: func(t *testing.T, p *player) {
		st := p.e.Status()
		assert.Equal(t, "b", st.ActiveModel)
		assert.Equal(t, p.now.Add(5*time.Minute), st.FallbackUntil)
		assert.Equal(t, "m", p.e.Model().ID, "Model is the session's own")
	}}
	answered := step{in: reply(unnamed(okAnswer("done"))), want: []string{
		"message msg-4 stop",
		"append message:msg-4",
		"agent_end [msg-4]",
		"continuing>classifying agent_end",
		"classifying>idle accept",
		"turn_settled ok",
		"finish_turn ok",
	}, check: func(t *testing.T, p *player) {
		// History records which model answered: the fallback.
		last := p.history[len(p.history)-1]
		require.NotNil(t, last.Message)
		assert.Equal(t, "b", last.Message.Model)
		assert.Equal(t, "p", last.Message.Provider)
	}}
	playAll(t, []story{
		{name: "a chain that runs out goes on on the next model", setup: fallbackTo("b"), steps: []step{prompted, retried, fired, switchedOver, answered}},
		{name: "the next turn before the cooldown stays on the fallback", setup: fallbackTo("b"), steps: []step{
			prompted, retried, fired, switchedOver, answered,
			{in: elapse(5*time.Minute - time.Millisecond)},
			{in: promptIn("again"), want: []string{"start_run prompt user-5 context=[user-1 msg-4 user-5] model=b/200000", "append message:user-5"}},
		}},
		{name: "the first turn after the cooldown goes back to the primary", setup: fallbackTo("b"), steps: []step{
			prompted, retried, fired, switchedOver, answered,
			{in: elapse(5 * time.Minute)},
			{in: promptIn("again"), want: []string{"model_revert b>m", "start_run prompt user-5 context=[user-1 msg-4 user-5]", "append message:user-5"},
				check: func(t *testing.T, p *player) {
					st := p.e.Status()
					assert.Equal(t, "m", st.ActiveModel)
					assert.True(t, st.FallbackUntil.IsZero())
				}},
		}},
		{name: "without the setting the chain fails the turn as before", setup: func(s *policy.Setup) { s.Config.Retry.MaxRetries = 1 }, steps: []step{
			prompted, retried, fired,
			{in: reply(unnamed(errorAnswer("503 Service Unavailable"))), want: append(failedOn("msg-3", "m", "503 Service Unavailable", states.Continuing),
				"retry_end fail 1 exhausted retryable \"503 Service Unavailable\" limit=retries",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 1 attempts: 503 Service Unavailable",
			), check: func(t *testing.T, p *player) { assert.Empty(t, p.e.Status().ActiveModel) }},
		}},
		{name: "an overload switches at once with after overloaded", setup: onOverload("b"), steps: []step{
			prompted,
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-2", "m", overloaded, states.Idle),
				"model_fallback m>b overloaded until=5m0s",
				"start_run continuation context=[user-1] model=b/200000",
				"classifying>continuing fallback",
				"append removal:msg-2",
			)},
		}},
		{name: "with after overloaded another transient error retries first", setup: onOverload("b"), steps: []step{prompted, retried}},
		{name: "a usage limit with no credential store falls back at once", setup: fallbackTo("b"), steps: []step{
			prompted,
			{in: reply(unnamed(errorAnswer("usage limit reached"))), want: append(failedOn("msg-2", "m", "usage limit reached", states.Idle),
				"model_fallback m>b usage_limit until=5m0s",
				"start_run continuation context=[user-1] model=b/200000",
				"classifying>continuing fallback",
				"append removal:msg-2",
			)},
		}},
		{name: "a usage limit the credential store cannot switch falls back", setup: func(s *policy.Setup) { fallbackTo("b")(s); s.Credentials = true }, steps: []step{
			prompted,
			{in: reply(unnamed(errorAnswer("usage limit reached"))), want: append(failedOn("msg-2", "m", "usage limit reached", states.Idle),
				"mark_usage_limit 0s")},
			{in: switched(false), want: []string{
				"model_fallback m>b usage_limit until=5m0s",
				"start_run continuation context=[user-1] model=b/200000",
				"classifying>continuing fallback",
				"append removal:msg-2",
			}},
		}},
		{name: "a usage limit the credential store switches retries on the same model", setup: func(s *policy.Setup) { fallbackTo("b")(s); s.Credentials = true }, steps: []step{
			prompted,
			{in: reply(unnamed(errorAnswer("usage limit reached"))), want: append(failedOn("msg-2", "m", "usage limit reached", states.Idle),
				"mark_usage_limit 0s")},
			{in: switched(true), want: []string{
				"retry_start 1/1 0ms usage_limit \"usage limit reached\"",
				"start_timer 0s",
				"classifying>backoff retry_now",
				"append removal:msg-2",
			}},
		}},
		{name: "a fallback that fails the same way moves down the list; the end of the list fails the turn naming every model", setup: onOverload("b", "c"), steps: []step{
			prompted,
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-2", "m", overloaded, states.Idle),
				"model_fallback m>b overloaded until=5m0s",
				"start_run continuation context=[user-1] model=b/200000",
				"classifying>continuing fallback",
				"append removal:msg-2",
			)},
			{in: elapse(time.Minute)},
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-3", "b", overloaded, states.Continuing),
				"model_fallback b>c overloaded until=5m0s",
				"start_run continuation context=[user-1] model=c/200000",
				"classifying>continuing fallback",
				"append removal:msg-3",
			), check: func(t *testing.T, p *player) {
				// The cooldown counts from the latest switch.
				assert.Equal(t, p.now.Add(5*time.Minute), p.e.Status().FallbackUntil)
			}},
			// The end of the list: c's own chain runs, as today.
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-4", "c", overloaded, states.Continuing),
				"retry_start 1/1 2000ms retryable \""+overloaded+"\"",
				"start_timer 2s",
				"classifying>backoff retry",
				"append removal:msg-4",
			)},
			{in: fire(), want: []string{"start_run continuation context=[user-1] model=c/200000", "backoff>continuing elapsed"}},
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-5", "c", overloaded, states.Continuing),
				"retry_end fail 1 exhausted retryable \""+overloaded+"\" limit=retries",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 1 attempts: "+overloaded+" (models tried: m, b, c)",
			), check: func(t *testing.T, p *player) {
				assert.ErrorIs(t, p.turnErr, policy.ErrExhausted)
				var ex *policy.ExhaustedError
				assert.ErrorAs(t, p.turnErr, &ex)
			}},
		}},
		{name: "a fatal error on the fallback fails the turn naming the models tried", setup: onOverload("b"), steps: []step{
			prompted,
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-2", "m", overloaded, states.Idle),
				"model_fallback m>b overloaded until=5m0s",
				"start_run continuation context=[user-1] model=b/200000",
				"classifying>continuing fallback",
				"append removal:msg-2",
			)},
			{in: reply(unnamed(errorAnswer("401 invalid x-api-key"))), want: append(failedOn("msg-3", "b", "401 invalid x-api-key", states.Continuing),
				"classifying>idle accept",
				"turn_settled fatal",
				"finish_turn policy: provider error: 401 invalid x-api-key (models tried: m, b)",
			), check: turnFailed(policy.ErrProvider)},
		}},
	})
}

// A fallback model whose window cannot take the context compacts it first,
// through the compaction an overflow's recovery makes, then continues there.
func TestStoryFallbackCompactsFirst(t *testing.T) {
	small := func(s *policy.Setup) {
		s.Config.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "small", ContextWindow: 4000}}, After: "overloaded"}
		s.Config.Compaction.ReserveTokens = 100
		s.Config.Compaction.KeepRecentTokens = 5
	}
	long := strings.Repeat("a", 20000) // 5,000 tokens: over small's threshold of 3,400
	first := []step{
		{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(len(long), nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("more"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
	}
	playAll(t, []story{
		{name: "the switch compacts, then continues on the fallback", setup: small, steps: with(first, []step{
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-4", "m", overloaded, states.Idle),
				"model_fallback m>small overloaded until=5m0s",
				"compaction_start overflow",
				"start_compaction overflow cut=[user-1 msg-2] kept=[user-3] max=3400",
				"classifying>compacting fallback_compact",
				"append removal:msg-4",
			), check: func(t *testing.T, p *player) {
				assert.Equal(t, "small", p.request.Model.ID, "the summary is asked of the model in use")
				assert.Equal(t, 4000, p.request.Model.ContextWindow)
			}},
			{in: summarized("sum"), want: []string{
				"append compaction:compaction-5 await",
				"compaction_end ok willRetry=true overflow \"sum\" kept=user-3 before=5002",
				"start_run continuation context=[compaction-5 user-3] model=small/4000",
				"compacting>continuing resume",
			}},
		})},
		{name: "with compaction off the switch goes on at once", setup: func(s *policy.Setup) { small(s); s.Config.Compaction.Enabled = false }, steps: with(first, []step{
			{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-4", "m", overloaded, states.Idle),
				"model_fallback m>small overloaded until=5m0s",
				"start_run continuation context=[user-1 msg-2 user-3] model=small/4000",
				"classifying>continuing fallback",
				"append removal:msg-4",
			)},
		})},
	})
}

// The model in use and its cooldown survive a snapshot; a snapshot
// written before they were recorded restores on the primary.
func TestFallbackSnapshot(t *testing.T) {
	p := play(t, story{setup: onOverload("b"), steps: []step{
		{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-2", "m", overloaded, states.Idle),
			"model_fallback m>b overloaded until=5m0s",
			"start_run continuation context=[user-1] model=b/200000",
			"classifying>continuing fallback",
			"append removal:msg-2",
		)},
		{in: reply(unnamed(okAnswer("done"))), want: []string{
			"message msg-3 stop", "append message:msg-3", "agent_end [msg-3]", "continuing>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
	}})
	snap := p.e.Snapshot()
	assert.Equal(t, "b", snap.ActiveModel)
	require.NotNil(t, snap.FallbackUntil)
	assert.Equal(t, t0.Add(5*time.Minute), *snap.FallbackUntil)
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(data, &back))

	setup := policy.Setup{SessionID: "s", Model: testModel, History: p.history}
	e, _, err := policy.Restore(setup, back, t0.Add(time.Minute), 0)
	require.NoError(t, err)
	assert.Equal(t, "b", e.Status().ActiveModel)
	assert.Equal(t, t0.Add(5*time.Minute), e.Status().FallbackUntil)
	effects, err := e.Prompt(t0.Add(time.Minute), "again")
	require.NoError(t, err)
	assert.Equal(t, "b", startedModel(t, effects), "before the cooldown the restored session stays on b")

	e, _, err = policy.Restore(setup, back, t0.Add(5*time.Minute), 0)
	require.NoError(t, err)
	effects, err = e.Prompt(t0.Add(5*time.Minute), "again")
	require.NoError(t, err)
	assert.Equal(t, "m", startedModel(t, effects), "after the cooldown the restored session reverts")

	// A snapshot without the fields (written before them) restores on the
	// primary.
	old := back
	old.ActiveModel, old.FallbackUntil = "", nil
	e, _, err = policy.Restore(setup, old, t0.Add(time.Minute), 0)
	require.NoError(t, err)
	assert.Equal(t, "m", e.Status().ActiveModel)

	// Snapshots that break the fallback's invariants are refused, naming
	// the field.
	for name, c := range map[string]struct {
		edit func(s *policy.Snapshot)
		want string
	}{
		"a model not in the list":     {func(s *policy.Snapshot) { s.ActiveModel = "zz" }, "activeModel"},
		"the primary":                 {func(s *policy.Snapshot) { s.ActiveModel = "m" }, "activeModel"},
		"no cooldown":                 {func(s *policy.Snapshot) { s.FallbackUntil = nil }, "fallbackUntil"},
		"a cooldown without a model":  {func(s *policy.Snapshot) { s.ActiveModel = "" }, "fallbackUntil"},
		"a model without the setting": {func(s *policy.Snapshot) { s.Config.Fallback = nil }, "activeModel"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := back
			c.edit(&bad)
			_, _, err := policy.Restore(setup, bad, t0.Add(time.Minute), 0)
			require.ErrorIs(t, err, policy.ErrSnapshot)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// startedModel is the model of the StartRun among effects.
func startedModel(t *testing.T, effects []policy.Effect) string {
	t.Helper()
	for _, ef := range effects {
		if ef.Kind == policy.StartRun {
			return ef.Model.ID
		}
	}
	t.Fatal("no run started")
	return ""
}

// A cooldown too long for the engine's clock (fallback.cooldownMs at its
// largest) saturates at the latest instant it keeps: the session stays on
// the fallback, and its snapshot restores, rather than the end of the
// cooldown wrapping to the past and reverting at once.
func TestFallbackLongestCooldown(t *testing.T) {
	setup := func(s *policy.Setup) {
		onOverload("b")(s)
		s.Config.Fallback.CooldownMs = math.MaxInt64
	}
	p := play(t, story{setup: setup, steps: []step{
		{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(unnamed(errorAnswer(overloaded))), want: append(failedOn("msg-2", "m", overloaded, states.Idle),
			"model_fallback m>b overloaded until="+time.Unix(0, math.MaxInt64).Sub(t0).String(),
			"start_run continuation context=[user-1] model=b/200000",
			"classifying>continuing fallback",
			"append removal:msg-2",
		)},
		{in: reply(unnamed(okAnswer("done"))), want: []string{
			"message msg-3 stop", "append message:msg-3", "agent_end [msg-3]", "continuing>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: elapse(100 * 365 * 24 * time.Hour)},
		{in: promptIn("later"), want: []string{"start_run prompt user-4 context=[user-1 msg-3 user-4] model=b/200000", "append message:user-4"}},
	}})
	snap := p.e.Snapshot()
	require.NotNil(t, snap.FallbackUntil)
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(data, &back))
	_, _, err = policy.Restore(policy.Setup{SessionID: "s", Model: testModel, History: p.history}, back, p.now, 0)
	require.NoError(t, err)
}
