package temporal_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/transcript"
)

// holdOnce is a worker's limiter that holds the first run until until,
// then admits, noting what each admitted run ended with.
type holdOnce struct {
	until time.Time
	mu    sync.Mutex
	asked int
	done  []*transcript.Message
}

func (h *holdOnce) Admit(provider, credential string) (time.Time, string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked++
	if h.asked == 1 {
		return h.until, provider + "/" + credential, "rate_limited"
	}
	return time.Time{}, "", ""
}

func (h *holdOnce) Done(_, _ string, last *transcript.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = append(h.done, last)
}

// Issue 25 §2: on Temporal the worker's limiter is asked in the run
// activity; a held run makes no call and the workflow waits out the
// shared deadline on a durable timer (rule wait_shared), then runs.
func TestSharedLimitOnTheWorker(t *testing.T) {
	snk := &sink{}
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: "after the hold"}}})
	e := newEnv()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.SetStartTime(start)
	lim := &holdOnce{until: start.Add(2 * time.Second)}
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: snk, Limiter: lim}).Register(e)
	var p1 outcome
	var settledAt time.Time
	e.RegisterDelayedCallback(func() {
		e.UpdateWorkflow(temporal.UpdatePrompt, "p1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { p1.done, p1.err = true, err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				p1.done, p1.val, p1.err = true, v, err
				settledAt = e.Now()
			},
		}, "hi")
	}, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p1.done)
	require.NoError(t, p1.err)
	assert.False(t, settledAt.Before(start.Add(2*time.Second)), "the turn settled at %v, before the shared deadline", settledAt)
	assert.Equal(t, 2, lim.asked, "asked before each run: held, then admitted")
	require.Len(t, lim.done, 1, "told the end of the run it admitted")
	assert.Equal(t, transcript.StopReasonStop, lim.done[0].StopReason)
	until := start.Add(2 * time.Second)
	lines := snk.all()
	assert.Contains(t, lines, `{"type":"shared_limit_wait","key":"scripted/","until":"`+until.Format("2006-01-02T15:04:05.000Z07:00")+`","untilMs":`+strconv.FormatInt(until.UnixMilli(), 10)+`,"reason":"rate_limited"}`)
	assert.Contains(t, lines, `{"type":"state_change","from":"idle","to":"backoff","event":"wait_shared"}`)
}
