package temporal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/transcript"
)

// A step-wise run whose context grows, within the run, past
// Workflow.MaxPayload (a tool's result the model is to read next) fails
// its turn with payload_too_large before it schedules the model call
// that would carry it (the server would refuse the workflow task, again
// and again): the call is not made, and the session takes the next
// prompt.
func TestStepContextGrownTooLargeInTheRun(t *testing.T) {
	agent := &stepAgent{
		answers: []transcript.Message{toolUse("call-1", "tc-1", "read"), final("call-2", "done")},
		tool: func(context.Context, temporal.ToolCall) (temporal.ToolResult, error) {
			return temporal.ToolResult{Content: transcript.TextContent(strings.Repeat("file ", 3000))}, nil
		},
	}
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxPayload: 10_000}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: snk, MaxPayload: -1}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "read a") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.Error(t, p.err)
	assert.Equal(t, "payload_too_large", code(t, p.err))
	assert.Contains(t, p.err.Error(), "the model call's input is")
	models, tools := agent.counts()
	assert.Equal(t, 1, models, "the model call over the limit was not made")
	assert.Equal(t, 1, tools)
	got := settled(t, snk)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"code":"payload_too_large"`)
}

// A model call whose answer is over Activities.MaxPayload returns without
// it (the server would refuse the activity's result, and Temporal would
// make the call again): the turn fails with payload_too_large.
func TestStepModelResultTooLarge(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{final("call-1", strings.Repeat("long answer ", 2000))}}
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: snk, MaxPayload: 10_000}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "write a lot") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.Error(t, p.err)
	assert.Equal(t, "payload_too_large", code(t, p.err))
	assert.Contains(t, p.err.Error(), "the model call's result is")
	models, _ := agent.counts()
	assert.Equal(t, 1, models, "the call was made once")
	got := settled(t, snk)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"code":"payload_too_large"`)
}

// A tool result over Activities.MaxPayload (the server would refuse the
// activity's result, and Temporal would run the tool again) reaches the
// model as a tool error that says so, and the run goes on.
func TestStepToolResultTooLarge(t *testing.T) {
	var seen []transcript.Message
	agent := &stepAgent{
		answers: []transcript.Message{toolUse("call-1", "tc-1", "read"), final("call-2", "it was too large")},
		tool: func(context.Context, temporal.ToolCall) (temporal.ToolResult, error) {
			return temporal.ToolResult{Content: transcript.TextContent(strings.Repeat("file ", 3000))}, nil
		},
	}
	rec := &recordingSteps{stepAgent: agent, contexts: &seen}
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: rec, Sink: snk, MaxPayload: 10_000}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "read a") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.NoError(t, p.err)
	models, tools := agent.counts()
	assert.Equal(t, 2, models)
	assert.Equal(t, 1, tools, "the tool ran once")
	require.NotEmpty(t, seen)
	last := seen[len(seen)-1]
	assert.Equal(t, transcript.RoleToolResult, last.Role)
	assert.True(t, last.ToolError)
	assert.Contains(t, last.Text(), "payload_too_large: the tool's result is")
	assert.Less(t, len(last.Text()), 1000)
}

// recordingSteps is a step agent that records the context of its last
// model call.
type recordingSteps struct {
	*stepAgent
	contexts *[]transcript.Message
}

func (r *recordingSteps) Model(ctx context.Context, step temporal.ModelStep) (temporal.ModelResult, error) {
	*r.contexts = append([]transcript.Message(nil), step.Context...)
	return r.stepAgent.Model(ctx, step)
}

// A step-wise run's model calls get the user's prompt last in their
// context, as a session.Agent's run does: the run's input carries it
// apart from the context (RunInput.PromptOmitted), and the model's
// input puts it back.
func TestStepModelCallsGetThePrompt(t *testing.T) {
	var first, second []transcript.Message
	agent := &stepAgent{answers: []transcript.Message{toolUse("call-1", "tc-1", "read"), final("call-2", "done")}}
	calls := 0
	rec := &recordingSteps{stepAgent: agent, contexts: &second}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: rec, Sink: &sink{}}).Register(e)
	agent.model = func(context.Context) {
		calls++
		if calls == 1 {
			first = append([]transcript.Message(nil), second...)
		}
	}
	var p1, p2 outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p1, "read a") }, 0)
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p2", &p2, "and b") }, time.Second)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p1.err)
	require.NoError(t, p2.err)
	require.NotEmpty(t, first)
	assert.Equal(t, transcript.RoleUser, first[len(first)-1].Role)
	assert.Equal(t, "read a", first[len(first)-1].Text(), "the first call's context ends with the prompt")
	require.Len(t, second, 5, "the first turn's prompt, call, tool result and answer, then the second prompt")
	assert.Equal(t, "read a", second[0].Text())
	assert.Equal(t, "and b", second[4].Text())
}

// A step-wise session continues as new step-wise: Start.Steps goes with
// the continue-as-new's input, and the next run's prompt is made as
// model and tool activities, with the conversation so far and the new
// prompt in its context.
func TestStepsGoOnAcrossContinueAsNew(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{toolUse("call-1", "tc-1", "read"), final("call-2", "done")}}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxInputs: 1}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: &sink{}}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "read a") }, 0)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, p.err)
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, e.GetWorkflowError(), &can)
	var next temporal.Start
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.True(t, next.Steps, "the session goes on step-wise")

	var seen []transcript.Message
	agent2 := &stepAgent{answers: []transcript.Message{final("call-3", "b says hi")}}
	e2 := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e2)
	(&temporal.Activities{Steps: &recordingSteps{stepAgent: agent2, contexts: &seen}, Sink: &sink{}}).Register(e2)
	var q outcome
	e2.RegisterDelayedCallback(func() { update(e2, temporal.UpdatePrompt, "q", &q, "and b") }, 0)
	e2.RegisterDelayedCallback(func() { e2.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e2.ExecuteWorkflow(temporal.WorkflowName, next)
	require.NoError(t, e2.GetWorkflowError())
	require.NoError(t, q.err)
	models, _ := agent2.counts()
	assert.Equal(t, 1, models, "the next run's prompt was a model activity")
	require.Len(t, seen, 5)
	assert.Equal(t, "read a", seen[0].Text())
	assert.Equal(t, "and b", seen[4].Text())
}

// An abort while a tool call lost with its worker waits for its retry
// cancels the retry: the tool is not run again, no model call follows,
// and the turn settles as aborted (not as a lost run retried by the
// engine).
func TestStepAbortWhileALostToolWaitsForItsRetry(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{toolUse("call-1", "tc-1", "read"), final("call-2", "never")}}
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	acts := &temporal.Activities{Steps: agent, Sink: snk}
	acts.Register(e)
	attempts := 0
	e.OnActivity(temporal.ActivityTool, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, call temporal.ToolCall) (transcript.Message, error) {
			attempts++
			if attempts == 1 {
				return transcript.Message{}, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
			return acts.Tool(ctx, call)
		})
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p", &p, "read a") }, 0)
	// The retry waits a second (the retry policy's first interval).
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalAbort, nil) }, 500*time.Millisecond)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	assert.Equal(t, "aborted", code(t, p.err))
	assert.Equal(t, 1, attempts, "the retry was cancelled")
	models, _ := agent.counts()
	assert.Equal(t, 1, models, "no model call after the abort")
	got := settled(t, snk)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], `"code":"aborted"`)
}
