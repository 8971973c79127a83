package temporal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/claimcheck"
)

// describer answers DescribeWorkflowExecution with a memo.
type describer struct {
	memo   map[string]*commonpb.Payload
	status enumspb.WorkflowExecutionStatus
	err    error
}

func (d describer) DescribeWorkflow(context.Context, string, string) (*client.WorkflowExecutionDescription, error) {
	if d.err != nil {
		return nil, d.err
	}
	return &client.WorkflowExecutionDescription{WorkflowExecutionMetadata: client.WorkflowExecutionMetadata{
		Memo: &commonpb.Memo{Fields: d.memo}, Status: d.status}}, nil
}

// Issue 27 item 5: the workflow keeps its state, attempt, next retry time
// and last error class in its memo, written each time one of them
// changes, so that DescribeState reads them with no worker up.
func TestMemoKeepsTheState(t *testing.T) {
	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "transient" {
			sc = s
		}
	}
	e := newEnv()
	snk := &sink{}
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	activities(t, sc, scripted.New(sc.Script()), snk).Register(e)
	var memos []temporal.MemoState
	var last map[string]any
	e.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		last = args.Get(0).(map[string]any)
		memos = append(memos, last[temporal.MemoKey].(temporal.MemoState))
	}).Return(nil)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, "prompt", "p", &p, sc.Prompts[0]) }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Hour)
	begin := e.Now()
	e.ExecuteWorkflow(temporal.WorkflowName, start(sc))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p.err)
	retryable := "retryable"
	at := func(d time.Duration) time.Time { return begin.Add(d).UTC() }
	assert.Equal(t, []temporal.MemoState{
		{State: "idle"},
		{State: "backoff", RetryAttempt: 1, NextRetryAt: at(1800 * time.Millisecond), LastErrorClass: retryable},
		{State: "continuing", RetryAttempt: 1, LastErrorClass: retryable},
		{State: "backoff", RetryAttempt: 2, NextRetryAt: at(5400 * time.Millisecond), LastErrorClass: retryable},
		{State: "continuing", RetryAttempt: 2, LastErrorClass: retryable},
		{State: "continuing", LastErrorClass: retryable},
		{State: "idle", LastErrorClass: retryable},
	}, memos)

	// The memo as the server keeps it, read with no worker.
	fields := map[string]*commonpb.Payload{}
	for k, v := range last {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		fields[k] = p
	}
	got, err := temporal.DescribeState(t.Context(), describer{memo: fields}, "w")
	require.NoError(t, err)
	assert.Equal(t, memos[len(memos)-1], got)

	_, err = temporal.DescribeState(t.Context(), describer{}, "w")
	assert.ErrorIs(t, err, temporal.ErrNoMemoState)
	down := errors.New("unavailable")
	_, err = temporal.DescribeState(t.Context(), describer{err: down}, "w")
	assert.ErrorIs(t, err, down)
	bad, err := converter.GetDefaultDataConverter().ToPayload("not a state")
	require.NoError(t, err)
	_, err = temporal.DescribeState(t.Context(), describer{memo: map[string]*commonpb.Payload{temporal.MemoKey: bad}}, "w")
	assert.ErrorContains(t, err, temporal.MemoKey)
}

// Issue 27 item 5: a memo carried over by continue-as-new goes on: the
// next run writes it only when it changes, and keeps the last error's
// class.
func TestMemoGoesOnAcrossContinueAsNew(t *testing.T) {
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: scripted.New(scripted.Script{Model: scenarios.Model})}).Register(e)
	carried := temporal.MemoState{State: "idle", LastErrorClass: "usage_limit"}
	require.NoError(t, e.SetMemoOnStart(map[string]any{temporal.MemoKey: carried}))
	upserts := 0
	e.OnUpsertMemo(mock.Anything).Run(func(mock.Arguments) { upserts++ }).Return(nil)
	var p outcome
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalAbortRetry, nil) }, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	assert.False(t, p.done)
	assert.Zero(t, upserts, "the carried memo says it all")
}

