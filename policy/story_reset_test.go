package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
)

// The wait for a usage limit's reset (retry.waitForReset, issue 24).

const (
	limit2h   = "usage limit reached, retry-after: 7200"
	limit6h   = "usage limit reached, retry-after: 21600"
	rate10min = "429 Too Many Requests: rate limit exceeded, retry-after: 600"
)

func waitForReset(s *policy.Setup) { s.Config.Retry.WaitForReset = true }

func TestStoryResetWait(t *testing.T) {
	reset2h := t0.Add(2 * time.Hour).Format(time.RFC3339Nano)
	limitEnds := func(text, next string) []string {
		return []string{
			"message msg-2 error p/m \"" + text + "\"",
			"append message:msg-2",
			"agent_end [msg-2]",
			"idle>classifying agent_end",
		}
	}
	prompted := step{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}
	waiting := step{in: reply(errorAnswer(limit2h)), want: append(limitEnds(limit2h, ""),
		"retry_start 1/3 7200000ms usage_limit \""+limit2h+"\" reset="+reset2h,
		"start_timer 2h0m0s",
		"classifying>backoff wait_reset",
		"append removal:msg-2",
	), check: statusIs(policy.Status{State: states.Backoff, Attempt: 1, Retrying: true, RetryEnabled: true, CompactionEnabled: true,
		MessageCount: 1, ResetAt: t0.Add(2 * time.Hour)})}
	playAll(t, []story{
		{name: "a usage limit waits for its reset, then the turn goes on", setup: waitForReset, steps: []step{
			prompted, waiting,
			{in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"},
				check: func(t *testing.T, p *player) { assert.Equal(t, t0.Add(2*time.Hour), p.now) }},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-3 stop",
				"retry_end ok 1 recovered resetWait",
				"append message:msg-3",
				"agent_end [msg-3]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "a firing before the reset starts nothing", setup: waitForReset, steps: []step{
			prompted, waiting,
			{in: func(p *player) []string {
				return p.lines(p.e.TimerFired(p.now.Add(2*time.Hour-time.Millisecond), p.timer))
			}, want: nil},
		}},
		{name: "without waitForReset a usage limit over the cap ends the chain", steps: []step{
			prompted,
			{in: reply(errorAnswer(limit2h)), want: append(limitEnds(limit2h, ""),
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled usage_limit",
				"finish_turn policy: retries exhausted after 0 attempts: "+limit2h,
			)},
		}},
		{name: "a reset further than maxResetWaitMs fails the turn, naming it", setup: waitForReset, steps: []step{
			prompted,
			{in: reply(errorAnswer(limit6h)), want: append(limitEnds(limit6h, ""),
				"classifying>exhausted reset_too_far",
				"exhausted>idle reset",
				"turn_settled usage_limit",
				"finish_turn policy: retries exhausted after 0 attempts: "+limit6h+"; the limit resets at 2026-01-01T06:00:00Z, more than retry.maxResetWaitMs (18000000 ms) away",
			), check: func(t *testing.T, p *player) {
				var ex *policy.ExhaustedError
				require.ErrorAs(t, p.turnErr, &ex)
				assert.Equal(t, t0.Add(6*time.Hour), ex.ResetAt)
				assert.ErrorIs(t, p.turnErr, policy.ErrExhausted)
			}},
		}},
		{name: "a rate limit whose hint is over the cap waits for it too", setup: waitForReset, steps: []step{
			prompted,
			{in: reply(errorAnswer(rate10min)), want: append(limitEnds(rate10min, ""),
				"retry_start 1/3 600000ms retryable \""+rate10min+"\" reset="+t0.Add(10*time.Minute).Format(time.RFC3339Nano),
				"start_timer 10m0s",
				"classifying>backoff wait_reset",
				"append removal:msg-2",
			)},
		}},
		{name: "AbortRetry cancels the wait", setup: waitForReset, steps: []step{
			prompted, waiting,
			{in: abortRetryIn(), want: []string{
				"stop_timer",
				"retry_end fail 1 cancelled none \"Retry cancelled\" resetWait",
				"backoff>cancelled cancel_retry",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: retry cancelled",
			}, check: statusIs(policy.Status{State: states.Idle, RetryEnabled: true, CompactionEnabled: true, MessageCount: 1})},
		}},
		{name: "Abort cancels the wait", setup: waitForReset, steps: []step{
			prompted, waiting,
			{in: abortIn(), want: []string{
				"stop_timer",
				"retry_end fail 1 cancelled none \"Retry cancelled\" resetWait",
				"backoff>cancelled cancel",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: aborted",
			}},
		}},
	})
}

