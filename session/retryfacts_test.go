package session_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// retryEvents returns the auto_retry_* events recorded, whole.
func retryEvents(r *recorder) []events.Event {
	var out []events.Event
	for _, ev := range r.events() {
		switch ev.(type) {
		case events.AutoRetryStart, events.AutoRetryEnd:
			out = append(out, ev)
		}
	}
	return out
}

// TestRetryEventsCarryTheirFacts: each retry names the class of its error,
// the failed message's provider and model, and the credential the failed
// run used; each chain's end says how it ended and, when an error ended
// it, that error's class. These are what logs and metrics count by.
func TestRetryEventsCarryTheirFacts(t *testing.T) {
	const provider, model = "scripted", "scripted-1"
	start := func(attempt int, delay int64, text string, class classify.Class) events.AutoRetryStart {
		return events.AutoRetryStart{Attempt: attempt, MaxAttempts: 3, DelayMs: delay, ErrorMessage: text,
			ErrorClass: class, Provider: provider, Model: model}
	}
	cases := []struct {
		name  string
		calls []scripted.Call
		abort bool
		want  []events.Event
	}{
		{"recovered", []scripted.Call{fail(service503), ok("done")}, false, []events.Event{
			start(1, 2000, service503, classify.Retryable),
			events.AutoRetryEnd{Success: true, Attempt: 1, Outcome: events.RetryRecovered},
		}},
		{"exhausted", []scripted.Call{fail(service503), fail(service503), fail(service503), fail(service503)}, false, []events.Event{
			start(1, 2000, service503, classify.Retryable),
			start(2, 4000, service503, classify.Retryable),
			start(3, 8000, service503, classify.Retryable),
			events.AutoRetryEnd{Attempt: 3, FinalError: service503, Outcome: events.RetryExhausted, ErrorClass: classify.Retryable, Limit: events.LimitRetries},
		}},
		{"failed on a fatal error", []scripted.Call{fail(service503), fail("400 invalid request")}, false, []events.Event{
			start(1, 2000, service503, classify.Retryable),
			events.AutoRetryEnd{Attempt: 1, FinalError: "400 invalid request", Outcome: events.RetryFailed, ErrorClass: classify.Fatal},
		}},
		{"cancelled", []scripted.Call{fail(service503), ok("never")}, true, []events.Event{
			start(1, 2000, service503, classify.Retryable),
			events.AutoRetryEnd{Attempt: 1, FinalError: "Retry cancelled", Outcome: events.RetryCancelled},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, _, rec := newSession(t, c.calls)
				done := promptAsync(s, "hi")
				if c.abort {
					waitRetrying(t, s)
					s.AbortRetry()
				}
				<-done
				assert.Equal(t, c.want, retryEvents(rec))
			})
		})
	}
}

// TestUsageLimitRetryNamesTheCredential: the retry after a usage limit is
// of class usage_limit (the seed rules class the text retryable) and names
// the credential that hit the limit, by ID only.
func TestUsageLimitRetryNamesTheCredential(t *testing.T) {
	bubble(t, func(t *testing.T) {
		store, err := credentials.NewMemoryCredentials(nil,
			policy.Credential{ID: "A", Provider: "scripted", Type: "api_key", Secret: "env:KEY_A"},
			policy.Credential{ID: "C", Provider: "scripted", Type: "api_key", Secret: "env:KEY_C"})
		if err != nil {
			t.Fatal(err)
		}
		agent := scripted.New(scripted.Script{Calls: []scripted.Call{fail(usageLimit), fail(usageLimit), ok("done")}})
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithCredentials(store),
			session.WithSessionID(sessionsAt(0, 2, 1)[0]))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []events.Event{
			events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 0, ErrorMessage: usageLimit,
				ErrorClass: classify.UsageLimit, Provider: "scripted", Model: "scripted-1", Credential: "A"},
			events.AutoRetryStart{Attempt: 2, MaxAttempts: 3, DelayMs: 4000, ErrorMessage: usageLimit,
				ErrorClass: classify.UsageLimit, Provider: "scripted", Model: "scripted-1", Credential: "C"},
			events.AutoRetryEnd{Success: true, Attempt: 2, Outcome: events.RetryRecovered},
		}, retryEvents(rec))
	})
}

// waitRetrying waits, in the bubble, until s waits out a backoff.
func waitRetrying(t *testing.T, s *session.Session) {
	t.Helper()
	for range 1000 {
		synctest.Wait()
		if s.Status().State == "backoff" {
			return
		}
	}
	t.Fatal("the session never waited out a backoff")
}

// TestTurnSettledNamesTheClass: a turn that a provider's error failed names
// that error's class; one that failed otherwise names none.
func TestTurnSettledNamesTheClass(t *testing.T) {
	noCompaction := policy.DefaultConfig()
	noCompaction.Compaction.Enabled = false
	cases := []struct {
		name  string
		calls []scripted.Call
		opts  []session.Option
		class classify.Class
		err   error
	}{
		{"fatal", []scripted.Call{fail("400 invalid request")}, nil, classify.Fatal, policy.ErrProvider},
		{"overflow unrecovered", []scripted.Call{fail("prompt is too long: 213462 tokens > 200000 maximum")},
			[]session.Option{session.WithConfig(noCompaction)}, classify.Overflow, policy.ErrOverflow},
		{"start failed", []scripted.Call{{Refuse: "no route to host"}}, nil, classify.None, policy.ErrStartFailed},
		{"success", []scripted.Call{ok("fine")}, nil, classify.None, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, _, rec := newSession(t, c.calls, c.opts...)
				err := s.Prompt(context.Background(), "hi")
				if c.err == nil {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, c.err)
				}
				evs := rec.events()
				assert.Equal(t, events.TurnSettled{Err: err, ErrorClass: c.class}, evs[len(evs)-1])
			})
		})
	}
}
