package rpc_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transitions"
)

// TestMarshalEventIsTheServersLine: a program logging events writes the
// server's line, which a client decodes back into the event. Issue item 4.
func TestMarshalEventIsTheServersLine(t *testing.T) {
	ev := events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 5, ErrorMessage: "529 overloaded_error: Overloaded"}
	b, err := rpc.MarshalEvent(ev)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":5,"errorMessage":"529 overloaded_error: Overloaded"}`, string(b))
	back, err := rpc.Event{Type: rpc.EventType(ev), Raw: b}.Value()
	require.NoError(t, err)
	assert.Equal(t, ev, back)

	_, err = rpc.MarshalEvent(nil)
	require.ErrorContains(t, err, "rpc: not a session event")
}

// TestStateChangeBeforeTheRenameStillReads: the rule that takes a run's
// outcome as it is was named "settle" before it was "accept". A line a
// server of then wrote, logged and read back now, decodes to the rule's
// name today; every other name reads as it is written.
func TestStateChangeBeforeTheRenameStillReads(t *testing.T) {
	old := rpc.Event{Type: "state_change", Raw: []byte(`{"type":"state_change","from":"classifying","to":"idle","event":"settle"}`)}
	ev, err := old.Value()
	require.NoError(t, err)
	assert.Equal(t, events.StateChange{From: states.Classifying, To: states.Idle, Trigger: transitions.Accept}, ev)

	for _, r := range transitions.Table() {
		for _, from := range r.From {
			sc := events.StateChange{From: from, To: r.Target(from), Trigger: r.Trigger}
			b, err := rpc.MarshalEvent(sc)
			require.NoError(t, err)
			back, err := rpc.Event{Type: "state_change", Raw: b}.Value()
			require.NoError(t, err)
			assert.Equal(t, sc, back)
		}
	}
	unknown := rpc.Event{Type: "state_change", Raw: []byte(`{"type":"state_change","from":"idle","to":"idle","event":"warp"}`)}
	ev, err = unknown.Value()
	require.NoError(t, err)
	assert.Equal(t, events.StateChange{From: states.Idle, To: states.Idle, Trigger: "warp"}, ev, "a name this client does not know is kept as it came")
}

// Issue 24 §1: a chain with a time budget adds its figures to
// auto_retry_start (elapsedMs, maxElapsedMs, remainingMs, elapsedMs 0
// included) after the fields it always had, which are unchanged; a chain
// without one, the reference's, writes the line as before, byte for byte.
// auto_retry_end names the limit that ended an exhausted chain.
func TestRetryBudgetOnTheWire(t *testing.T) {
	for _, c := range []struct {
		ev   events.Event
		line string
	}{
		{events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "529 overloaded_error: Overloaded", ErrorClass: classify.Retryable},
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"529 overloaded_error: Overloaded","errorClass":"retryable"}`},
		{events.AutoRetryStart{Attempt: 1, MaxAttempts: -1, DelayMs: 2000, ErrorMessage: "529", ErrorClass: classify.Retryable, MaxElapsedMs: 1_800_000, RemainingMs: 1_800_000},
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":-1,"delayMs":2000,"errorMessage":"529","errorClass":"retryable","elapsedMs":0,"maxElapsedMs":1800000,"remainingMs":1800000}`},
		{events.AutoRetryStart{Attempt: 7, MaxAttempts: -1, DelayMs: 60000, ErrorMessage: "529", MaxElapsedMs: 1_800_000, ElapsedMs: 122_000, RemainingMs: 1_678_000},
			`{"type":"auto_retry_start","attempt":7,"maxAttempts":-1,"delayMs":60000,"errorMessage":"529","elapsedMs":122000,"maxElapsedMs":1800000,"remainingMs":1678000}`},
		{events.AutoRetryEnd{Attempt: 3, FinalError: "529", Outcome: events.RetryExhausted, ErrorClass: classify.Retryable, Limit: events.LimitRetries},
			`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"529","outcome":"exhausted","errorClass":"retryable","limit":"retries"}`},
		{events.AutoRetryEnd{Attempt: 33, FinalError: "529", Outcome: events.RetryExhausted, ErrorClass: classify.Retryable, Limit: events.LimitElapsed},
			`{"type":"auto_retry_end","success":false,"attempt":33,"finalError":"529","outcome":"exhausted","errorClass":"retryable","limit":"elapsed"}`},
		{events.AutoRetryEnd{Success: true, Attempt: 2, Outcome: events.RetryRecovered},
			`{"type":"auto_retry_end","success":true,"attempt":2,"outcome":"recovered"}`},
	} {
		b, err := rpc.MarshalEvent(c.ev)
		require.NoError(t, err)
		assert.Equal(t, c.line, string(b))
		back, err := rpc.Event{Type: rpc.EventType(c.ev), Raw: b}.Value()
		require.NoError(t, err)
		assert.Equal(t, c.ev, back)
	}
}

// Issue 24 §1: get_state shows a chain's time budget while one is in
// progress (its start and end in Unix milliseconds), and nothing of it
// otherwise: the reference's answer is as it was.
func TestStateShowsTheRetryBudget(t *testing.T) {
	m := policy.Model{Provider: "p", ID: "m"}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := policy.Status{State: states.Backoff, Attempt: 2, Retrying: true, RetryEnabled: true, MaxElapsedMs: 1_800_000, RetryStarted: start}
	b, err := json.Marshal(rpc.StateOf("s", m, st, nil))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"state":"backoff","retryBudget":{"maxElapsedMs":1800000,"startedAt":1767225600000,"endsAt":1767227400000}}`)

	st.MaxElapsedMs, st.RetryStarted = 0, time.Time{}
	b, err = json.Marshal(rpc.StateOf("s", m, st, nil))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "retryBudget")

	// A budget as large as the settings allow ends at the largest time,
	// not a wrapped one.
	st.MaxElapsedMs, st.RetryStarted = math.MaxInt64, start
	assert.Equal(t, int64(math.MaxInt64), rpc.StateOf("s", m, st, nil).RetryBudget.EndsAt)
}
