package temporal_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
)

// batches is a sink that records the size of each delivery.
type batches struct {
	sink
	mu    sync.Mutex
	sizes []int
}

func (b *batches) Deliver(ctx context.Context, id string, first int64, lines []json.RawMessage) error {
	d, _ := json.Marshal(temporal.Delivery{SessionID: id, First: first, Lines: lines})
	b.mu.Lock()
	b.sizes = append(b.sizes, len(d))
	b.mu.Unlock()
	return b.sink.Deliver(ctx, id, first, lines)
}

// settled returns the turn_settled lines delivered.
func settled(t *testing.T, s *sink) []string {
	var out []string
	for _, l := range s.recovery(t) {
		if strings.HasPrefix(l, `{"type":"turn_settled"`) {
			out = append(out, l)
		}
	}
	return out
}

// Issue 27 item 2: a prompt whose run's input would be over
// Workflow.MaxPayload (the server would refuse the workflow task that
// schedules it, again and again) is refused with payload_too_large before
// the engine takes it: the conversation is left as it was, and the
// session takes the next prompt.
func TestPromptTooLarge(t *testing.T) {
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: "ok"}}})
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: 10_000}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: snk}).Register(e)
	var big, small outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "big", &big, strings.Repeat("huge ", 4000)) }, 0)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "small", &small, "hi") }, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.True(t, big.done)
	assert.Equal(t, "payload_too_large", code(t, big.err))
	assert.Contains(t, big.err.Error(), "the prompt's run input is 20")
	assert.Contains(t, big.err.Error(), "over the limit of 10000")
	require.True(t, small.done)
	assert.NoError(t, small.err, "the big prompt left nothing behind")
	assert.Equal(t, 0, agent.Remaining(), "the small prompt made the one call; the big one none")
	assert.Equal(t, []string{`{"type":"turn_settled","success":true}`}, settled(t, snk))
}

// A conversation that grew over Workflow.MaxPayload by its answers
// refuses the next prompt, and a compaction of it, whose summary's
// request is as large, fails with payload_too_large rather than a
// workflow task the server refuses.
func TestContextGrownTooLarge(t *testing.T) {
	answer := scripted.Call{StopReason: "stop", Text: strings.Repeat("answer ", 900)}
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{answer, answer}})
	snk := &sink{}
	e := newEnv()
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 10
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: 10_000}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: snk, MaxPayload: -1}).Register(e)
	var p1, p2, p3, c outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "one") }, 0)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p2", &p2, "two") }, time.Second)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p3", &p3, "three") }, 2*time.Second)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdateCompact, "c", &c, "") }, 3*time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(cfg))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p1.err)
	require.NoError(t, p2.err)
	assert.Equal(t, "payload_too_large", code(t, p3.err))
	require.True(t, c.done)
	require.Error(t, c.err)
	assert.Contains(t, c.err.Error(), "payload_too_large: the summary's request is")
}

