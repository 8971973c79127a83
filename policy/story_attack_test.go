package policy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
)

// Hostile inputs to the time budget and the wait for a reset (issue 24):
// delays and resets beyond the instants the engine keeps, and clocks that
// jump.

// lastInstant is the last instant the engine keeps, to the millisecond:
// the largest Unix nanosecond, 2262-04-11T23:47:16.854Z.
var lastInstant = time.Date(2262, 4, 11, 23, 47, 16, 854_000_000, time.UTC)

// playAt starts a player whose clock reads at, with the setup s.
func playAt(t *testing.T, at time.Time, s func(*policy.Setup)) *player {
	t.Helper()
	set := policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()}
	if s != nil {
		s(&set)
	}
	e, err := policy.New(set)
	require.NoError(t, err)
	p := &player{t: t, e: e, now: at}
	promptIn("hi")(p)
	return p
}

// TestStoryDelayPastTheLastInstant: a delay that would end after 2262
// (the longest delay, about 292 years, from 2026 ends in 2318) waits until the last instant the
// engine keeps instead of wrapping: its deadline, reported delay,
// snapshot and firing all agree, and a firing an hour later starts
// nothing. It wrapped to 1733: the snapshot's deadline was in the past
// and any firing started the retry at once.
func TestStoryDelayPastTheLastInstant(t *testing.T) {
	huge := func(s *policy.Setup) {
		s.Config = policy.ReferenceConfig()
		s.Config.Retry.BaseDelayMs = 9e15
	}
	p := playAt(t, t0, huge)
	lines := reply(errorAnswer("503 Service Unavailable"))(p)
	want := lastInstant.Sub(t0)
	assert.Contains(t, lines, "retry_start 1/3 "+ms(want)+" retryable \"503 Service Unavailable\"")
	assert.Equal(t, lastInstant, p.deadline.UTC())
	snap := p.e.Snapshot()
	require.NotNil(t, snap.Deadline)
	assert.Equal(t, lastInstant, snap.Deadline.UTC(), "the snapshot keeps the deadline")
	assert.Empty(t, p.lines(p.e.TimerFired(t0.Add(time.Hour), p.timer)), "a firing long before the deadline starts nothing")
	assert.Equal(t, states.Backoff, p.e.Status().State)

	// Restored, it waits to the same instant.
	set := policy.Setup{SessionID: "s", Model: testModel, Config: snap.Config, History: p.history}
	r, effects, err := policy.Restore(set, snap, t0.Add(time.Hour), 0)
	require.NoError(t, err)
	q := &player{t: t, e: r, now: t0.Add(time.Hour)}
	q.lines(effects)
	assert.Equal(t, lastInstant, q.deadline.UTC())
	assert.Empty(t, q.lines(r.TimerFired(t0.Add(2*time.Hour), q.timer)))
	assert.Equal(t, []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"},
		q.lines(r.TimerFired(lastInstant, q.timer)), "at the deadline the retry goes")
}

// TestStoryResetPastTheLastInstant: a reset 250 years away, under a
// maxResetWaitMs that allows it, waits until the last instant the engine
// keeps: its reported reset, the timer, Status and the snapshot agree.
func TestStoryResetPastTheLastInstant(t *testing.T) {
	patientForever := func(s *policy.Setup) {
		s.Config.Retry.WaitForReset = true
		s.Config.Retry.MaxResetWaitMs = 9_223_372_036_854 // the longest delay (RetryConfig)
	}
	p := playAt(t, t0, patientForever)
	text := "usage limit reached, retry-after: 7889400000" // 250 years
	lines := reply(errorAnswer(text))(p)
	require.Contains(t, strings.Join(lines, "\n"), "classifying>backoff wait_reset")
	assert.Contains(t, lines, "retry_start 1/3 "+ms(lastInstant.Sub(t0))+" usage_limit \""+text+"\" reset="+lastInstant.Format(time.RFC3339Nano))
	assert.Equal(t, lastInstant, p.deadline.UTC())
	assert.Equal(t, lastInstant, p.e.Status().ResetAt.UTC())
	snap := p.e.Snapshot()
	require.NotNil(t, snap.Deadline)
	assert.Equal(t, lastInstant, snap.Deadline.UTC())
	assert.Empty(t, p.lines(p.e.TimerFired(t0.Add(time.Hour), p.timer)))
}

