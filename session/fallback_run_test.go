package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// modelRecorder is an agent that notes the model each run is told to call,
// then plays its script.
type modelRecorder struct {
	*scripted.Agent
	mu     sync.Mutex
	models []string
}

func (a *modelRecorder) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	a.mu.Lock()
	a.models = append(a.models, req.Model.ID)
	a.mu.Unlock()
	return a.Agent.Run(ctx, req, emit)
}

// The driver tells each run the model the engine chose: after an overload
// with fallback.after "overloaded", the continuation calls the fallback
// model, the next turns too until the cooldown is over, and then the
// primary again; Status names the active model all along.
func TestRunsCallTheFallbackModel(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := &modelRecorder{Agent: scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
			{StopReason: "error", ErrorMessage: "529 overloaded_error: Overloaded"},
			{StopReason: "stop", Text: "answered by the fallback"},
			{StopReason: "stop", Text: "still the fallback"},
			{StopReason: "stop", Text: "the primary again"},
		}})}
		cfg := policy.DefaultConfig()
		cfg.Fallback = &policy.FallbackConfig{Models: []policy.FallbackModel{{ID: "fallback-model"}}, After: "overloaded", CooldownMs: 60_000}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithConfig(cfg))
		require.NoError(t, err)
		defer s.Close()
		primary := scripted.DefaultModel.ID

		require.NoError(t, s.Prompt(context.Background(), "first"))
		assert.Equal(t, "fallback-model", s.Status().ActiveModel)
		require.NoError(t, s.Prompt(context.Background(), "second, within the cooldown"))
		assert.Equal(t, "fallback-model", s.Status().ActiveModel)
		time.Sleep(time.Minute)
		require.NoError(t, s.Prompt(context.Background(), "third, after the cooldown"))
		assert.Equal(t, primary, s.Status().ActiveModel)

		agent.mu.Lock()
		defer agent.mu.Unlock()
		assert.Equal(t, []string{primary, "fallback-model", "fallback-model", primary}, agent.models)
		msgs := s.Messages()
		require.NotEmpty(t, msgs)
		assert.Equal(t, primary, msgs[len(msgs)-1].Model, "history names the model that answered")
		found := 0
		for _, m := range msgs {
			if m.Text() == "answered by the fallback" || m.Text() == "still the fallback" {
				found++
				assert.Equal(t, "fallback-model", m.Model, "history names the model that answered %q", m.Text())
			}
		}
		assert.Equal(t, 2, found, "the fallback's two answers")
	})
}
