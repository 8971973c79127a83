package temporal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/transcript"
)

// env is a test environment with the workflow and activities on agent.
func env(t *testing.T, agent session.Agent, snk temporal.Sink) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: snk}).Register(e)
	return e
}

// code returns the application error type of an update's error.
func code(t *testing.T, err error) string {
	t.Helper()
	var app *sdktemporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v is not an application error", err)
	return app.Type()
}

// update sends an update and records how it completed.
type outcome struct {
	done bool
	err  error
	val  any
}

func update(e *testsuite.TestWorkflowEnvironment, name, id string, o *outcome, args ...any) {
	e.UpdateWorkflow(name, id, &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { o.done, o.err = true, err },
		OnAccept:   func() {},
		OnComplete: func(v any, err error) { o.done, o.val, o.err = true, v, err },
	}, args...)
}

func startOf(cfg policy.Config) temporal.Start {
	return temporal.Start{SessionID: "s", Model: scenarios.Model, Config: &cfg}
}

// A prompt while a turn is in flight fails at once with "busy"; the turn
// in flight goes on. get_state reads the backoff while it waits.
func TestPromptWhileBusy(t *testing.T) {
	e := env(t, scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable"}, {StopReason: "stop", Text: "ok"},
	}}), &sink{})
	var first, second outcome
	var st rpc.State
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "1", &first, "hi") }, 0)
	e.RegisterDelayedCallback(func() {
		update(e, temporal.UpdatePrompt, "2", &second, "again")
		v, err := e.QueryWorkflow(temporal.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
	}, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.True(t, second.done)
	assert.Equal(t, "busy", code(t, second.err))
	assert.True(t, first.done)
	assert.NoError(t, first.err, "the turn in flight succeeded after its retry")
	assert.Equal(t, "backoff", st.State)
	assert.Equal(t, 1, st.RetryAttempt)
	assert.True(t, st.IsRetrying)
	assert.Equal(t, "s", st.SessionID)
}

// compact compacts on demand and says why it cannot: nothing to compact,
// already compacted.
func TestCompactUpdate(t *testing.T) {
	e := env(t, scripted.New(scripted.Script{Model: scenarios.Model}), &sink{})
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 10
	var early, p1, p2, c1, c2 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdateCompact, "c0", &early, "") }, 0)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, strings.Repeat("one ", 100)) }, time.Second)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p2", &p2, strings.Repeat("two ", 100)) }, 2*time.Second)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdateCompact, "c1", &c1, "keep the names") }, 3*time.Second)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdateCompact, "c2", &c2, "") }, 4*time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(cfg))
	require.NoError(t, e.GetWorkflowError())
	assert.Equal(t, "nothing_to_compact", code(t, early.err))
	require.NoError(t, p1.err)
	require.NoError(t, p2.err)
	require.NoError(t, c1.err)
	res, ok := c1.val.(transcript.Compaction)
	require.True(t, ok, "compact answers a transcript.Compaction, not %T", c1.val)
	assert.Equal(t, transcript.ReasonManual, res.Reason)
	assert.NotEmpty(t, res.Summary)
	assert.Equal(t, "already_compacted", code(t, c2.err))
}

// A Start the engine cannot be made from fails the workflow with an error
// that names the setting; it is not retried.
func TestInvalidStart(t *testing.T) {
	e := env(t, scripted.New(scripted.Script{}), nil)
	cfg := policy.DefaultConfig()
	cfg.Retry.MaxRetries = -1
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(cfg))
	err := e.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "retry.maxRetries")
	assert.Equal(t, "invalid_start", code(t, err))
}

// panicky panics in the middle of its run.
type panicky struct{}

func (panicky) Run(_ context.Context, _ session.RunRequest, emit func(events.Event)) error {
	emit(events.AgentStart{})
	panic("the model client broke")
}

// An agent that panics fails its turn, not the worker: the panic is a
// fatal error of the run, never retried, and the session takes the next
// prompt.
func TestAgentPanics(t *testing.T) {
	snk := &sink{}
	e := env(t, panicky{}, snk)
	var p1 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.Error(t, p1.err)
	assert.Contains(t, p1.err.Error(), "the agent panicked: the model client broke")
	for _, l := range snk.recovery(t) {
		assert.NotContains(t, l, "auto_retry_start")
	}
}

