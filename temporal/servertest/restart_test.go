package servertest_test

import (
	"context"
	"encoding/json"
	"strings"
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
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
)

// sink keeps each event once, in the order of its number.
type sink struct {
	mu    sync.Mutex
	lines []string
}

func (s *sink) Deliver(_ context.Context, _ string, first int64, lines []json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range lines {
		if first+int64(i) == int64(len(s.lines)) {
			s.lines = append(s.lines, string(l))
		}
	}
	return nil
}

func (s *sink) recovery(t *testing.T) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		var w struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &w))
		if scenarios.RecoveryType(w.Type) {
			out = append(out, l)
		}
	}
	return out
}

// newWorker starts a worker of the session workflow and its activities.
func newWorker(t *testing.T, c client.Client, queue string, acts *temporal.Activities) worker.Worker {
	w := worker.New(c, queue, worker.Options{DeadlockDetectionTimeout: time.Minute})
	(&temporal.Workflow{Random: scenarios.Draw}).Register(w)
	acts.Register(w)
	require.NoError(t, w.Start())
	return w
}

// Issue item 4: worker A drives a session into its first backoff and is
// stopped; worker B starts and the session goes on from the same timer,
// with the same attempt, and no run is made twice.
func TestWorkerRestartMidBackoff(t *testing.T) {
	// Building the server from a cold cache takes minutes: the test's own
	// deadline (go test -timeout) bounds it, and five minutes the story.
	srv, err := live.Start(t.Context(), "../devserver")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c, err := srv.Dial()
	require.NoError(t, err)
	defer c.Close()

	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "transient" {
			sc = s
		}
	}
	// Backoffs long enough to stop a worker in, on a loaded machine: the
	// first waits 4.5 s, the second 9 s. The in-process session tells
	// the story the workflow must.
	sc.BaseDelayMs = 5000
	synctest.Test(t, func(t *testing.T) {
		want, err := sc.Play(context.Background())
		require.NoError(t, err)
		sc.Want = want
	})
	require.Contains(t, sc.Want, `{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":4500,"errorMessage":"503 Service Unavailable","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`)
	// One agent behind both workers: its script is used up once, so a run
	// made twice would take a call meant for the next.
	agent := scripted.New(sc.Script())
	snk := &sink{}
	acts := &temporal.Activities{Agent: agent, Sink: snk}
	const queue, id = "restart", "restart-session"

	a := newWorker(t, c, queue, acts)
	first, err := live.Begin(ctx, c, queue, id, sc)
	require.NoError(t, err)
	var st rpc.State
	require.NoError(t, live.Await(ctx, c, id, func(s rpc.State) bool { st = s; return s.RetryAttempt > 0 }))
	require.Equal(t, "backoff", st.State)
	a.Stop()
	remaining := agent.Remaining()
	assert.Equal(t, 2, remaining, "worker A made the first run only")

	b := newWorker(t, c, queue, acts)
	defer b.Stop()
	require.NoError(t, live.Finish(ctx, c, id, first, sc))
	assert.Equal(t, sc.Want, snk.recovery(t), "the same events as in process: same attempts, same delays")
	assert.Equal(t, 0, agent.Remaining(), "every scripted call was made")

	// The history: one timer per backoff, each armed once for its delay
	// (B armed none again), and one run activity per model call.
	var timers []time.Duration
	runs := 0
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			timers = append(timers, a.GetStartToFireTimeout().AsDuration())
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == temporal.ActivityRun {
			runs++
		}
	}
	assert.Equal(t, []time.Duration{4500 * time.Millisecond, 9000 * time.Millisecond}, timers)
	assert.Equal(t, 3, runs)
}

// Issue 24: worker A drives a session into a wait for a usage limit's
// reset and is stopped; worker B starts and the session goes on at the
// reset, from the one durable timer A armed for the whole wait. (The
// three-hour wait of the issue runs in the test environment, which skips
// time: TestResetWaitIsADurableTimer; a real server waits for real, so
// here the reset is 8 s away.)
func TestWorkerRestartMidResetWait(t *testing.T) {
	srv, err := live.Start(t.Context(), "../devserver")
	require.NoError(t, err)
	defer func() { assert.NoError(t, srv.Stop()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	c, err := srv.Dial()
	require.NoError(t, err)
	defer c.Close()

	sc := scenarios.Scenario{
		Name: "reset-wait", Prompts: []string{"hi"}, WaitForReset: true,
		Calls: []scripted.Call{
			{StopReason: "error", ErrorMessage: "usage limit reached, retry-after: 8"},
			{StopReason: "stop", Text: "after the reset"},
		},
	}
	synctest.Test(t, func(t *testing.T) {
		want, err := sc.Play(context.Background())
		require.NoError(t, err)
		sc.Want = want
	})
	require.Contains(t, sc.Want, `{"type":"state_change","from":"classifying","to":"backoff","event":"wait_reset"}`)
	agent := scripted.New(sc.Script())
	snk := &sink{}
	acts := &temporal.Activities{Agent: agent, Sink: snk}
	const queue, id = "restart-reset", "restart-reset-session"

	a := newWorker(t, c, queue, acts)
	first, err := live.Begin(ctx, c, queue, id, sc)
	require.NoError(t, err)
	var st rpc.State
	require.NoError(t, live.Await(ctx, c, id, func(s rpc.State) bool { st = s; return s.ResetAtMs > 0 }))
	require.Equal(t, "backoff", st.State)
	a.Stop()
	assert.Equal(t, 1, agent.Remaining(), "worker A made the first run only")

	b := newWorker(t, c, queue, acts)
	defer b.Stop()
	require.NoError(t, live.Finish(ctx, c, id, first, sc))
	got := snk.recovery(t)
	require.Len(t, got, len(sc.Want))
	for i := range got {
		if strings.Contains(sc.Want[i], `"resetAt"`) {
			// The reset is the run's time plus 8 s: the real clock's.
			assert.Contains(t, got[i], `"delayMs":8000`)
			continue
		}
		assert.Equal(t, sc.Want[i], got[i])
	}
	assert.Equal(t, 0, agent.Remaining())

	var timers []time.Duration
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			timers = append(timers, a.GetStartToFireTimeout().AsDuration())
		}
	}
	require.Len(t, timers, 1, "one timer for the whole wait, armed once")
	assert.InDelta(t, 8*time.Second, timers[0], float64(time.Second))
}
