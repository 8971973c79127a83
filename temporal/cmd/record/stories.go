package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/temporal/internal/live"
	"github.com/agentfsm/agentfsm/transcript"
)

// story is a recorded story beyond the shared scenarios: the workflow's
// paths they do not take. Its histories are written as NAME.json, or
// NAME-1.json, NAME-2.json, ... for each run of a workflow continued as
// new. The replay test replays them with the worker's settings here
// (temporal/replay_test.go, recordedWith).
type story struct {
	name     string
	workflow temporal.Workflow
	acts     func() *temporal.Activities
	start    temporal.Start
	// play drives the session (started as id) to its end and returns
	// the IDs of the runs to record, in order.
	play func(ctx context.Context, c client.Client, id, firstRun string) ([]string, error)
}

func scriptedActs(calls ...scripted.Call) func() *temporal.Activities {
	return func() *temporal.Activities {
		return &temporal.Activities{Agent: scripted.New(scripted.Script{Model: scenarios.Model, Calls: calls})}
	}
}

func errorCall(text string) scripted.Call {
	return scripted.Call{StopReason: "error", ErrorMessage: text}
}

func okCall(text string) scripted.Call { return scripted.Call{StopReason: "stop", Text: text} }

func storyStart(steps bool) temporal.Start {
	cfg := scenarios.Scenario{}.Config()
	return temporal.Start{SessionID: scenarios.SessionID, Model: scenarios.Model, Config: &cfg, Steps: steps}
}

var stories = []story{
	{
		// abort_retry during the first backoff: the retry is cancelled,
		// the turn settles.
		name: "abort-retry", workflow: temporal.Workflow{Random: scenarios.Draw},
		acts:  scriptedActs(errorCall("503 Service Unavailable"), okCall("never sent")),
		start: storyStart(false),
		play: func(ctx context.Context, c client.Client, id, run string) ([]string, error) {
			h, err := prompt(ctx, c, id, "p1", "summarize the repository")
			if err != nil {
				return nil, err
			}
			if err := live.Await(ctx, c, id, func(st rpc.State) bool { return st.State == "backoff" }); err != nil {
				return nil, err
			}
			if err := c.SignalWorkflow(ctx, id, "", temporal.SignalAbortRetry, nil); err != nil {
				return nil, err
			}
			_ = h.Get(ctx, nil) // the turn's error is the story's
			return []string{run}, closeSession(ctx, c, id)
		},
	},
	{
		// Continue-as-new after every turn (MaxInputs 1), the second turn
		// with a backoff: the first run's history ends in a continue-as-
		// new, the second starts from the first's snapshot.
		name: "continue-as-new", workflow: temporal.Workflow{Random: scenarios.Draw, MaxInputs: 1},
		acts:  scriptedActs(okCall("one"), errorCall("503 Service Unavailable"), okCall("two")),
		start: storyStart(false),
		play: func(ctx context.Context, c client.Client, id, run string) ([]string, error) {
			runs := []string{run}
			for i, text := range []string{"first", "second"} {
				h, err := prompt(ctx, c, id, fmt.Sprint("p", i+1), text)
				if err != nil {
					return nil, err
				}
				if err := h.Get(ctx, nil); err != nil {
					return nil, fmt.Errorf("prompt %d: %w", i+1, err)
				}
				next, err := nextRun(ctx, c, id, runs[len(runs)-1])
				if err != nil {
					return nil, err
				}
				if i == 0 {
					runs = append(runs, next)
				}
			}
			return runs, closeSession(ctx, c, id)
		},
	},
	{
		// An overload moves the session to its fallback model at once
		// (fallback.after "overloaded"), whose run answers.
		name: "fallback", workflow: temporal.Workflow{Random: scenarios.Draw},
		acts: scriptedActs(errorCall("529 overloaded_error: Overloaded"), okCall("Answered by the fallback.")),
		start: func() temporal.Start {
			st := storyStart(false)
			st.Config.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "scripted-small"}}, After: "overloaded"}
			return st
		}(),
		play: func(ctx context.Context, c client.Client, id, run string) ([]string, error) {
			h, err := prompt(ctx, c, id, "p1", "summarize the repository")
			if err != nil {
				return nil, err
			}
			if err := h.Get(ctx, nil); err != nil {
				return nil, err
			}
			return []string{run}, closeSession(ctx, c, id)
		},
	},
	{
		// A step-wise run: a model call asking for a tool, the tool, a
		// model call failing with a 503, the backoff, the continuation.
		name: "steps", workflow: temporal.Workflow{Random: scenarios.Draw},
		acts: func() *temporal.Activities {
			return &temporal.Activities{Steps: &stepAgent{answers: []transcript.Message{
				{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonToolUse, Content: []transcript.Block{
					{Type: transcript.BlockToolCall, ID: "tc-1", Name: "read", Arguments: json.RawMessage(`{"path":"README.md"}`)}}},
				{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "503 Service Unavailable"},
				{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent("It is a library.")},
			}}}
		},
		start: storyStart(true),
		play: func(ctx context.Context, c client.Client, id, run string) ([]string, error) {
			h, err := prompt(ctx, c, id, "p1", "what is this repository?")
			if err != nil {
				return nil, err
			}
			if err := h.Get(ctx, nil); err != nil {
				return nil, err
			}
			return []string{run}, closeSession(ctx, c, id)
		},
	},
}

