package temporal_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
)

// Issue 24: on Temporal, a wait for a usage limit's reset is one durable
// workflow timer, armed once for the whole wait: the workflow holds it,
// not a worker, so a worker stopped during a three-hour wait loses
// nothing (servertest's TestWorkerRestartMidResetWait stops one on a real
// server). The test environment skips the three hours.
func TestResetWaitIsADurableTimer(t *testing.T) {
	snk := &sink{}
	e := env(t, scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "usage limit reached, retry-after: 10800"},
		{StopReason: "stop", Text: "after the reset"},
	}}), snk)
	var timers []time.Duration
	e.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	var begun time.Time
	var during, after rpc.State
	var settledAt time.Duration
	query := func(into *rpc.State) func() {
		return func() {
			v, err := e.QueryWorkflow(temporal.QueryState)
			require.NoError(t, err)
			require.NoError(t, v.Get(into))
		}
	}
	cfg := policy.DefaultConfig()
	cfg.Retry.WaitForReset = true
	var p1 outcome
	e.RegisterDelayedCallback(func() {
		begun = e.Now()
		e.UpdateWorkflow(temporal.UpdatePrompt, "p1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { p1.done, p1.err = true, err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				p1.done, p1.val, p1.err = true, v, err
				settledAt = e.Now().Sub(begun)
			},
		}, "hi")
	}, 0)
	e.RegisterDelayedCallback(query(&during), 90*time.Minute)
	e.RegisterDelayedCallback(query(&after), 4*time.Hour)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, 5*time.Hour)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(cfg))
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p1.done)
	require.NoError(t, p1.err)

	assert.Equal(t, "backoff", during.State)
	reset := begun.Add(3 * time.Hour).UTC()
	assert.Equal(t, reset.UnixMilli(), during.ResetAtMs, "get_state says when the limit resets")
	assert.Equal(t, "idle", after.State)
	assert.Zero(t, after.ResetAtMs)
	assert.Equal(t, 3*time.Hour, settledAt.Truncate(time.Second), "the turn went on at the reset")
	assert.Contains(t, timers, 3*time.Hour, "one timer for the whole wait")
	lines := snk.recovery(t)
	assert.Contains(t, lines, `{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":10800000,"errorMessage":"usage limit reached, retry-after: 10800","errorClass":"usage_limit","provider":"scripted","model":"scripted-1","resetAt":"`+
		reset.Format("2006-01-02T15:04:05.000Z07:00")+`","resetAtMs":`+strconv.FormatInt(reset.UnixMilli(), 10)+`}`)
	assert.Contains(t, lines, `{"type":"state_change","from":"classifying","to":"backoff","event":"wait_reset"}`)
	assert.Contains(t, lines, `{"type":"auto_retry_end","success":true,"attempt":1,"outcome":"recovered","resetWait":true}`)
}
