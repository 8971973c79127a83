package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
	"github.com/agentfsm/agentfsm/transcript"
)

// longStory is the overflow scenario with a third turn after the
// compaction, whose check before the prompt reads the compacted history.
func longStory() scenarios.Scenario {
	var sc scenarios.Scenario
	for _, s := range scenarios.All() {
		if s.Name == "overflow" {
			sc = s
		}
	}
	sc.Name = "long"
	sc.Prompts = append(sc.Prompts, "and now the open risks")
	sc.Calls = append(sc.Calls, scripted.Call{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
		scripted.Call{StopReason: "stop", Text: "Three risks."})
	return sc
}

// ids returns the IDs of the messages the message_end lines carry, in
// order.
func ids(t *testing.T, lines []string) []string {
	var out []string
	for _, l := range lines {
		var w struct {
			Type    string `json:"type"`
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &w))
		if w.Type == "message_end" {
			out = append(out, w.Message.ID)
		}
	}
	return out
}

// A workflow that continues as new after every turn (MaxInputs 1) tells
// the same story as one session in process: the same recovery events, the
// same message IDs, and the sink's numbering goes on across the runs.
func TestContinueAsNewAfterEveryTurn(t *testing.T) {
	sc := longStory()
	var want []string
	var wantIDs []string
	synctest.Test(t, func(t *testing.T) {
		s, err := session.New(scripted.New(sc.Script()), session.WithSessionID(scenarios.SessionID),
			session.WithModel(scenarios.Model), session.WithConfig(sc.Config()), session.WithRandom(scenarios.Draw))
		require.NoError(t, err)
		defer s.Close()
		var all []string
		s.Subscribe(func(ev events.Event) {
			line, ok, err := scenarios.Recovery(ev)
			assert.NoError(t, err)
			if ok {
				want = append(want, line)
			}
			if m, ok := ev.(events.MessageEnd); ok {
				all = append(all, m.Message.ID)
			}
		})
		for _, p := range sc.Prompts {
			_ = s.Prompt(context.Background(), p)
		}
		s.Flush()
		wantIDs = all
	})

	agent := scripted.New(sc.Script())
	snk := &sink{}
	in := start(sc)
	runs := 0
	// One run per prompt; the last may continue as new in the workflow
	// task that settles its turn, before the close signal comes: a run
	// with no prompt then takes the close.
	for i := 0; ; i++ {
		env := newEnv()
		(&temporal.Workflow{Random: scenarios.Draw, MaxInputs: 1}).Register(env)
		activities(t, sc, agent, snk).Register(env)
		env.RegisterDelayedCallback(func() {
			if i >= len(sc.Prompts) {
				env.SignalWorkflow(temporal.SignalClose, nil)
				return
			}
			env.UpdateWorkflow(temporal.UpdatePrompt, fmt.Sprint("prompt-", i), &testsuite.TestUpdateCallback{
				OnReject: func(err error) { t.Errorf("prompt %d rejected: %v", i+1, err) },
				OnAccept: func() {},
				OnComplete: func(any, error) {
					if i == len(sc.Prompts)-1 {
						env.SignalWorkflow(temporal.SignalClose, nil)
					}
				},
			}, sc.Prompts[i])
		}, 0)
		env.ExecuteWorkflow(temporal.WorkflowName, in)
		require.True(t, env.IsWorkflowCompleted())
		runs++
		err := env.GetWorkflowError()
		if err == nil {
			require.GreaterOrEqual(t, i, len(sc.Prompts)-1, "the session ended before its last prompt")
			break
		}
		require.Less(t, i, len(sc.Prompts), "a run with nothing to do continued as new")
		var can *workflow.ContinueAsNewError
		require.True(t, errors.As(err, &can), "run %d ended with %v, not a continue-as-new", runs, err)
		in = temporal.Start{}
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
		require.NotNil(t, in.Snapshot)
		// The run did not wait for its sink: what it had not seen
		// delivered goes with the input, numbered on.
		delivered := int64(len(snk.all()))
		assert.LessOrEqual(t, in.Events, delivered, "the next run's events are numbered after those delivered")
		assert.GreaterOrEqual(t, in.Events+int64(len(in.Pending)), delivered, "no event delivered is left out of the numbering")
		for j, e := range in.History[min(1, len(in.History)):] {
			assert.NotEqual(t, transcript.EntryRemoval, e.Type, "run %d: entry %d: only the first entry of a shortened history is a removal", runs, j+2)
		}
	}
	assert.LessOrEqual(t, runs, len(sc.Prompts)+1)
	assert.Equal(t, want, snk.recovery(t))
	assert.Equal(t, wantIDs, ids(t, snk.all()))
}
