package servertest_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
)

// hung is a summarizer whose worker died under it: it says it started,
// then never answers, whatever its context says, until released.
type hung struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *hung) Summarize(context.Context, policy.SummaryRequest) (policy.Summary, error) {
	h.once.Do(func() { close(h.started) })
	<-h.release
	return policy.Summary{}, context.Canceled
}

// Issue 27 item 3: worker A is lost in the middle of a compaction's
// summary, as a kill -9 leaves it (its summary never answers, and it
// heartbeats no more); worker B starts, the summary is made again there
// (attempt 2 of the same activity), the compaction completes and the turn
// settles as in process.
func TestWorkerLostMidSummary(t *testing.T) {
	srv, err := live.Start(t.Context(), "../devserver")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c, err := srv.Dial()
	require.NoError(t, err)
	defer c.Close()
	ca, err := srv.Dial() // worker A's own connection, cut when A is lost
	require.NoError(t, err)

	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "overflow" {
			sc = s
		}
	}
	synctest.Test(t, func(t *testing.T) {
		want, err := sc.Play(context.Background())
		require.NoError(t, err)
		sc.Want = want
	})
	require.Contains(t, sc.Want, `{"type":"auto_compaction_start","reason":"overflow"}`)
	agent := scripted.New(sc.Script())
	snk := &sink{}
	h := &hung{started: make(chan struct{}), release: make(chan struct{})}
	defer close(h.release)
	const queue, id = "lost-summary", "lost-summary-session"
	// A heartbeat timeout of 3 s: worker A's loss is noticed in 3 s.
	wf := &temporal.Workflow{Random: scenarios.Draw, HeartbeatTimeout: 3 * time.Second}
	start := func(c client.Client, acts *temporal.Activities) worker.Worker {
		w := worker.New(c, queue, worker.Options{DeadlockDetectionTimeout: time.Minute})
		wf.Register(w)
		acts.Register(w)
		require.NoError(t, w.Start())
		return w
	}

	a := start(ca, &temporal.Activities{Agent: agent, Sink: snk, Summarizer: h})
	first, err := live.Begin(ctx, c, queue, id, sc)
	require.NoError(t, err)
	require.NoError(t, first.Get(ctx, nil))
	second, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateID: "prompt-1", UpdateName: temporal.UpdatePrompt,
		Args: []any{sc.Prompts[1]}, WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	require.NoError(t, err)
	select {
	case <-h.started:
	case <-ctx.Done():
		t.Fatal("the summary never started on worker A")
	}
	a.Stop()
	ca.Close()
	assert.Equal(t, 1, agent.Remaining(), "worker A made the two runs before the compaction")

	b := start(c, &temporal.Activities{Agent: agent, Sink: snk})
	defer b.Stop()
	require.NoError(t, second.Get(ctx, nil), "the turn goes on after the compaction")
	require.NoError(t, c.SignalWorkflow(ctx, id, "", temporal.SignalClose, nil))
	require.NoError(t, c.GetWorkflow(ctx, id, "").Get(ctx, nil))
	assert.Equal(t, sc.Want, snk.recovery(t), "the same events as in process")
	assert.Equal(t, 0, agent.Remaining())

	// The history: one summary activity, completed at its second attempt.
	var scheduled, attempt int32
	completed := false
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var summaryID int64
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == temporal.ActivitySummarize {
			scheduled++
			summaryID = ev.GetEventId()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetScheduledEventId() == summaryID {
			attempt = a.GetAttempt()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && a.GetScheduledEventId() == summaryID {
			completed = true
		}
	}
	assert.Equal(t, int32(1), scheduled)
	assert.Equal(t, int32(2), attempt)
	assert.True(t, completed)
}
