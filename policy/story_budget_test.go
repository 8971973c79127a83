package policy_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
)

// budget sets a time budget of ms milliseconds and the count limit max
// (-1 for none).
func budget(ms int64, maxRetries int) func(*policy.Setup) {
	return retrySetup(func(c *policy.RetryConfig) { c.MaxElapsedMs, c.MaxRetries = ms, maxRetries })
}

// failed503 is the lines of a run that fails with a 503 (message msg-n),
// up to its decision.
func failed503(id, from string) []string {
	return []string{
		"message " + id + " error p/m \"503 Service Unavailable\"",
		"append message:" + id,
		"agent_end [" + id + "]",
		from + ">classifying agent_end",
	}
}

func retried(id string, retry ...string) []string {
	return append(retry, "classifying>backoff retry", "append removal:"+id)
}

var resumed = []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"}

var prompted = []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}

// Issue 24 §1: a chain with a time budget (retry.maxElapsedMs) ends at
// whichever limit comes first; a retry whose delay would end past the
// budget, counted from the chain's first failure, is not scheduled.
func TestStoryRetryBudget(t *testing.T) {
	playAll(t, []story{
		{name: "no count limit: the budget ends the chain", setup: budget(10_000, -1), steps: []step{
			{in: promptIn("hi"), want: prompted},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), retried("msg-2",
				"retry_start 1/-1 2000ms retryable \"503 Service Unavailable\" budget=10000 elapsed=0 left=10000", "start_timer 2s")),
				check: statusIs(policy.Status{State: states.Backoff, Attempt: 1, Retrying: true, RetryEnabled: true, CompactionEnabled: true,
					MessageCount: 1, MaxElapsedMs: 10_000, RetryStarted: t0})},
			{in: fire(), want: resumed},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-3", "continuing"), retried("msg-3",
				"retry_start 2/-1 4000ms retryable \"503 Service Unavailable\" budget=10000 elapsed=2000 left=8000", "start_timer 4s")),
				check: statusIs(policy.Status{State: states.Backoff, Attempt: 2, Retrying: true, RetryEnabled: true, CompactionEnabled: true,
					MessageCount: 1, MaxElapsedMs: 10_000, RetryStarted: t0})},
			{in: fire(), want: resumed},
			// 6 s spent, the next delay 8 s: it would end at 14 s, past 10 s.
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-4", "continuing"), []string{
				"retry_end fail 2 exhausted retryable \"503 Service Unavailable\" limit=elapsed",
				"classifying>exhausted exhaust_elapsed",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 2 attempts: the next retry, in 8s, would end past the time budget of 10s (6s spent): 503 Service Unavailable",
			}), check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrExhausted, policy.ErrProvider)(t, p)
				var ex *policy.ExhaustedError
				require.ErrorAs(t, p.turnErr, &ex)
				assert.Equal(t, policy.ExhaustedError{Attempts: 2, Last: service503, Budget: 10 * time.Second, Elapsed: 6 * time.Second, Delay: 8 * time.Second}, *ex)
				assert.Equal(t, policy.Status{State: states.Idle, RetryEnabled: true, CompactionEnabled: true, MessageCount: 2}, p.e.Status(),
					"no budget figures once the chain is over")
			}},
		}},
		{name: "a retry ending exactly at the budget is scheduled", setup: budget(6_000, -1), steps: []step{
			{in: promptIn("hi"), want: prompted},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), retried("msg-2",
				"retry_start 1/-1 2000ms retryable \"503 Service Unavailable\" budget=6000 elapsed=0 left=6000", "start_timer 2s"))},
			{in: fire(), want: resumed},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-3", "continuing"), retried("msg-3",
				"retry_start 2/-1 4000ms retryable \"503 Service Unavailable\" budget=6000 elapsed=2000 left=4000", "start_timer 4s"))},
		}},
		{name: "the run's own time counts against the budget", setup: budget(6_000, -1), steps: []step{
			{in: promptIn("hi"), want: prompted},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), retried("msg-2",
				"retry_start 1/-1 2000ms retryable \"503 Service Unavailable\" budget=6000 elapsed=0 left=6000", "start_timer 2s"))},
			{in: fire(), want: resumed},
			// The continuation takes 1 ms to fail: 2001 + 4000 > 6000.
			{in: elapse(time.Millisecond)},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-3", "continuing"), []string{
				"retry_end fail 1 exhausted retryable \"503 Service Unavailable\" limit=elapsed",
				"classifying>exhausted exhaust_elapsed",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 1 attempts: the next retry, in 4s, would end past the time budget of 6s (2.001s spent): 503 Service Unavailable",
			})},
		}},
		{name: "the count ends the chain before the budget", setup: budget(3_600_000, 1), steps: []step{
			{in: promptIn("hi"), want: prompted},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), retried("msg-2",
				"retry_start 1/1 2000ms retryable \"503 Service Unavailable\" budget=3600000 elapsed=0 left=3600000", "start_timer 2s"))},
			{in: fire(), want: resumed},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-3", "continuing"), []string{
				"retry_end fail 1 exhausted retryable \"503 Service Unavailable\" limit=retries",
				"classifying>exhausted exhaust",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 1 attempts: 503 Service Unavailable",
			})},
		}},
		{name: "a first delay past the budget: no chain starts", setup: budget(1_000, -1), steps: []step{
			{in: promptIn("hi"), want: prompted},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), []string{
				"classifying>exhausted exhaust_elapsed",
				"exhausted>idle reset",
				"turn_settled retryable",
				"finish_turn policy: retries exhausted after 0 attempts: the next retry, in 2s, would end past the time budget of 1s (0s spent): 503 Service Unavailable",
			})},
		}},
		{name: "a chain that recovers within the budget", setup: budget(10_000, -1), steps: []step{
			{in: promptIn("hi"), want: prompted},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), retried("msg-2",
				"retry_start 1/-1 2000ms retryable \"503 Service Unavailable\" budget=10000 elapsed=0 left=10000", "start_timer 2s"))},
			{in: fire(), want: resumed},
			{in: reply(okAnswer("done")), want: []string{
				"message msg-3 stop", "retry_end ok 1 recovered", "append message:msg-3", "agent_end [msg-3]",
				"continuing>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
			}},
			// A new chain has a new budget: it counts from its own first
			// failure, a minute later.
			{in: elapse(time.Minute)},
			{in: promptIn("again"), want: []string{"start_run prompt user-4 context=[user-1 msg-3 user-4]", "append message:user-4"}},
			{in: reply(errorAnswer(service503)), want: lines(failed503("msg-5", "idle"), []string{
				"retry_start 1/-1 2000ms retryable \"503 Service Unavailable\" budget=10000 elapsed=0 left=10000", "start_timer 2s",
				"classifying>backoff retry", "append removal:msg-5",
			}), check: func(t *testing.T, p *player) {
				assert.Equal(t, t0.Add(2*time.Second+time.Minute), p.e.Status().RetryStarted)
			}},
		}},
	})
}

