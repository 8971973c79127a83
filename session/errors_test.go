package session_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// apiError is a provider SDK's error, as an agent gets it.
type apiError struct{ status int }

func (e *apiError) Error() string { return fmt.Sprintf("%d Service Unavailable", e.status) }

// failingAgent fails every model call with err, as a started run: the
// message carries err's text and err itself.
type failingAgent struct {
	err   error
	calls atomic.Int64
}

func (a *failingAgent) Run(_ context.Context, req session.RunRequest, emit func(events.Event)) error {
	m := transcript.Message{ID: fmt.Sprintf("call-%d", a.calls.Add(1)), Role: transcript.RoleAssistant, StopReason: "error",
		ErrorMessage: a.err.Error(), Err: a.err, Provider: req.Model.Provider, Model: req.Model.ID}
	emit(events.AgentStart{})
	emit(events.CallStart{})
	emit(events.MessageStart{Message: m})
	emit(events.MessageEnd{Message: m})
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: []transcript.Message{m}})
	return nil
}

// TestTurnErrorKeepsProviderError: a turn that failed on a provider's
// error keeps that Go error: an ExhaustedError carries it and unwraps to
// it, besides ErrExhausted and ErrProvider; so does the error of a turn
// whose error is not retried. TurnSettled carries the same error. Issue
// item 5.
func TestTurnErrorKeepsProviderError(t *testing.T) {
	bubble(t, func(t *testing.T) {
		cause := &apiError{status: 503}
		cfg := policy.DefaultConfig()
		cfg.Retry.MaxRetries = 2
		s, err := session.New(&failingAgent{err: cause}, session.WithModel(policy.Model{Provider: "p", ID: "m", ContextWindow: 200000}),
			session.WithConfig(cfg))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)

		err = s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, policy.ErrExhausted)
		require.ErrorIs(t, err, policy.ErrProvider)
		var got *apiError
		require.ErrorAs(t, err, &got)
		assert.Same(t, cause, got)
		var ex *policy.ExhaustedError
		require.ErrorAs(t, err, &ex)
		assert.Equal(t, policy.ExhaustedError{Attempts: 2, Last: "503 Service Unavailable", Err: cause}, *ex)
		assert.Equal(t, "policy: retries exhausted after 2 attempts: 503 Service Unavailable", err.Error())
		s.Flush()
		evs := rec.events()
		assert.Equal(t, events.TurnSettled{Err: err, ErrorClass: classify.Retryable}, evs[len(evs)-1], "the turn names the class of the error that failed it")

		s.SetAutoRetryEnabled(false)
		err = s.Prompt(context.Background(), "again")
		require.ErrorIs(t, err, policy.ErrProvider)
		assert.NotErrorIs(t, err, policy.ErrExhausted)
		require.ErrorAs(t, err, &got)
		assert.Same(t, cause, got)
		assert.Equal(t, "policy: provider error: 503 Service Unavailable", err.Error())
		s.Flush()
		evs = rec.events()
		assert.Equal(t, events.TurnSettled{Err: err, ErrorClass: classify.Retryable}, evs[len(evs)-1], "settled with retries off")
	})
}

// TestExhaustedErrorWithoutGoError: without a Go error from the agent, an
// ExhaustedError unwraps to ErrProvider only. Issue item 5.
func TestExhaustedErrorWithoutGoError(t *testing.T) {
	err := error(&policy.ExhaustedError{Attempts: 3, Last: "503"})
	assert.ErrorIs(t, err, policy.ErrExhausted)
	assert.ErrorIs(t, err, policy.ErrProvider)
	assert.Equal(t, "policy: retries exhausted after 3 attempts: 503", err.Error())
	assert.False(t, errors.Is(err, context.Canceled))
}

// nilEmitter is an agent that emits a nil event among its run's events.
type nilEmitter struct{}

func (nilEmitter) Run(_ context.Context, req session.RunRequest, emit func(events.Event)) error {
	m := transcript.Message{Role: transcript.RoleAssistant, StopReason: "stop", Content: transcript.TextContent("ok")}
	emit(events.AgentStart{})
	emit(nil)
	emit(events.MessageStart{Message: m})
	emit(events.MessageEnd{Message: m})
	emit(events.AgentEnd{})
	return nil
}

// TestNilEventFromAgentIsDropped: a nil event from the agent reaches no
// subscriber (a nil was delivered as is, and over RPC written as a line
// "null", which has no type). Issue item 5.
func TestNilEventFromAgentIsDropped(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, err := session.New(nilEmitter{}, session.WithModel(policy.Model{Provider: "p", ID: "m", ContextWindow: 200000}))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush()
		for _, ev := range rec.events() {
			assert.NotNil(t, ev)
		}
		assert.NotEmpty(t, rec.events())
	})
}
