package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/internal/scenarios"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/temporal"
)

// sink keeps the lines it is delivered, each once, and fails a delivery
// that skips some.
type sink struct {
	mu    sync.Mutex
	lines []string
}

func (s *sink) Deliver(_ context.Context, _ string, first int64, lines []json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if first > int64(len(s.lines)) {
		return fmt.Errorf("sink: events %d to %d are missing", len(s.lines), first-1)
	}
	for i, l := range lines {
		if first+int64(i) == int64(len(s.lines)) {
			s.lines = append(s.lines, string(l))
		}
	}
	return nil
}

// all returns every line delivered.
func (s *sink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// recovery returns the recovery events delivered (scenarios.Want's lines).
func (s *sink) recovery(t *testing.T) []string {
	var out []string
	for _, l := range s.all() {
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

// start is the workflow input of scenario sc.
func start(sc scenarios.Scenario) temporal.Start {
	cfg := sc.Config()
	return temporal.Start{SessionID: scenarios.SessionID, Model: scenarios.Model, Config: &cfg, Credentials: len(sc.Credentials) > 0}
}

// activities are scenario sc's activities, on agent.
func activities(t *testing.T, sc scenarios.Scenario, agent session.Agent, snk temporal.Sink) *temporal.Activities {
	t.Helper()
	a := &temporal.Activities{Agent: agent, Sink: snk}
	if len(sc.Credentials) > 0 {
		store, err := credentials.NewMemoryCredentials(nil, sc.Credentials...)
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		a.Credentials = store
	}
	return a
}

// newEnv is a test environment whose deadlock detector allows a workflow
// step a minute, not a second: the machine running the tests may be
// loaded, and the race detector slows every step.
func newEnv() *testsuite.TestWorkflowEnvironment {
	var suite testsuite.WorkflowTestSuite
	e := suite.NewTestWorkflowEnvironment()
	e.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	return e
}

// playInSuite plays sc on the test environment (time skipping, no server)
// and returns what its sink received. Each prompt is sent once the turn
// before it settled; the session is closed after the last.
func playInSuite(t *testing.T, sc scenarios.Scenario, wf *temporal.Workflow) (*sink, *testsuite.TestWorkflowEnvironment) {
	t.Helper()
	env := newEnv()
	snk := &sink{}
	wf.Register(env)
	activities(t, sc, scripted.New(sc.Script()), snk).Register(env)
	var send func(i int)
	send = func(i int) {
		if i == len(sc.Prompts) {
			env.SignalWorkflow(temporal.SignalClose, nil)
			return
		}
		env.UpdateWorkflow(temporal.UpdatePrompt, fmt.Sprint("prompt-", i), &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { t.Errorf("prompt %d rejected: %v", i+1, err) },
			OnAccept:   func() {},
			OnComplete: func(any, error) { send(i + 1) },
		}, sc.Prompts[i])
	}
	env.RegisterDelayedCallback(func() { send(0) }, 0)
	if sc.AbortAfter > 0 {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(temporal.SignalAbort, nil) }, sc.AbortAfter)
	}
	env.ExecuteWorkflow(temporal.WorkflowName, start(sc))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	return snk, env
}
