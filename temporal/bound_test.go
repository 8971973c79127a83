package temporal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
)

// boundRun is what one run of the workflow did in a boundStory.
type boundRun struct {
	turns   int // prompts whose turn settled in the run
	runs    int // run activities started
	events  int64
	carried int // bytes of events it carried into the next run
}

// boundStory sends prompts prompts back to back (each as soon as the turn
// before it settled) to a session whose agent takes runDelay and whose
// sink takes sinkDelay of the workflow's clock, and plays its runs one
// after another, each on the input the one before continued as new with.
// suggest, when set, says whether and when (on the run's clock, from its
// start) the server suggests continuing as new to run i. A prompt refused
// as "continuing" is sent again to the next run. It returns what each run
// did and the sink.
func boundStory(t *testing.T, wf *temporal.Workflow, prompts int, runDelay, sinkDelay time.Duration, suggest func(run int) (time.Duration, bool)) ([]boundRun, *sink) {
	t.Helper()
	calls := make([]scripted.Call, prompts)
	for i := range calls {
		calls[i] = scripted.Call{StopReason: "stop", Text: fmt.Sprint("answer ", i)}
	}
	agent := scripted.New(scripted.Script{Model: scenarios.Model, Calls: calls})
	snk := &sink{}
	in := startOf(policy.DefaultConfig())
	next := 0 // the first prompt not yet settled
	var out []boundRun
	for run := 0; ; run++ {
		require.Less(t, run, 3*prompts+2, "the story does not end")
		e := newEnv()
		wf.Register(e)
		acts := &temporal.Activities{Agent: agent, Sink: snk}
		acts.Register(e)
		e.OnActivity(temporal.ActivityDeliver, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, d temporal.Delivery) error { return acts.Deliver(ctx, d) }).After(sinkDelay)
		e.OnActivity(temporal.ActivityRun, mock.Anything, mock.Anything).Return(
			func(ctx context.Context, in temporal.RunInput) (temporal.RunResult, error) { return acts.Run(ctx, in) }).After(runDelay)
		var r boundRun
		e.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			if info.ActivityType.Name == temporal.ActivityRun {
				r.runs++
			}
		})
		if suggest != nil {
			if at, ok := suggest(run); ok && at == 0 {
				e.SetContinueAsNewSuggested(true)
			} else if ok {
				e.RegisterDelayedCallback(func() { e.SetContinueAsNewSuggested(true) }, at)
			}
		}
		over := false
		var send func()
		send = func() {
			if over {
				return
			}
			if next == prompts {
				e.SignalWorkflow(temporal.SignalClose, nil)
				return
			}
			i := next
			e.UpdateWorkflow(temporal.UpdatePrompt, fmt.Sprint("prompt-", i), &testsuite.TestUpdateCallback{
				OnReject: func(err error) {
					if code(t, err) != "continuing" {
						t.Errorf("prompt %d rejected: %v", i+1, err)
					}
				},
				OnAccept: func() {},
				OnComplete: func(_ any, err error) {
					assert.NoError(t, err, "prompt %d", i+1)
					r.turns++
					next++
					send()
				},
			}, fmt.Sprint("prompt ", i))
		}
		e.RegisterDelayedCallback(send, 0)
		e.ExecuteWorkflow(temporal.WorkflowName, in)
		over = true
		require.True(t, e.IsWorkflowCompleted())
		err := e.GetWorkflowError()
		if err == nil {
			require.Equal(t, prompts, next, "the session ended before its last prompt")
			out = append(out, r)
			return out, snk
		}
		var can *workflow.ContinueAsNewError
		require.True(t, errors.As(err, &can), "run %d ended with %v, not a continue-as-new", run+1, err)
		was := in.Events + int64(len(in.Pending))
		in = temporal.Start{}
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &in))
		r.events = in.Events + int64(len(in.Pending)) - was
		for _, l := range in.Pending {
			r.carried += len(l)
		}
		out = append(out, r)
	}
}

