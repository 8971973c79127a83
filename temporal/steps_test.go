package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/transcript"
)

// stepAgent answers model calls from a list, one message per call (each
// streamed as one fragment first), and tool calls with "result of NAME";
// it counts both.
type stepAgent struct {
	mu      sync.Mutex
	answers []transcript.Message
	models  int
	tools   int
	// tool, when set, runs each tool call instead.
	tool func(ctx context.Context, call temporal.ToolCall) (temporal.ToolResult, error)
	// model, when set, is called before each model call answers.
	model func(ctx context.Context)
}

func (a *stepAgent) Model(ctx context.Context, step temporal.ModelStep) (temporal.ModelResult, error) {
	a.mu.Lock()
	m := a.answers[min(a.models, len(a.answers)-1)]
	a.models++
	a.mu.Unlock()
	if a.model != nil {
		a.model(ctx)
	}
	step.Stream(events.MessageUpdate{Message: m, Delta: events.Delta{Kind: "text", Text: "…"}})
	return temporal.ModelResult{Message: m}, nil
}

func (a *stepAgent) Tool(ctx context.Context, call temporal.ToolCall) (temporal.ToolResult, error) {
	a.mu.Lock()
	a.tools++
	a.mu.Unlock()
	if a.tool != nil {
		return a.tool(ctx, call)
	}
	return temporal.ToolResult{Content: transcript.TextContent("result of " + call.Name)}, nil
}

func (a *stepAgent) counts() (models, tools int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.models, a.tools
}

// toolUse is an assistant message that calls tool name once.
func toolUse(id, callID, name string) transcript.Message {
	return transcript.Message{ID: id, Role: transcript.RoleAssistant, StopReason: transcript.StopReasonToolUse,
		Content: []transcript.Block{{Type: transcript.BlockToolCall, ID: callID, Name: name, Arguments: json.RawMessage(`{"path":"a"}`)}}}
}

func final(id, text string) transcript.Message {
	return transcript.Message{ID: id, Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent(text)}
}

// fragmentSink is a sink that also keeps the fragments.
type fragmentSink struct {
	sink
	fragments []string
}

func (s *fragmentSink) Fragment(_ context.Context, _ string, line json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fragments = append(s.fragments, string(line))
	return nil
}

func stepStart() temporal.Start {
	st := startOf(policy.DefaultConfig())
	st.Steps = true
	return st
}

// Issue item 6: a worker lost during a tool call costs only that tool
// call. Its activity fails once with a heartbeat timeout (the worker
// lost); Temporal runs it again, alone: the model call before it is not
// made again, and the turn succeeds with no retry of the engine's.
func TestStepLostToolIsRetriedAlone(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{toolUse("call-1", "tc-1", "read"), final("call-2", "a says hi")}}
	snk := &fragmentSink{}
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
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "read a") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.NoError(t, p.err)
	models, tools := agent.counts()
	assert.Equal(t, 2, models, "each model call made once")
	assert.Equal(t, 2, attempts, "the tool's activity ran twice")
	assert.Equal(t, 1, tools, "the tool ran once, on the second attempt")
	assert.Equal(t, []string{
		`{"type":"state_change","from":"idle","to":"classifying","event":"agent_end"}`,
		`{"type":"state_change","from":"classifying","to":"idle","event":"accept"}`,
		`{"type":"turn_settled","success":true}`,
	}, snk.recovery(t))
	assert.Len(t, snk.fragments, 2, "each model call's fragment reached the sink from its activity")
	for _, f := range snk.fragments {
		assert.Contains(t, f, `"type":"message_update"`)
	}
}

