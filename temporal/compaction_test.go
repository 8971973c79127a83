package temporal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
)

// overflowStory plays the overflow scenario (overflow → compaction →
// continuation) with summarize as the summary activity, and returns what
// the sink received and how each prompt settled.
func overflowStory(t *testing.T, summarize func(context.Context, policy.SummaryRequest) (temporal.SummaryResult, error)) (*sink, []error) {
	t.Helper()
	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "overflow" {
			sc = s
		}
	}
	require.Equal(t, "overflow", sc.Name)
	e := newEnv()
	snk := &sink{}
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	activities(t, sc, scripted.New(sc.Script()), snk).Register(e)
	e.OnActivity(temporal.ActivitySummarize, mock.Anything, mock.Anything).Return(summarize)
	errs := make([]error, len(sc.Prompts))
	var send func(i int)
	send = func(i int) {
		if i == len(sc.Prompts) {
			e.SignalWorkflow(temporal.SignalClose, nil)
			return
		}
		e.UpdateWorkflow(temporal.UpdatePrompt, fmt.Sprint("prompt-", i), &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("prompt %d rejected: %v", i+1, err) },
			OnAccept:   func() {},
			OnComplete: func(_ any, err error) { errs[i] = err; send(i + 1) },
		}, sc.Prompts[i])
	}
	e.RegisterDelayedCallback(func() { send(0) }, 0)
	e.ExecuteWorkflow(temporal.WorkflowName, start(sc))
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	return snk, errs
}

// Issue 27 item 3: a summary lost with its worker (its activity's
// heartbeat timed out) is made again, on another worker: the compaction
// completes and the turn goes on as if nothing had happened.
func TestSummaryLostWithItsWorker(t *testing.T) {
	acts := &temporal.Activities{}
	calls := 0
	snk, errs := overflowStory(t, func(ctx context.Context, req policy.SummaryRequest) (temporal.SummaryResult, error) {
		calls++
		if calls == 1 {
			return temporal.SummaryResult{}, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
		}
		return acts.Summarize(ctx, req)
	})
	assert.Equal(t, 2, calls, "the lost summary was made again, once")
	assert.Equal(t, []error{nil, nil}, errs, "both turns succeeded")
	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "overflow" {
			sc = s
		}
	}
	assert.Equal(t, sc.Want, snk.recovery(t), "the same events as a compaction that went through at once")
}

// A summary whose worker is lost at every attempt is tried
// Workflow.SummaryAttempts times (3), then fails the compaction: the turn
// fails with overflow, and does not hang.
func TestSummaryLostAtEveryAttempt(t *testing.T) {
	calls := 0
	_, errs := overflowStory(t, func(context.Context, policy.SummaryRequest) (temporal.SummaryResult, error) {
		calls++
		return temporal.SummaryResult{}, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
	})
	assert.Equal(t, 3, calls)
	require.NoError(t, errs[0])
	require.Error(t, errs[1])
	assert.Equal(t, "overflow", code(t, errs[1]))
}

// A summarizer's own error is the compaction's failure: it is not tried
// again.
func TestSummarizerErrorIsNotRetried(t *testing.T) {
	calls := 0
	_, errs := overflowStory(t, func(context.Context, policy.SummaryRequest) (temporal.SummaryResult, error) {
		calls++
		return temporal.SummaryResult{Err: errors.New("the summary model refused").Error()}, nil
	})
	assert.Equal(t, 1, calls)
	require.Error(t, errs[1])
	assert.Equal(t, "overflow", code(t, errs[1]))
}

// abort_compaction during the second attempt of a summary whose first
// was lost with its worker cancels that attempt and makes no third: the
// compaction ends cancelled, the turn fails with overflow, and the
// session goes on.
func TestAbortCompactionDuringTheSummarysRetry(t *testing.T) {
	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "overflow" {
			sc = s
		}
	}
	e := newEnv()
	snk := &sink{}
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	activities(t, sc, scripted.New(sc.Script()), snk).Register(e)
	calls := 0
	// The attempt the abort cancels ends when the test does: the test
	// environment does not cancel an activity that does not heartbeat.
	release := make(chan struct{})
	done := make(chan struct{})
	e.OnActivity(temporal.ActivitySummarize, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, req policy.SummaryRequest) (temporal.SummaryResult, error) {
			calls++
			if calls == 1 {
				return temporal.SummaryResult{}, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
			defer close(done)
			e.SignalWorkflow(temporal.SignalAbortCompaction, nil)
			select {
			case <-ctx.Done():
			case <-release:
			}
			return temporal.SummaryResult{}, sdktemporal.NewNonRetryableApplicationError("cancelled", "cancelled", nil)
		})
	errs := make([]error, len(sc.Prompts))
	var send func(i int)
	send = func(i int) {
		if i == len(sc.Prompts) {
			e.SignalWorkflow(temporal.SignalClose, nil)
			return
		}
		e.UpdateWorkflow(temporal.UpdatePrompt, fmt.Sprint("prompt-", i), &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("prompt %d rejected: %v", i+1, err) },
			OnAccept:   func() {},
			OnComplete: func(_ any, err error) { errs[i] = err; send(i + 1) },
		}, sc.Prompts[i])
	}
	e.RegisterDelayedCallback(func() { send(0) }, 0)
	e.ExecuteWorkflow(temporal.WorkflowName, start(sc))
	close(release)
	<-done
	require.True(t, e.IsWorkflowCompleted())
	require.NoError(t, e.GetWorkflowError())
	assert.Equal(t, 2, calls, "no attempt after the abort")
	require.NoError(t, errs[0])
	require.Error(t, errs[1])
	assert.Equal(t, "overflow", code(t, errs[1]))
	assert.Contains(t, errs[1].Error(), "compaction cancelled")
	got := snk.recovery(t)
	assert.Contains(t, got, `{"type":"auto_compaction_end","aborted":true,"willRetry":false}`)
	assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: context overflow not recovered: session: compaction cancelled","code":"overflow"}`, got[len(got)-1])
}