// Issue 24 §1: the chain's start survives a snapshot: a restored backoff
// keeps its budget, counted from the first failure before the snapshot,
// and a snapshot of a chain with a budget but no start is refused. One
// written before the budget existed (no chainStart, no maxElapsedMs) still
// reads and resumes.
func TestRetryBudgetSurvivesSnapshot(t *testing.T) {
	p := play(t, story{setup: budget(10_000, -1), steps: []step{
		{in: promptIn("hi"), want: prompted},
		{in: reply(errorAnswer(service503)), want: lines(failed503("msg-2", "idle"), retried("msg-2",
			"retry_start 1/-1 2000ms retryable \"503 Service Unavailable\" budget=10000 elapsed=0 left=10000", "start_timer 2s"))},
		{in: fire(), want: resumed},
		{in: reply(errorAnswer(service503)), want: lines(failed503("msg-3", "continuing"), retried("msg-3",
			"retry_start 2/-1 4000ms retryable \"503 Service Unavailable\" budget=10000 elapsed=2000 left=8000", "start_timer 4s"))},
	}})
	snap := p.e.Snapshot()
	require.NotNil(t, snap.ChainStart)
	assert.Equal(t, t0, *snap.ChainStart)
	b, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"chainStart":"2026-01-01T00:00:00Z"`)
	var back policy.Snapshot
	require.NoError(t, json.Unmarshal(b, &back))

	// Restored after the deadline (6 s): the timer fires at once, the
	// continuation fails, and 6 s are spent: the next 8 s would end past
	// the 10 s budget.
	at := t0.Add(6 * time.Second)
	e, effects, err := policy.Restore(policy.Setup{Model: testModel, History: p.history}, back, at, 0)
	require.NoError(t, err)
	q := &player{t: t, e: e, now: at}
	q.lines(effects)
	assert.Equal(t, policy.Status{State: states.Backoff, Attempt: 2, Retrying: true, RetryEnabled: true, CompactionEnabled: true,
		MessageCount: 1, MaxElapsedMs: 10_000, RetryStarted: t0}, e.Status())
	assert.Equal(t, resumed, fire()(q))
	got := reply(errorAnswer(service503))(q)
	assert.Contains(t, got, "classifying>exhausted exhaust_elapsed")
	assert.Contains(t, got, "retry_end fail 2 exhausted retryable \"503 Service Unavailable\" limit=elapsed")

	// With a budget, a chain without its start is refused, naming it; so
	// is a start without a chain.
	broken := back
	broken.ChainStart = nil
	_, _, err = policy.Restore(policy.Setup{Model: testModel, History: p.history}, broken, at, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "chainStart: missing")
	var zero time.Time
	broken.ChainStart = &zero
	_, _, err = policy.Restore(policy.Setup{Model: testModel, History: p.history}, broken, at, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "chainStart: the zero time")
	idle := policy.Snapshot{Version: writtenVersion(t), SessionID: "s", Config: back.Config, State: states.Idle,
		History: len(p.history), ChainStart: &t0}
	_, _, err = policy.Restore(policy.Setup{Model: testModel, History: p.history}, idle, at, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "chainStart: set with no retry chain active")

	// A snapshot as an earlier version wrote it: no maxElapsedMs, no
	// chainStart, in a backoff.
	old := []byte(`{"version":1,"sessionId":"s","config":{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":2000,"maxDelayMs":0,"jitter":0,"honorRetryAfter":false,"rules":"seed"},"compaction":{"enabled":true,"reserveTokens":16384,"keepRecentTokens":20000}},"state":"backoff","attempt":2,"history":` +
		jsonInt(len(p.history)) + `,"deadline":"2026-01-01T00:00:06Z","turn":true,"tickets":5}`)
	var prev policy.Snapshot
	require.NoError(t, json.Unmarshal(old, &prev))
	e, _, err = policy.Restore(policy.Setup{Model: testModel, History: p.history}, prev, at, 0)
	require.NoError(t, err)
	assert.Equal(t, policy.Status{State: states.Backoff, Attempt: 2, Retrying: true, RetryEnabled: true, CompactionEnabled: true, MessageCount: 1}, e.Status())
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Issue 24 §1: maxRetries -1 needs a budget: New refuses a config with
// neither limit, naming the setting.
func TestUnboundedChainRefused(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Retry.MaxRetries = -1
	_, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: cfg})
	require.ErrorIs(t, err, policy.ErrInvalidConfig)
	assert.ErrorContains(t, err, "retry.maxRetries -1 (no count limit) needs a time budget: retry.maxElapsedMs above 0")
}