// recordStory plays st on a worker of its own and writes its runs'
// histories into dir.
func recordStory(ctx context.Context, c client.Client, st story, dir string) error {
	queue := "record-" + st.name
	id := fmt.Sprintf("record-%s-%d", st.name, time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{DeadlockDetectionTimeout: time.Minute})
	wf := st.workflow
	wf.Register(w)
	st.acts().Register(w)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, temporal.WorkflowName, st.start)
	if err != nil {
		return err
	}
	runs, err := st.play(ctx, c, id, run.GetRunID())
	if err != nil {
		return err
	}
	for i, r := range runs {
		name := st.name + ".json"
		if len(runs) > 1 {
			name = fmt.Sprintf("%s-%d.json", st.name, i+1)
		}
		if err := writeHistory(ctx, c, id, r, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func prompt(ctx context.Context, c client.Client, id, updateID, text string) (client.WorkflowUpdateHandle, error) {
	return c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateID: updateID, UpdateName: temporal.UpdatePrompt,
		Args: []any{text}, WaitForStage: client.WorkflowUpdateStageAccepted})
}

// closeSession closes the session and waits for its workflow's end.
func closeSession(ctx context.Context, c client.Client, id string) error {
	if err := c.SignalWorkflow(ctx, id, "", temporal.SignalClose, nil); err != nil {
		return err
	}
	return c.GetWorkflow(ctx, id, "").Get(ctx, nil)
}

// nextRun waits until workflow id's current run is not prev and returns
// it.
func nextRun(ctx context.Context, c client.Client, id, prev string) (string, error) {
	for {
		d, err := c.DescribeWorkflow(ctx, id, "")
		if err != nil {
			return "", err
		}
		if r := d.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId(); r != prev {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return "", errors.New("the run did not continue as new")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stepAgent answers model calls from a list, one message per call, and
// each tool call with its name.
type stepAgent struct {
	mu      sync.Mutex
	answers []transcript.Message
	calls   int
}

func (a *stepAgent) Model(_ context.Context, step temporal.ModelStep) (temporal.ModelResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.answers[min(a.calls, len(a.answers)-1)]
	a.calls++
	return temporal.ModelResult{Message: m}, nil
}

func (a *stepAgent) Tool(_ context.Context, call temporal.ToolCall) (temporal.ToolResult, error) {
	return temporal.ToolResult{Content: transcript.TextContent("the contents of " + string(call.Arguments))}, nil
}