// codecConverter is a data converter with a claim-check codec that moves
// every payload into a store, as one with an encryption codec encodes
// every payload: the SDK writes the memo with it.
func codecConverter(t *testing.T) converter.DataConverter {
	t.Helper()
	store, err := claimcheck.NewDir(t.TempDir())
	require.NoError(t, err)
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), &claimcheck.Codec{Store: store, Threshold: 1})
}

// A memo the workers' payload codec encoded is read by DescribeStateWith
// with their data converter; DescribeState, without it, says what to use
// rather than failing in the converter's words.
func TestDescribeStateThroughACodec(t *testing.T) {
	dc := codecConverter(t)
	want := temporal.MemoState{State: "backoff", RetryAttempt: 2, LastErrorClass: "retryable"}
	p, err := dc.ToPayload(want)
	require.NoError(t, err)
	require.Equal(t, claimcheck.Encoding, string(p.Metadata["encoding"]), "the memo went through the codec")
	c := describer{memo: map[string]*commonpb.Payload{temporal.MemoKey: p}}

	got, err := temporal.DescribeStateWith(t.Context(), c, dc, "w")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = temporal.DescribeState(t.Context(), c, "w")
	require.Error(t, err)
	assert.ErrorContains(t, err, `encoded as "agentfsm/claim-check-sha256", not JSON`)
	assert.ErrorContains(t, err, "DescribeStateWith")

	plain, err := converter.GetDefaultDataConverter().ToPayload(want)
	require.NoError(t, err)
	got, err = temporal.DescribeStateWith(t.Context(), describer{memo: map[string]*commonpb.Payload{temporal.MemoKey: plain}}, dc, "w")
	require.NoError(t, err, "a memo written without the codec passes through it")
	assert.Equal(t, want, got)
}

// On workers whose data converter has a payload codec, the workflow
// cannot read the memo it carried over by continue-as-new; the last
// error's class goes on all the same, in Start.LastErrorClass.
func TestMemoGoesOnAcrossContinueAsNewThroughACodec(t *testing.T) {
	e := newEnv()
	e.SetDataConverter(codecConverter(t))
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: scripted.New(scripted.Script{Model: scenarios.Model})}).Register(e)
	carried := temporal.MemoState{State: "idle", LastErrorClass: "usage_limit"}
	require.NoError(t, e.SetMemoOnStart(map[string]any{temporal.MemoKey: carried}))
	var memos []temporal.MemoState
	e.OnUpsertMemo(mock.Anything).Run(func(args mock.Arguments) {
		memos = append(memos, args.Get(0).(map[string]any)[temporal.MemoKey].(temporal.MemoState))
	}).Return(nil)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	in := startOf(policy.DefaultConfig())
	in.LastErrorClass = "usage_limit"
	e.ExecuteWorkflow(temporal.WorkflowName, in)
	require.NoError(t, e.GetWorkflowError())
	require.NotEmpty(t, memos, "the memo the run cannot read is written once")
	for _, m := range memos {
		assert.Equal(t, "usage_limit", m.LastErrorClass, "the class carried over is kept")
	}
}

// DescribeState on a session whose workflow ended (closed, or terminated
// by the server) says so: the memo alone still says "idle".
func TestDescribeStateOfAnEndedSession(t *testing.T) {
	last := temporal.MemoState{State: "idle", LastErrorClass: "retryable"}
	p, err := converter.GetDefaultDataConverter().ToPayload(last)
	require.NoError(t, err)
	memo := map[string]*commonpb.Payload{temporal.MemoKey: p}
	got, err := temporal.DescribeState(t.Context(), describer{memo: memo, status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}, "w")
	require.NoError(t, err)
	assert.Equal(t, last, got)
	assert.False(t, got.Ended)
	for _, st := range []enumspb.WorkflowExecutionStatus{enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED} {
		got, err := temporal.DescribeState(t.Context(), describer{memo: memo, status: st}, "w")
		require.NoError(t, err)
		assert.True(t, got.Ended, "%v", st)
		assert.Equal(t, "idle", got.State)
	}
}
