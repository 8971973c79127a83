package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
)

// A limit shared by the sessions of a process (issue 25 §2): the driver
// reports a run the limit held as a run that returned with HeldUntil.

// held is the driver's report that the shared limit holds the run it was
// asked to start, for d from now.
func held(d time.Duration, key, reason string) input {
	return func(p *player) []string { return heldUntil(p.now.Add(d), key, reason)(p) }
}

// heldUntil is held until a time.
func heldUntil(until time.Time, key, reason string) input {
	return func(p *player) []string {
		return p.lines(p.e.RunReturned(p.now, p.run, policy.RunReturn{HeldUntil: until, HeldKey: key, HeldReason: reason, Credential: "k1"}))
	}
}

func TestStorySharedLimit(t *testing.T) {
	prompted := step{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}
	heldPrompt := step{in: held(2*time.Second, "p/k1", "rate_limited"), want: []string{
		"shared_limit_wait p/k1 rate_limited until=2s",
		"start_timer 2s",
		"idle>backoff wait_shared",
	}, check: statusIs(policy.Status{State: states.Backoff, RetryEnabled: true, CompactionEnabled: true, MessageCount: 1,
		SharedLimitKey: "p/k1", SharedLimitReason: "rate_limited", SharedLimitUntil: t0.Add(2 * time.Second)})}
	playAll(t, []story{
		{name: "a held prompt waits out the shared deadline, then continues from its context", steps: []step{
			prompted, heldPrompt,
			{in: func(p *player) []string {
				return p.lines(p.e.TimerFired(p.now.Add(2*time.Second-time.Millisecond), p.timer))
			}, want: nil},
			{in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"},
				check: func(t *testing.T, p *player) {
					assert.Equal(t, t0.Add(2*time.Second), p.now)
					assert.Empty(t, p.e.Status().SharedLimitKey, "the wait is over")
				}},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-2 stop",
				"append message:msg-2",
				"agent_end [msg-2]",
				"continuing>classifying agent_end",
				"classifying>idle accept",
				"turn_settled ok",
				"finish_turn ok",
			}},
		}},
		{name: "held again when the wait ends: it waits again, counting no attempt", steps: []step{
			prompted, heldPrompt, {in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"}},
			{in: held(time.Second, "p/k1", "probe"), want: []string{
				"shared_limit_wait p/k1 probe until=1s",
				"start_timer 1s",
				"continuing>backoff wait_shared",
			}, check: func(t *testing.T, p *player) { assert.Zero(t, p.e.Status().Attempt) }},
		}},
		{name: "a deadline a thousand years away waits a day, then asks again", steps: []step{
			prompted,
			{in: heldUntil(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), "p/k1", "rate_limited"), want: []string{
				"shared_limit_wait p/k1 rate_limited until=24h0m0s",
				"start_timer 24h0m0s",
				"idle>backoff wait_shared",
			}},
		}},
		{name: "a deadline already past waits 1 ms", steps: []step{
			prompted,
			{in: held(-time.Hour, "p/k1", "rate_limited"), want: []string{
				"shared_limit_wait p/k1 rate_limited until=1ms",
				"start_timer 1ms",
				"idle>backoff wait_shared",
			}},
		}},
		{name: "a retry held by the shared limit keeps its chain", steps: []step{
			prompted,
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
			{in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"}},
			{in: held(3*time.Second, "p/k1", "overloaded"), want: []string{
				"shared_limit_wait p/k1 overloaded until=3s",
				"start_timer 3s",
				"continuing>backoff wait_shared",
			}, check: func(t *testing.T, p *player) { assert.Equal(t, 1, p.e.Status().Attempt) }},
			{in: fire(), want: []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"}},
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
		{name: "AbortRetry cancels a shared wait", steps: []step{
			prompted, heldPrompt,
			{in: func(p *player) []string { return p.lines(p.e.AbortRetry(p.now)) }, want: []string{
				"stop_timer",
				"backoff>cancelled cancel_retry",
				"cancelled>idle reset",
				"turn_settled none",
				"finish_turn policy: retry cancelled",
			}},
		}},
		{name: "a snapshot of a shared wait restores it, to the same instant", steps: []step{
			prompted, heldPrompt,
			{in: func(p *player) []string {
				snap := p.e.Snapshot()
				assert.True(t, snap.SharedWait)
				assert.Equal(t, "p/k1", snap.SharedLimitKey)
				b, err := json.Marshal(snap)
				require.NoError(t, err)
				var back policy.Snapshot
				require.NoError(t, json.Unmarshal(b, &back))
				e, effects, err := policy.Restore(policy.Setup{Model: testModel, History: p.history}, back, p.now.Add(time.Second), 0)
				require.NoError(t, err)
				p.e = e
				return p.lines(effects)
			}, want: []string{"start_timer 2s"}, check: func(t *testing.T, p *player) {
				st := p.e.Status()
				assert.Equal(t, "p/k1", st.SharedLimitKey)
				assert.Equal(t, t0.Add(2*time.Second), st.SharedLimitUntil)
			}},
		}},
	})
}
