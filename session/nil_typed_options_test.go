package session_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/limiter"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// A nil pointer in an interface is as nil as a nil interface: the
// *FileHistory of an OpenFileHistory whose error was not looked at, a nil
// *MemoryCredentials or *AgentSummarizer, a nil *scripted.Agent, a Logger
// over a nil handler. New refuses each with an error naming it and the
// type, instead of panicking in New (the histories), on the first run
// (the agent), or wherever the session first uses it.
func TestTypedNilOptionsAreRefused(t *testing.T) {
	agent := scripted.New(scripted.Script{})
	for _, c := range []struct {
		agent session.Agent
		opt   session.Option
		want  string
	}{
		{agent, session.WithHistory((*history.FileHistory)(nil)), "session: nil History (*history.FileHistory)"},
		{agent, session.WithHistory((*history.MemoryHistory)(nil)), "session: nil History (*history.MemoryHistory)"},
		{agent, session.WithCredentials((*credentials.MemoryCredentials)(nil)), "session: nil CredentialStore (*credentials.MemoryCredentials)"},
		{agent, session.WithLimiter((*limiter.Limiter)(nil)), "session: nil Limiter (*limiter.Limiter)"},
		{agent, session.WithSummarizer((*session.AgentSummarizer)(nil)), "session: nil Summarizer (*session.AgentSummarizer)"},
		{agent, session.WithObserver((*nopObserver)(nil)), "session: nil Observer (*session_test.nopObserver)"},
		{agent, session.WithLogger(slog.New((*slog.TextHandler)(nil))), "session: Logger with a nil Handler (*slog.TextHandler)"},
		{(*scripted.Agent)(nil), session.WithSessionID("s"), "session: nil Agent (*scripted.Agent)"},
	} {
		t.Run(c.want, func(t *testing.T) {
			var (
				s   *session.Session
				err error
			)
			assert.NotPanics(t, func() { s, err = session.New(c.agent, c.opt) })
			assert.EqualError(t, err, c.want)
			assert.Nil(t, s)
		})
	}
}

// nopObserver observes nothing; its methods use their receiver, as an
// observer's do.
type nopObserver struct{ events int }

func (o *nopObserver) StartTurn(ctx context.Context, _ string, _ policy.Model) context.Context {
	return ctx
}

func (o *nopObserver) StartRun(ctx context.Context, _ session.RunRequest) (context.Context, func(error)) {
	return ctx, nil
}

func (o *nopObserver) Observe(context.Context, events.Event) { o.events++ }