// Issue 27 item 1: with prompts back to back and a sink slower than a
// turn, a run continues as new at the end of the turn in which it became
// due. It used to wait until every event was delivered, and each prompt
// arrived during a delivery, started a turn and put the continue-as-new
// off again: one run took every turn, and its history grew without bound.
// Here a run due after its first input takes exactly one turn; its events
// go to the next run's input instead of waiting for the sink, and the sink
// receives every event once, numbered on across the runs.
func TestContinueAsNewBoundedWhateverThePrompts(t *testing.T) {
	const prompts = 12
	const maxCarried = 4 << 10
	runs, snk := boundStory(t, &temporal.Workflow{Random: scenarios.Draw, MaxInputs: 1, MaxCarried: maxCarried}, prompts, 0, 10*time.Minute, nil)
	require.Len(t, runs, prompts+1, "one run per turn, and the last takes the close")
	perTurn := runs[0].events
	require.Positive(t, perTurn)
	for i, r := range runs[:prompts] {
		assert.Equal(t, 1, r.turns, "run %d: turns", i+1)
		assert.Equal(t, 1, r.runs, "run %d: run activities", i+1)
		assert.Equal(t, perTurn, r.events, "run %d: events", i+1)
		// What a run carries is what it did not deliver, up to
		// MaxCarried: past that, the run waited for its sink.
		assert.LessOrEqual(t, r.carried, maxCarried, "run %d: bytes carried", i+1)
	}
	lines := snk.all()
	assert.Len(t, lines, prompts*int(perTurn), "every event delivered, each once")
	settled := 0
	for _, l := range lines {
		var w struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &w))
		if w.Type == "turn_settled" {
			settled++
		}
	}
	assert.Equal(t, prompts, settled)
	assert.Len(t, ids(t, lines), prompts, "each answer once")
}

// Issue 27 item 1: when the server suggests continuing as new, the run
// does so at the end of the turn in flight, though prompts keep coming and
// the sink lags; a run to which the server suggests it from its start
// refuses the prompt as "continuing" (no turn starts in a run that is
// over), and sent again the prompt is the next run's.
func TestContinueAsNewWhenTheServerSuggests(t *testing.T) {
	const prompts = 8
	// Each turn takes a minute, each delivery ten: the first run hears
	// the suggestion during its third turn, the second from its start.
	suggest := func(run int) (time.Duration, bool) {
		switch run {
		case 0:
			return 150 * time.Second, true
		case 1:
			return 0, true
		}
		return 0, false
	}
	runs, snk := boundStory(t, &temporal.Workflow{Random: scenarios.Draw}, prompts, time.Minute, 10*time.Minute, suggest)
	require.Len(t, runs, 3)
	assert.Equal(t, 3, runs[0].turns, "the first run ends with the turn in flight at the suggestion")
	assert.Equal(t, 3, runs[0].runs)
	assert.Equal(t, boundRun{carried: runs[1].carried}, runs[1], "the second run refuses the prompt and continues at once")
	assert.Equal(t, prompts-3, runs[2].turns)
	assert.Len(t, ids(t, snk.all()), prompts, "each answer once")
}

// A Start whose events cannot be delivered as the sink's contract says
// fails the workflow with an error that names the field; it is not
// retried, and delivers nothing.
func TestInvalidPendingEvents(t *testing.T) {
	for _, c := range []struct {
		name string
		in   func(*temporal.Start)
		want string
	}{
		{"negative number", func(s *temporal.Start) { s.Events = -1 }, "Start.Events is -1"},
		{"null line", func(s *temporal.Start) {
			s.Pending = []json.RawMessage{json.RawMessage(`{"type":"agent_start"}`), json.RawMessage(`null`)}
		}, "Start.Pending[1]"},
		{"a number", func(s *temporal.Start) { s.Pending = []json.RawMessage{json.RawMessage(`42`)} }, "Start.Pending[0]"},
		{"an unknown class", func(s *temporal.Start) { s.LastErrorClass = "bogus" }, "Start.LastErrorClass"},
	} {
		t.Run(c.name, func(t *testing.T) {
			snk := &sink{}
			e := env(t, scripted.New(scripted.Script{}), snk)
			in := startOf(policy.DefaultConfig())
			c.in(&in)
			e.ExecuteWorkflow(temporal.WorkflowName, in)
			err := e.GetWorkflowError()
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, "invalid_start", code(t, err))
			assert.Empty(t, snk.all())
		})
	}
}

// Issue 27 item 1: a compact update that comes while the run continues as
// new is refused as "continuing" too, and the run continues as new.
func TestCompactRefusedWhileContinuing(t *testing.T) {
	e := env(t, scripted.New(scripted.Script{}), &sink{})
	e.SetContinueAsNewSuggested(true)
	var c outcome
	e.RegisterDelayedCallback(func() { update(e, temporal.UpdateCompact, "c", &c, "") }, 0)
	e.ExecuteWorkflow(temporal.WorkflowName, startOf(policy.DefaultConfig()))
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, e.GetWorkflowError(), &can)
	require.True(t, c.done)
	assert.Equal(t, "continuing", code(t, c.err))
}