// lines joins groups of lines.
func lines(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// outage drives e through a turn whose every run fails with a 503 after
// runTime, from t0, and returns the delays of its retries, the time the
// turn ended and its error.
func outage(t *testing.T, e *policy.Engine, runTime time.Duration) (delays []time.Duration, end time.Time, err error) {
	t.Helper()
	now := t0
	effects, err := e.Prompt(now, "hi")
	require.NoError(t, err)
	var run policy.RunID
	for range 10_000 {
		var timer policy.TimerID
		for _, ef := range effects {
			switch ef.Kind {
			case policy.StartRun:
				run = ef.Run
			case policy.StartTimer:
				timer = ef.Timer
				delays = append(delays, ef.Deadline.Sub(now))
				now = ef.Deadline
			case policy.FinishTurn:
				return delays, now, ef.Err
			}
		}
		if timer != 0 {
			effects = e.TimerFired(now, timer)
			continue
		}
		now = now.Add(runTime)
		m := errorAnswer(service503)
		for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
			e.RunEvent(now, run, ev)
		}
		effects = e.RunReturned(now, run, policy.RunReturn{})
	}
	t.Fatal("the turn did not end")
	return nil, time.Time{}, nil
}

// Issue 24 §1, the figures docs/session.md gives for the patient preset:
// delays of 2, 4, 8, 16, 32 s and then 60 s; with runs that fail at once,
// 33 retries and the turn fails 29 min 2 s after the first failure (the
// 34th retry would end at 30 min 2 s); with runs that take 10 s to fail,
// 29 retries, and it fails 29 min 52 s after the first of its 30 failures.
// The reference's chain is 2, 4, 8 s.
func TestPatientPresetSchedule(t *testing.T) {
	for _, c := range []struct {
		run     time.Duration
		retries int
		spent   time.Duration
	}{
		{0, 33, 29*time.Minute + 2*time.Second},
		{10 * time.Second, 29, 29*time.Minute + 52*time.Second},
	} {
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.PatientConfig()})
		require.NoError(t, err)
		delays, end, err := outage(t, e, c.run)
		var ex *policy.ExhaustedError
		require.ErrorAs(t, err, &ex)
		assert.Equal(t, time.Minute, ex.Delay)
		assert.Equal(t, 30*time.Minute, ex.Budget)
		require.Len(t, delays, c.retries, "run time %v", c.run)
		s := time.Second
		assert.Equal(t, []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s}, delays[:7])
		assert.Equal(t, c.spent, end.Sub(t0.Add(c.run)), "from the first failure to the turn's end, run time %v", c.run)
		assert.Equal(t, c.spent, ex.Elapsed)
	}
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.ReferenceConfig()})
	require.NoError(t, err)
	delays, _, err := outage(t, e, 0)
	require.ErrorIs(t, err, policy.ErrExhausted)
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}, delays)
}
