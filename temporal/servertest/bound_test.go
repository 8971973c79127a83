package servertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/proto"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
)

// slowSink is a sink that takes its time over each delivery.
type slowSink struct {
	sink
	delay time.Duration
}

func (s *slowSink) Deliver(ctx context.Context, id string, first int64, lines []json.RawMessage) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.sink.Deliver(ctx, id, first, lines)
}

// Issue 27 items 1 and 5, on a real server: prompts back to back to a
// session whose sink takes 300 ms a delivery; the session continues as new
// every few turns (MaxInputs 20), each run's history stays under a bound,
// and every event reaches the sink once. Then, with the worker stopped,
// DescribeState still reads the session's state from the memo.
func TestContinueAsNewBoundedOnServer(t *testing.T) {
	srv, err := live.Start(t.Context(), "../devserver")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c, err := srv.Dial()
	require.NoError(t, err)
	defer c.Close()

	const prompts = 30
	calls := make([]scripted.Call, prompts)
	for i := range calls {
		calls[i] = scripted.Call{StopReason: "stop", Text: fmt.Sprint("answer ", i)}
	}
	snk := &slowSink{delay: 300 * time.Millisecond}
	const queue, id = "bound", "bound-session"
	w := worker.New(c, queue, worker.Options{DeadlockDetectionTimeout: time.Minute})
	(&temporal.Workflow{Random: scenarios.Draw, MaxInputs: 20}).Register(w)
	(&temporal.Activities{Agent: scripted.New(scripted.Script{Model: scenarios.Model, Calls: calls}), Sink: snk}).Register(w)
	require.NoError(t, w.Start())
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()

	cfg := policy.DefaultConfig()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName,
		temporal.Start{SessionID: "bound", Model: scenarios.Model, Config: &cfg})
	require.NoError(t, err)
	for i := range prompts {
		require.NoError(t, temporal.Prompt(ctx, c, id, fmt.Sprint("question ", i)), "prompt %d", i+1)
	}

	// Each run of the chain: its history's length and size, from the
	// server; the next run is the one its last event names. With
	// MaxInputs 20 a run takes three turns of 15 events each. Its size is
	// its input's (the first event: the conversation it carries) and its
	// own events', each run activity carrying the context once more: both
	// grow with the conversation (issue 27 item 2), so the bound is on a
	// run's bytes for its input's, and on the whole story's: one run that
	// took the 30 turns, as before, passes both.
	const maxEvents, maxBytes = 60, 256 << 10
	runs := 0
	for runID := run.GetRunID(); runID != ""; runs++ {
		d, err := c.DescribeWorkflow(ctx, id, runID)
		require.NoError(t, err)
		info := d.RawResponse.GetWorkflowExecutionInfo()
		first := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		require.True(t, first.HasNext())
		started, err := first.Next()
		require.NoError(t, err)
		input := int64(proto.Size(started))
		t.Logf("run %d: %d events, %d bytes (input %d), %v", runs+1, info.GetHistoryLength(), info.GetHistorySizeBytes(), input, info.GetStatus())
		assert.LessOrEqual(t, info.GetHistoryLength(), int64(maxEvents), "run %d: events", runs+1)
		assert.LessOrEqual(t, info.GetHistorySizeBytes(), 5*input+32<<10, "run %d: bytes for an input of %d", runs+1, input)
		assert.LessOrEqual(t, info.GetHistorySizeBytes(), int64(maxBytes), "run %d: bytes", runs+1)
		next := ""
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
			it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				require.NoError(t, err)
				next = ev.GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
			}
			require.NotEmpty(t, next)
		}
		runID = next
	}
	assert.GreaterOrEqual(t, runs, 5, "the session continued as new every few turns")

	// Every event of the 30 turns reaches the sink once, numbered on
	// across the runs (the sink keeps each number once, in order).
	settled := func() int {
		snk.mu.Lock()
		defer snk.mu.Unlock()
		n := 0
		for _, l := range snk.lines {
			var w struct {
				Type string `json:"type"`
			}
			require.NoError(t, json.Unmarshal([]byte(l), &w))
			if w.Type == "turn_settled" {
				n++
			}
		}
		return n
	}
	for settled() < prompts && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond) // a real server, a real sink
	}
	assert.Equal(t, prompts, settled())

	// The worker stops; the memo still answers.
	w.Stop()
	stopped = true
	st, err := temporal.DescribeState(ctx, c, id)
	require.NoError(t, err)
	assert.Equal(t, temporal.MemoState{State: "idle"}, st)
	require.NoError(t, c.TerminateWorkflow(ctx, id, "", "the test is over"))
}