// The credential rule comes first: a free credential switches at once,
// with no wait; a store that cannot switch leaves the wait, measured from
// the run's end.
func TestStoryResetWaitAfterTheCredentialStore(t *testing.T) {
	creds := func(s *policy.Setup) { s.Credentials = true; s.Config.Retry.WaitForReset = true }
	asked := []string{
		"message msg-2 error p/m \"" + limit2h + "\"",
		"append message:msg-2",
		"agent_end [msg-2]",
		"idle>classifying agent_end",
		"mark_usage_limit 2h0m0s",
	}
	prompted := step{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}
	playAll(t, []story{
		{name: "switched: no wait", setup: creds, steps: []step{
			prompted,
			{in: reply(errorAnswer(limit2h)), want: asked},
			{in: switched(true), want: []string{
				"retry_start 1/3 0ms usage_limit \"" + limit2h + "\"",
				"start_timer 0s",
				"classifying>backoff retry_now",
				"append removal:msg-2",
			}},
		}},
		{name: "not switched: the wait ends at the reset the run was told", setup: creds, steps: []step{
			prompted,
			{in: reply(errorAnswer(limit2h)), want: asked},
			{in: elapse(time.Second)},
			{in: switched(false), want: []string{
				"retry_start 1/3 7199000ms usage_limit \"" + limit2h + "\" reset=" + t0.Add(2*time.Hour).Format(time.RFC3339Nano),
				"start_timer 1h59m59s",
				"classifying>backoff wait_reset",
				"append removal:msg-2",
			}},
		}},
	})
}

// A snapshot taken during the wait restores it with the same absolute
// deadline, and the chain's auto_retry_end still says it waited.
func TestSnapshotDuringResetWait(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Retry.WaitForReset = true
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
	require.NoError(t, err)
	d := &driver{e: e}
	effects, err := e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	d.answerRun(t0, errorAnswer(limit2h), 0)
	reset := t0.Add(2 * time.Hour)
	require.Equal(t, reset, d.at)

	snap := e.Snapshot()
	assert.True(t, snap.ResetWait)
	assert.True(t, snap.ResetWaited)
	b, err := json.Marshal(snap)
	require.NoError(t, err)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(b, &back))

	later := t0.Add(90 * time.Minute) // the process came back an hour and a half on
	e2, effects, err := policy.Restore(policy.Setup{Model: testModel, History: d.history}, back, later, 0)
	require.NoError(t, err)
	d2 := &driver{e: e2, history: d.history}
	d2.feed(effects)
	assert.Equal(t, reset, d2.at, "the restored wait ends at the same instant")
	assert.Equal(t, reset, e2.Status().ResetAt)
	assert.Equal(t, states.Backoff, e2.Status().State)

	assert.Empty(t, e2.TimerFired(reset.Add(-time.Millisecond), d2.timer), "no run before the reset")
	d2.feed(e2.TimerFired(reset, d2.timer))
	d2.answerRun(reset, okAnswer("done"), 0)
	assert.Contains(t, d2.events, "retry_end true 1  resetWait")
}

func TestSnapshotResetWaitChecked(t *testing.T) {
	cfg := policy.DefaultConfig()
	deadline := t0.Add(time.Hour)
	cases := []struct {
		snap policy.Snapshot
		says string
	}{
		{policy.Snapshot{State: states.Idle, ResetWait: true, ResetWaited: true}, "resetWait: set in state \"idle\""},
		{policy.Snapshot{State: states.Backoff, Attempt: 1, Deadline: &deadline, ResetWait: true}, "resetWaited: clear while the backoff waits"},
		{policy.Snapshot{State: states.Idle, ResetWaited: true}, "resetWaited: set with no retry chain active"},
	}
	for _, c := range cases {
		c.snap.Version, c.snap.SessionID, c.snap.Config = writtenVersion(t), "s", cfg
		_, _, err := policy.Restore(policy.Setup{Model: testModel}, c.snap, t0, 0)
		require.ErrorIs(t, err, policy.ErrSnapshot, c.says)
		assert.ErrorContains(t, err, c.says)
	}
}

// A wait for a reset never starts a run before the reset: whatever the
// hint, the bound and when the timer fires (early, late, a stale timer),
// the continuation's StartRun comes at or after the reset the run was told.
func TestResetWaitNeverRunsBeforeTheReset(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := policy.DefaultConfig()
		cfg.Retry.WaitForReset = true
		cfg.Retry.MaxResetWaitMs = rapid.Int64Range(0, 10*3600*1000).Draw(rt, "maxResetWaitMs")
		// The wait is the hint, or the chain's own delay when longer: a
		// first delay of 1 ms without jitter makes that 1 ms.
		cfg.Retry.BaseDelayMs, cfg.Retry.Jitter = 1, 0
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
		require.NoError(rt, err)
		d := &driver{e: e}
		effects, err := e.Prompt(t0, "hi")
		require.NoError(rt, err)
		d.feed(effects)
		hintMs := rapid.Int64Range(0, 12*3600*1000).Draw(rt, "hintMs")
		now := t0
		d.answerRun(now, errorAnswer("usage limit reached, retry-after-ms: "+itoa(hintMs)), 0)
		reset := t0.Add(time.Duration(max(hintMs, 1)) * time.Millisecond)
		if hintMs > cfg.Retry.MaxResetWaitMs {
			require.True(rt, d.settled, "a reset beyond the bound fails the turn")
			require.Zero(rt, d.timer)
			return
		}
		require.Equal(rt, reset, d.at)
		timer := d.timer
		for range rapid.IntRange(1, 6).Draw(rt, "firings") {
			now = now.Add(time.Duration(rapid.Int64Range(0, 3*3600*1000).Draw(rt, "stepMs")) * time.Millisecond)
			id := timer
			if rapid.Bool().Draw(rt, "stale") {
				id = timer - 1
			}
			for _, ef := range e.TimerFired(now, id) {
				if ef.Kind == policy.StartRun {
					require.False(rt, now.Before(reset), "a run started at %s, before the reset at %s", now, reset)
					return
				}
			}
		}
	})
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