// A run whose result is over Activities.MaxPayload returns without its
// events, and the turn fails with payload_too_large.
func TestRunResultTooLarge(t *testing.T) {
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: strings.Repeat("long answer ", 2000)}}})
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: snk, MaxPayload: 10_000}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "write a lot") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	assert.Equal(t, "payload_too_large", code(t, p.err))
	assert.Contains(t, p.err.Error(), "the run's result is")
	got := settled(t, snk)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"code":"payload_too_large"`)
}

// Events whose lines together are over Workflow.MaxPayload reach the sink
// in several deliveries, each within it, all of them in order.
func TestDeliveriesSplitAtTheLimit(t *testing.T) {
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: strings.Repeat("answer ", 1200)}}})
	snk := &batches{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: 10_000}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: snk}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, strings.Repeat("prompt ", 1200)) }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p.err)
	total := 0
	for _, l := range snk.all() {
		total += len(l)
	}
	require.Greater(t, total, 15_000, "the turn's events are more than one delivery may carry")
	require.Greater(t, len(snk.sizes), 1)
	for _, n := range snk.sizes {
		assert.LessOrEqual(t, n, 10_000)
	}
	assert.Equal(t, `{"type":"turn_settled","success":true}`, settled(t, &snk.sink)[0])
}

// recorder is an agent that records the requests it is given, and
// answers.
type recorder struct {
	mu   sync.Mutex
	reqs []session.RunRequest
}

func (r *recorder) Run(_ context.Context, req session.RunRequest, emit func(events.Event)) error {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: "ok"}}}).Run(context.Background(), req, emit)
}

// The run's input carries the prompt once (not in the context too); the
// agent gets the context with the prompt last, as in process. An input
// of the earlier form (the prompt in the context, PromptOmitted unset)
// reaches the agent as it is.
func TestRunInputCarriesThePromptOnce(t *testing.T) {
	agent := &recorder{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	acts := &temporal.Activities{Agent: agent}
	acts.Register(e)
	var inputs []temporal.RunInput
	e.OnActivity(temporal.ActivityRun, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in temporal.RunInput) (temporal.RunResult, error) {
			inputs = append(inputs, in)
			return acts.Run(ctx, in)
		})
	var p1, p2 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "first") }, 0)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p2", &p2, "second") }, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p1.err)
	require.NoError(t, p2.err)
	require.Len(t, inputs, 2)
	for i, in := range inputs {
		assert.True(t, in.PromptOmitted)
		require.NotNil(t, in.Prompt)
		for _, m := range in.Context {
			assert.NotEqual(t, in.Prompt.ID, m.ID, "input %d: the prompt is in the context too", i)
		}
	}
	assert.Len(t, inputs[1].Context, 2, "the first prompt and its answer")
	require.Len(t, agent.reqs, 2)
	second := agent.reqs[1]
	require.Len(t, second.Context, 3)
	assert.Equal(t, "second", second.Context[2].Text())
	assert.Same(t, &second.Context[2], second.Prompt, "the prompt is the context's last message")

	// The earlier form, from a history scheduled before the change.
	var ae testsuite.WorkflowTestSuite
	aenv := ae.NewTestActivityEnvironment()
	acts.Register(aenv)
	old := temporal.RunInput{SessionID: "s", Model: scenarios.Model, Prompt: &second.Context[2], Context: second.Context}
	_, err := aenv.ExecuteActivity(acts.Run, old)
	require.NoError(t, err)
	require.Len(t, agent.reqs, 3)
	assert.Equal(t, second.Context, agent.reqs[2].Context)
}

// A session whose next run's input (its history) is over
// Workflow.MaxPayload does not continue as new (the server would refuse
// it, and the workflow task with it, again and again): it goes on in the
// same run, and closes as usual.
func TestContinueAsNewTooLarge(t *testing.T) {
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: strings.Repeat("answer ", 2000)}}})
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: 10_000, MaxInputs: 1}).Register(e)
	(&temporal.Activities{Agent: agent, MaxPayload: -1}).Register(e)
	var p outcome
	var st rpc.State
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "write a lot") }, 0)
	e.RegisterDelayedCallback(func() {
		v, err := e.QueryWorkflow(temporal.QueryState)
		require.NoError(t, err)
		require.NoError(t, v.Get(&st))
		e.SignalWorkflow(temporal.SignalClose, nil)
	}, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError(), "the workflow ended at close, not by a continue-as-new")
	require.NoError(t, p.err)
	assert.Equal(t, "idle", st.State)
}

// A session due to continue as new whose input would be over
// Workflow.MaxPayload only by the events its slow sink has not taken
// (Start.Pending) waits for the sink, then continues as new within the
// limit: neither a continue-as-new the server refuses nor a run that
// stays for good.
func TestContinueAsNewWaitsOutPendingTooLarge(t *testing.T) {
	const limit = 20_000
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: strings.Repeat("answer ", 1200)}}})
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: limit, MaxInputs: 1}).Register(e)
	acts := &temporal.Activities{Agent: agent, Sink: &sink{}, MaxPayload: -1}
	acts.Register(e)
	e.OnActivity(temporal.ActivityDeliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, d temporal.Delivery) error { return acts.Deliver(ctx, d) }).After(time.Minute)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "write a lot") }, 0)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, p.err)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, e.GetWorkflowError(), &can)
	var next temporal.Start
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	b, err := json.Marshal(next)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), limit, "the continue-as-new's input is within the limit")
	assert.Zero(t, len(next.Pending), "the events were delivered first")
	assert.Positive(t, next.Events)
}

// A summary over Activities.MaxPayload (the server would refuse the
// activity's result, and Temporal would ask the summarizer again, up to
// SummaryAttempts) is asked for once: the compaction fails with
// payload_too_large, and the session goes on.
func TestSummaryTooLarge(t *testing.T) {
	answer := scripted.Call{StopReason: "stop", Text: strings.Repeat("answer ", 100)}
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{answer, answer}})
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 10
	calls := 0
	sum := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) {
		calls++
		return policy.Summary{Text: strings.Repeat("summary ", 3000)}, nil
	})
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: agent, Sink: &sink{}, Summarizer: sum, MaxPayload: 10_000}).Register(e)
	var p1, p2, c outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "one") }, 0)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p2", &p2, "two") }, time.Second)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdateCompact, "c", &c, "") }, 2*time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Hour)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(cfg))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p1.err)
	require.NoError(t, p2.err)
	require.True(t, c.done)
	require.Error(t, c.err)
	assert.Equal(t, "payload_too_large", code(t, c.err))
	assert.Contains(t, c.err.Error(), "payload_too_large: the summary is")
	assert.Equal(t, 1, calls, "the summarizer was asked once")
}

type summarizerFunc func(context.Context, policy.SummaryRequest) (policy.Summary, error)

func (f summarizerFunc) Summarize(ctx context.Context, req policy.SummaryRequest) (policy.Summary, error) {
	return f(ctx, req)
}

// A close that comes while a session due to continue as new waits for
// its sink (its input too large with the events it would carry) closes
// it: no continue-as-new, and every event delivered.
func TestCloseWhileContinueAsNewWaitsForTheSink(t *testing.T) {
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: strings.Repeat("answer ", 1200)}}})
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: 20_000, MaxInputs: 1}).Register(e)
	snk := &sink{}
	acts := &temporal.Activities{Agent: agent, Sink: snk, MaxPayload: -1}
	acts.Register(e)
	e.OnActivity(temporal.ActivityDeliver, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, d temporal.Delivery) error { return acts.Deliver(ctx, d) }).After(time.Minute)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "write a lot") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, 30*time.Second)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, p.err)
	require.NoError(t, e.GetWorkflowError(), "closed, not continued as new")
	assert.Equal(t, []string{`{"type":"turn_settled","success":true}`}, settled(t, snk))
}