// set_auto_retry off during a backoff: the chain ends at the next
// decision, and abort_retry with nothing pending does nothing.
func TestSignalsDuringBackoff(t *testing.T) {
	snk := &sink{}
	e := env(t, scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
		{StopReason: "error", ErrorMessage: "overloaded_error: Overloaded"},
	}}), snk)
	var p1 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalSetAutoRetry, false) }, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalAbortRetry, nil) }, time.Minute)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, 2*time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	assert.Equal(t, "provider", code(t, p1.err))
	assert.Contains(t, snk.recovery(t), `{"type":"auto_retry_end","success":false,"attempt":1,"finalError":"overloaded_error: Overloaded","outcome":"failed","errorClass":"retryable"}`)
}

// A settings signal without its bool, or with something else, changes
// nothing; one with a bool writes the setting.
func TestSettingSignals(t *testing.T) {
	e := env(t, scripted.New(scripted.Script{Model: scenarios.Model}), nil)
	states := map[string]rpc.State{}
	read := func(name string) func() {
		return func() {
			v, err := e.QueryWorkflow(temporal.QueryState)
			require.NoError(t, err)
			var st rpc.State
			require.NoError(t, v.Get(&st))
			states[name] = st
		}
	}
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalSetAutoRetry, nil) }, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalSetAutoCompaction, "yes") }, 2*time.Second)
	e.RegisterDelayedCallback(read("garbage"), 3*time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalSetAutoRetry, false) }, 4*time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalSetAutoCompaction, false) }, 5*time.Second)
	e.RegisterDelayedCallback(read("off"), 6*time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	assert.True(t, states["garbage"].AutoRetryEnabled)
	assert.True(t, states["garbage"].AutoCompactionEnabled)
	assert.False(t, states["off"].AutoRetryEnabled)
	assert.False(t, states["off"].AutoCompactionEnabled)
}

// close during a backoff aborts the turn, delivers every event and ends
// the workflow; a prompt after it is refused as closed.
func TestCloseDuringBackoff(t *testing.T) {
	snk := &sink{}
	e := env(t, scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{
		{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
	}}), snk)
	var p1, p2 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "hi") }, 0)
	e.RegisterDelayedCallback(func() {
		e.SignalWorkflow(temporal.SignalClose, nil)
		update(e, temporal.UpdatePrompt, "p2", &p2, "again")
	}, time.Second)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	assert.Equal(t, "aborted", code(t, p1.err))
	assert.Equal(t, "closed", code(t, p2.err))
	lines := snk.recovery(t)
	require.NotEmpty(t, lines)
	assert.Equal(t, `{"type":"turn_settled","success":false,"error":"session: aborted","code":"aborted"}`, lines[len(lines)-1])
}

// Issue: a stopped worker loses nothing. A run whose worker is lost
// mid-run (its activity times out) goes through the decision as a
// transient failure of its attempt, as a session resumed in another
// process does: the chain retries it, and the turn succeeds.
func TestRunLostWithItsWorker(t *testing.T) {
	snk := &sink{}
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: "done"}}})
	e := env(t, agent, snk)
	acts := &temporal.Activities{Agent: agent, Sink: snk}
	calls := 0
	e.OnActivity(temporal.ActivityRun, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in temporal.RunInput) (temporal.RunResult, error) {
			calls++
			if calls == 1 {
				return temporal.RunResult{}, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
			return acts.Run(ctx, in)
		})
	var p1 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p1.done)
	require.NoError(t, p1.err)
	assert.Equal(t, 2, calls)
	assert.Equal(t, []string{
		`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
		`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"interrupted: the session was resumed from a snapshot","errorClass":"retryable","provider":"scripted","model":"scripted-1"}`,
		`{"type":"state_change","from":"classifying","to":"backoff","event":"retry"}`,
		`{"type":"state_change","from":"backoff","to":"continuing","event":"elapsed"}`,
		`{"type":"auto_retry_end","success":true,"attempt":1,"outcome":"recovered"}`,
		`{"type":"state_change","from":"continuing","to":"classifying","event":"agent_end"}`,
		`{"type":"state_change","from":"classifying","to":"idle","event":"accept"}`,
		`{"type":"turn_settled","success":true}`,
	}, snk.recovery(t))
}