// shape reads a sink's lines as what the engine and a client see of a
// run, less the identities and times each driver makes: the event's type,
// and its message's role, stop reason, tool call and text.
func shape(t *testing.T, lines []string) []string {
	var out []string
	for _, l := range lines {
		var w struct {
			Type    string               `json:"type"`
			Message *transcript.Message  `json:"message"`
			Msgs    []transcript.Message `json:"messages"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &w), l)
		s := w.Type
		if m := w.Message; m != nil {
			s += " " + string(m.Role) + " " + string(m.StopReason) + " " + m.ToolCallID + " " + m.Text()
		}
		for _, m := range w.Msgs {
			s += " | " + string(m.Role) + " " + m.Text()
		}
		out = append(out, s)
	}
	return out
}

// A step-wise run gives the sink (and the engine) the events the plain
// Agent gives for the same model calls and tool results: the same
// agent_end, the same recovery events.
func TestStepRunEventsAsThePlainAgents(t *testing.T) {
	call := toolUse("", "tc-1", "read")
	plainAgent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{
		{StopReason: "toolUse", Content: call.Content, ToolResults: []scripted.ToolResult{{Content: transcript.TextContent("result of read")}}},
		{StopReason: "stop", Text: "a says hi"},
	}})
	plain := &sink{}
	e := env(t, plainAgent, plain)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "read a") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p.err)

	stepped := &sink{}
	agent := &stepAgent{answers: []transcript.Message{call, final("", "a says hi")}}
	e = newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: stepped}).Register(e)
	var q outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &q, "read a") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, q.err)

	want := shape(t, plain.all())
	require.Contains(t, strings.Join(want, "\n"), "message_end toolResult  tc-1 result of read")
	assert.Equal(t, want, shape(t, stepped.all()))
}

// An abort during a tool call cancels the tool's activity, makes no
// further model call, and the turn settles as aborted.
func TestStepAbortCancelsTheToolInFlight(t *testing.T) {
	var e *testsuite.TestWorkflowEnvironment
	release := make(chan struct{})
	agent := &stepAgent{answers: []transcript.Message{toolUse("call-1", "tc-1", "slow"), final("call-2", "never")}}
	agent.tool = func(ctx context.Context, _ temporal.ToolCall) (temporal.ToolResult, error) {
		e.SignalWorkflow(temporal.SignalAbort, nil)
		<-release // the cancellation the workflow asks for (see below)
		return temporal.ToolResult{Content: transcript.TextContent("late")}, nil
	}
	snk := &sink{}
	e = newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: snk}).Register(e)
	var cancelled []string
	e.SetOnActivityCanceledListener(func(info *activity.Info) {
		cancelled = append(cancelled, info.ActivityType.Name)
		close(release)
	})
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "read slowly") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	assert.Equal(t, "aborted", code(t, p.err))
	assert.Equal(t, []string{temporal.ActivityTool}, cancelled, "the tool's activity was cancelled")
	models, tools := agent.counts()
	assert.Equal(t, 1, models, "no model call after the abort")
	assert.Equal(t, 1, tools)
}

// A model that calls tools forever does not hold the session: the run
// ends after Workflow.MaxSteps model calls, with an error that names the
// setting, and the turn settles.
func TestStepRunBoundedByMaxSteps(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{toolUse("", "tc", "again")}}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, MaxSteps: 3}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: &sink{}}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "loop") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Hour)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.Error(t, p.err)
	assert.Contains(t, p.err.Error(), "Workflow.MaxSteps")
	models, tools := agent.counts()
	assert.Equal(t, 3, models)
	assert.Equal(t, 3, tools)
}

// A worker whose Activities have no StepAgent fails a step-wise session's
// run with an error that says so, at once (no retry mends it).
func TestStepRunWithoutStepAgent(t *testing.T) {
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Agent: scripted.New(scripted.Script{Model: scenarios.Model}), Sink: &sink{}}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Hour)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.Error(t, p.err)
	assert.Contains(t, p.err.Error(), "Activities.Steps is nil")
}

// panickySteps panics in the model call after its first, and in every tool
// call.
type panickySteps struct{ stepAgent }

func (a *panickySteps) Model(ctx context.Context, step temporal.ModelStep) (temporal.ModelResult, error) {
	if models, _ := a.counts(); models > 0 {
		// The tool's panic reached the model as an error result.
		last := step.Context[len(step.Context)-1]
		if !last.ToolError || !strings.Contains(last.Text(), "panicked: boom") {
			return temporal.ModelResult{}, errors.New("the tool's panic is not in the context")
		}
		panic("model boom")
	}
	return a.stepAgent.Model(ctx, step)
}

func (a *panickySteps) Tool(context.Context, temporal.ToolCall) (temporal.ToolResult, error) {
	panic("boom")
}

// A tool that panics gives the model an error result; a model call that
// panics fails the turn as a panic (never retried), and the session goes
// on.
func TestStepPanicsAreContained(t *testing.T) {
	agent := &panickySteps{stepAgent{answers: []transcript.Message{toolUse("", "tc", "explode")}}}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: &sink{}}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "go") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Hour)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.Error(t, p.err)
	assert.Contains(t, p.err.Error(), "model boom")
}

// streamingAgent wraps an agent, streaming one fragment before each
// message it ends.
type streamingAgent struct{ session.Agent }

func (a streamingAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	return a.Agent.Run(ctx, req, func(ev events.Event) {
		if m, ok := ev.(events.MessageEnd); ok && m.Message.Role == transcript.RoleAssistant {
			emit(events.MessageUpdate{Message: m.Message, Delta: events.Delta{Kind: "text", Text: "frag"}})
		}
		emit(ev)
	})
}

// The plain Agent's fragments reach a FragmentSink from the run's
// activity too, and never the numbered durable events.
func TestRunFragmentsReachAFragmentSink(t *testing.T) {
	snk := &fragmentSink{}
	agent := streamingAgent{scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: "ok"}}})}
	e := env(t, agent, snk)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	require.NoError(t, e.GetWorkflowError())
	require.NoError(t, p.err)
	require.Len(t, snk.fragments, 1)
	assert.Contains(t, snk.fragments[0], `"type":"message_update"`)
	for _, l := range snk.all() {
		assert.NotContains(t, l, `"type":"message_update"`)
	}
}

// An abort during a model call cancels the model's activity; the run
// ends with the message the call returned, no tool runs, and the turn
// settles as aborted.
func TestStepAbortCancelsTheModelCallInFlight(t *testing.T) {
	var e *testsuite.TestWorkflowEnvironment
	release := make(chan struct{})
	agent := &stepAgent{answers: []transcript.Message{toolUse("call-1", "tc-1", "never")}}
	agent.model = func(context.Context) {
		e.SignalWorkflow(temporal.SignalAbort, nil)
		<-release
	}
	e = newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: &sink{}}).Register(e)
	var cancelled []string
	e.SetOnActivityCanceledListener(func(info *activity.Info) {
		cancelled = append(cancelled, info.ActivityType.Name)
		close(release)
	})
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "think") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	assert.Equal(t, "aborted", code(t, p.err))
	assert.Equal(t, []string{temporal.ActivityModel}, cancelled)
	models, tools := agent.counts()
	assert.Equal(t, 1, models)
	assert.Equal(t, 0, tools, "no tool runs after the abort")
}

// panickingSink panics on every fragment.
type panickingSink struct{ sink }

func (*panickingSink) Fragment(context.Context, string, json.RawMessage) error { panic("sink boom") }

// A FragmentSink that panics fails no run: fragments are best-effort, on
// the plain path (where a panic inside the agent's emit would be taken
// for the agent's) and on the step-wise one.
func TestPanickingFragmentSinkFailsNoRun(t *testing.T) {
	for _, steps := range []bool{false, true} {
		snk := &panickingSink{}
		plain := streamingAgent{scripted.New(scripted.Script{Model: scenarios.Model, Calls: []scripted.Call{{StopReason: "stop", Text: "ok"}}})}
		e := newEnv()
		(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
		(&temporal.Activities{Agent: plain, Steps: &stepAgent{answers: []transcript.Message{final("", "ok")}}, Sink: snk}).Register(e)
		var p outcome
		e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "hi") }, 0)
		e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
		st := startOf(policy.DefaultConfig())
		st.Steps = steps
		e.ExecuteWorkflow(temporal.WorkflowName, st)
		require.NoError(t, e.GetWorkflowError())
		require.True(t, p.done)
		require.NoError(t, p.err, "steps %v", steps)
	}
}

// A step whose activity keeps failing (its worker lost on every attempt)
// makes the run a lost one after Workflow.StepAttempts: the engine
// decides on it as on a whole run's lost activity (a transient failure of
// its attempt), and its retry answers.
func TestStepLostOnEveryAttemptIsALostRun(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{final("", "done")}}
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw, StepAttempts: 2}).Register(e)
	acts := &temporal.Activities{Steps: agent, Sink: snk}
	acts.Register(e)
	attempts := 0
	e.OnActivity(temporal.ActivityModel, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in temporal.ModelInput) (temporal.ModelOutput, error) {
			attempts++
			if attempts <= 2 {
				return temporal.ModelOutput{}, sdktemporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
			return acts.Model(ctx, in)
		})
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.NoError(t, p.err)
	assert.Equal(t, 3, attempts, "two attempts of the lost step, then the engine's retry")
	models, _ := agent.counts()
	assert.Equal(t, 1, models)
	assert.Contains(t, strings.Join(snk.recovery(t), "\n"), `"errorMessage":"interrupted: the session was resumed from a snapshot"`)
}

// A model message the session cannot write (tool call arguments that are
// not a JSON object) ends the run as fatal: the engine cancels it, and
// the tool it asks for never runs.
func TestStepUnwritableMessageRunsNoTool(t *testing.T) {
	bad := toolUse("", "tc", "read")
	bad.Content[0].Arguments = json.RawMessage(`[1]`)
	agent := &stepAgent{answers: []transcript.Message{bad}}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: &sink{}}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.Error(t, p.err)
	models, tools := agent.counts()
	assert.Equal(t, 1, models)
	assert.Equal(t, 0, tools)
}

// A tool result that cannot be written (a block of an unknown type) is
// not encoded into a failing activity that Temporal would run again: the
// tool runs once and the model reads why its result is missing.
func TestStepUnwritableToolResultRunsTheToolOnce(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{toolUse("", "tc", "read"), final("", "ok")}}
	agent.tool = func(context.Context, temporal.ToolCall) (temporal.ToolResult, error) {
		return temporal.ToolResult{Content: []transcript.Block{{Type: "hologram"}}}, nil
	}
	snk := &sink{}
	e := newEnv()
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: snk}).Register(e)
	var p outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdatePrompt, "p1", &p, "hi") }, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Minute)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.NoError(t, p.err)
	models, tools := agent.counts()
	assert.Equal(t, 2, models)
	assert.Equal(t, 1, tools)
	assert.Contains(t, strings.Join(snk.all(), "\n"), "the tool's result cannot be written")
}

// holdSecond is a limiter that holds the second call it is asked about,
// once, for a minute of the workflow's clock.
type holdSecond struct {
	mu    sync.Mutex
	asked int
	done  int
	now   func() time.Time
}

func (l *holdSecond) Admit(string, string) (time.Time, string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked++
	if l.asked == 2 {
		return l.now().Add(time.Minute), "scripted", "rate_limited"
	}
	return time.Time{}, "", ""
}

func (l *holdSecond) Done(string, string, *transcript.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done++
}

// The worker's Limiter is asked before each model call of a step-wise
// run; a later call it holds waits on a workflow timer inside the run,
// then asks again, and the run goes on without repeating the steps before.
func TestStepLaterCallHeldWaitsInTheRun(t *testing.T) {
	agent := &stepAgent{answers: []transcript.Message{toolUse("", "tc", "read"), final("", "done")}}
	e := newEnv()
	lim := &holdSecond{now: e.Now}
	(&temporal.Workflow{Random: scenarios.Draw}).Register(e)
	(&temporal.Activities{Steps: agent, Sink: &sink{}, Limiter: lim}).Register(e)
	var p outcome
	var settled time.Time
	start := e.Now()
	e.RegisterDelayedCallback(func() {
		e.UpdateWorkflow(temporal.UpdatePrompt, "p1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { p.done, p.err = true, err }, OnAccept: func() {},
			OnComplete: func(_ any, err error) { p.done, p.err, settled = true, err, e.Now() },
		}, "hi")
	}, 0)
	e.RegisterDelayedCallback(func() { e.SignalWorkflow(temporal.SignalClose, nil) }, time.Hour)
	e.ExecuteWorkflow(temporal.WorkflowName, stepStart())
	require.NoError(t, e.GetWorkflowError())
	require.True(t, p.done)
	require.NoError(t, p.err)
	models, tools := agent.counts()
	assert.Equal(t, 2, models)
	assert.Equal(t, 1, tools)
	assert.Equal(t, 3, lim.asked, "asked before each call, and again after the hold")
	assert.Equal(t, 2, lim.done, "told of each call made")
	assert.GreaterOrEqual(t, settled.Sub(start), time.Minute, "the hold was waited out")
}