// TestStoryClockPastTheLastInstant: a clock that jumps beyond 2262 still
// fires the backoff it waits for (the firing's time read as Unix
// nanoseconds wrapped below the deadline: the session waited forever).
func TestStoryClockPastTheLastInstant(t *testing.T) {
	p := playAt(t, t0, nil)
	reply(errorAnswer("503 Service Unavailable"))(p)
	jumped := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, []string{"start_run continuation context=[user-1]", "backoff>continuing elapsed"},
		p.lines(p.e.TimerFired(jumped, p.timer)))
}

// TestStoryChainStartingAtTheEpoch: a chain whose first failure is at the
// Unix epoch itself (a clock reset to 0) keeps its time budget: its start
// read as nanoseconds was 0, which stands for "unknown", and the chain
// had no budget at all (maxRetries -1: it never ended).
func TestStoryChainStartingAtTheEpoch(t *testing.T) {
	budget := func(s *policy.Setup) {
		s.Config.Retry.MaxRetries = -1
		s.Config.Retry.MaxElapsedMs = 10_000
	}
	p := playAt(t, time.Unix(0, 0), budget)
	reply(errorAnswer("503 Service Unavailable"))(p) // attempt 1, 2 s
	fire()(p)
	reply(errorAnswer("503 Service Unavailable"))(p) // attempt 2, 4 s: ends at 6 s
	fire()(p)
	lines := reply(errorAnswer("503 Service Unavailable"))(p) // attempt 3, 8 s would end at 14 s
	assert.Contains(t, lines, "classifying>exhausted exhaust_elapsed")
	assert.True(t, p.turnDone)
	st := p.e.Status()
	assert.Equal(t, states.Idle, st.State)
}

// ms is d as a retry_start line writes its delay.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// TestStoryResetsThatKeepComingEndTheChain: with no count limit, a server
// that answers every retry "usage limit reached, retry-after: 60" ends the
// chain once the time budget, counted from the first reset, runs out. The
// budget started afresh at every reset, so the chain went on for ever
// (100,000 waits in 28 hours under a 30-minute budget).
func TestStoryResetsThatKeepComingEndTheChain(t *testing.T) {
	patient := func(s *policy.Setup) {
		s.Config = policy.PatientConfig()
		s.Config.Retry.MaxElapsedMs = 600_000
		s.Config.Retry.WaitForReset = true
	}
	const text = "usage limit reached, retry-after: 60"
	p := playAt(t, t0, patient)
	waits := 0
	for ; waits < 1000; waits++ {
		lines := reply(errorAnswer(text))(p)
		if p.turnDone {
			assert.Contains(t, lines, "classifying>exhausted exhaust_elapsed")
			assert.Contains(t, lines, "retry_end fail "+strconv.Itoa(waits)+" exhausted usage_limit \""+text+"\" limit=elapsed resetWait")
			break
		}
		require.Contains(t, lines, "classifying>backoff wait_reset", "wait %d", waits+1)
		fire()(p)
	}
	// The first wait ends at t0+60s, where the 10-minute budget starts;
	// each later wait takes 60 s (the hint, longer than the chain's own
	// delays, which the patient preset caps at 60 s): ten more fit.
	assert.Equal(t, 11, waits)
	var ex *policy.ExhaustedError
	require.ErrorAs(t, p.turnErr, &ex)
	assert.Equal(t, 10*time.Minute, ex.Budget)
	assert.Equal(t, 10*time.Minute, ex.Elapsed)
	assert.Equal(t, time.Minute, ex.Delay, "the delay named is the time until the reset")
	assert.Equal(t, states.Idle, p.e.Status().State)
}
