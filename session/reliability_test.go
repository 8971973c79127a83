package session_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/credentials"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// The tests of this file play agents that misbehave, or callers that act
// at the worst moment. Each names the item of the reliability issue it
// pins.

// runFunc is one run of a hand-written agent.
type runFunc func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error

// runs is an Agent that plays one runFunc per run, in order; once they run
// out, each run answers "ok".
type runs struct {
	mu    sync.Mutex
	plays []runFunc
	count int
}

func playing(plays ...runFunc) *runs { return &runs{plays: plays} }

func (a *runs) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	a.mu.Lock()
	play := answer(assistant("stop", ""))
	if a.count < len(a.plays) {
		play = a.plays[a.count]
	}
	a.count++
	a.mu.Unlock()
	return play(ctx, req, emit)
}

func (a *runs) calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// assistant is a message of the scripted model; an "error" one carries
// text as its error.
func assistant(stop, text string) transcript.Message {
	m := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReason(stop), Provider: "scripted", Model: "scripted-1",
		Usage: &transcript.Usage{Input: 100, Output: 20, TotalTokens: 120}}
	if stop == "error" {
		m.ErrorMessage = text
	} else {
		m.Content = transcript.TextContent(text)
	}
	return m
}

// answer is a well-behaved run that makes one call answered by m.
func answer(m transcript.Message) runFunc {
	return func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
		emit(events.AgentStart{})
		emit(events.CallStart{})
		emit(events.MessageStart{Message: m})
		emit(events.MessageEnd{Message: m})
		emit(events.CallEnd{})
		emit(events.AgentEnd{})
		return nil
	}
}

// tail reports m, then waits for its context before it ends the run: the
// window in which an Abort meets a run whose last message is in.
func tail(m transcript.Message) runFunc {
	return func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
		emit(events.AgentStart{})
		emit(events.CallStart{})
		emit(events.MessageStart{Message: m})
		emit(events.MessageEnd{Message: m})
		emit(events.CallEnd{})
		<-ctx.Done()
		emit(events.AgentEnd{})
		return nil
	}
}

// newSessionOn starts a session on agent with the scripted model.
func newSessionOn(t *testing.T, agent session.Agent, opts ...session.Option) (*session.Session, *recorder) {
	t.Helper()
	opts = append([]session.Option{session.WithModel(scripted.DefaultModel), session.WithSessionID("test-session")}, opts...)
	s, err := session.New(agent, opts...)
	require.NoError(t, err)
	rec := record(s)
	t.Cleanup(func() { s.Close() })
	return s, rec
}

// Item 1: an Abort during the tail of a run (its last message in, agent_end
// not yet) stops everything: the run's error starts no retry, its overflow
// no compaction.
func TestAbortDuringRunTailDecidesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		last transcript.Message
	}{
		{"transient error", assistant("error", service503)},
		{"overflow", assistant("error", tooLong)},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				agent := playing(answer(assistant("stop", "first answer")), tail(c.last))
				s, rec := newSessionOn(t, agent, smallKeep())
				warmUp(t, s)
				done := promptAsync(s, "second question, long enough to compact")
				synctest.Wait()
				s.Abort()
				assert.Equal(t, states.Idle, s.Status().State)
				require.ErrorIs(t, <-done, policy.ErrAborted)
				time.Sleep(time.Minute)
				assert.Equal(t, 2, agent.calls(), "no run after the abort")
				assert.Empty(t, rec.recovery())
				assert.Equal(t, states.Idle, s.Status().State)
			})
		})
	}
}

// Item 1, in a chain: an Abort during a continuation's tail ends the chain
// as cancelled, and its error is not retried.
func TestAbortDuringContinuationTailCancelsChain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(answer(assistant("error", service503)), tail(assistant("error", service503)))
		s, rec := newSessionOn(t, agent)
		done := promptAsync(s, "hi")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		s.Abort()
		require.ErrorIs(t, <-done, policy.ErrAborted)
		time.Sleep(time.Minute)
		assert.Equal(t, 2, agent.calls())
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, `retry_end fail 1 "Retry cancelled"`}, rec.recovery())
	})
}

// Item 2: Abort returns at once even when what the aborted run reported
// would have started a slow compaction: it starts none.
func TestAbortDoesNotWaitForWorkStartedAfterIt(t *testing.T) {
	for _, c := range []struct {
		name string
		sum  session.Summarizer
	}{
		{"summarizer honouring its context, slow", summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
			select {
			case <-time.After(time.Minute):
				return policy.Summary{Text: "late"}, nil
			case <-ctx.Done():
				return policy.Summary{}, context.Cause(ctx)
			}
		})},
		{"summarizer that never returns", summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) {
			t.Error("the summarizer was called")
			return policy.Summary{}, errors.New("unreachable")
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				over := assistant("stop", "a long answer")
				over.Usage = usage(190_000) // over the 170,000 threshold
				agent := playing(answer(assistant("stop", "first answer")), tail(over))
				s, rec := newSessionOn(t, agent, smallKeep(), session.WithSummarizer(c.sum))
				warmUp(t, s)
				done := promptAsync(s, "second question, long enough to compact")
				synctest.Wait()
				start := time.Now()
				s.Abort()
				assert.Zero(t, time.Since(start), "Abort returned at once")
				require.ErrorIs(t, <-done, policy.ErrAborted)
				assert.Empty(t, rec.recovery())
			})
		})
	}
}

// Item 3: a Prompt whose context ends aborts the run; an agent that
// returns the context's cause without ending the run is not retried.
func TestPromptDeadlineAbortsRunNotRetried(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
			emit(events.AgentStart{})
			emit(events.MessageStart{Message: assistant("", "")})
			<-ctx.Done()
			return context.Cause(ctx)
		})
		s, rec := newSessionOn(t, agent)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		err := s.Prompt(ctx, "hi")
		require.ErrorIs(t, err, policy.ErrAborted)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		time.Sleep(time.Minute)
		assert.Equal(t, 1, agent.calls())
		assert.Empty(t, rec.recovery())
		assert.Equal(t, []string{"agent_start", "agent_end"}, rec.lines(), "the session ends the run the agent left open")
	})
}

// Item 4: Compact during a plain run is busy and leaves the run alone.
func TestCompactDuringRunIsBusy(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), slow(ok("done"), 5000)}, smallKeep())
		warmUp(t, s)
		done := promptAsync(s, "second question")
		time.Sleep(time.Second)
		_, err := s.Compact(context.Background(), "")
		require.ErrorIs(t, err, policy.ErrBusy)
		require.NoError(t, <-done)
		assert.Contains(t, rec.lines(), "message stop")
		assert.NotContains(t, rec.lines(), "message aborted")
	})
}

// Item 4: Compact during a retry chain's wait ends the chain as cancelled,
// then compacts.
func TestCompactDuringBackoffCancelsChainThenCompacts(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), fail(service503)}, smallKeep())
		warmUp(t, s)
		done := promptAsync(s, "second question")
		time.Sleep(time.Second)
		require.Equal(t, states.Backoff, s.Status().State)
		res, err := s.Compact(context.Background(), "")
		require.NoError(t, err)
		assert.NotEmpty(t, res.Summary)
		require.ErrorIs(t, <-done, policy.ErrRetryCancelled)
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, `retry_end fail 1 "Retry cancelled"`}, rec.recovery())
		assert.Equal(t, states.Idle, s.Status().State)
		assert.Equal(t, transcript.RoleSummary, s.Messages()[0].Role)
	})
}

// Item 8: a run that made no model call (agent_start, agent_end, nothing
// between) could not start, for the user's run and for a continuation.
func TestRunWithoutAssistantMessageCouldNotStart(t *testing.T) {
	empty := func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
		emit(events.AgentStart{})
		emit(events.AgentEnd{})
		return nil
	}
	t.Run("user run", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			s, _ := newSessionOn(t, playing(empty))
			err := s.Prompt(context.Background(), "hi")
			require.ErrorIs(t, err, policy.ErrStartFailed)
			assert.ErrorContains(t, err, "the run produced no assistant message")
		})
	})
	t.Run("continuation", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			agent := playing(answer(assistant("error", service503)), empty)
			s, rec := newSessionOn(t, agent)
			err := s.Prompt(context.Background(), "hi")
			require.ErrorIs(t, err, policy.ErrStartFailed)
			assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`,
				`retry_end fail 1 "the run produced no assistant message"`}, rec.recovery())
			assert.Equal(t, 2, agent.calls())
		})
	})
}

// Item 9: a run that fails after agent_start but before any model call
// could not start: a continuation ends its chain, it is not retried.
func TestFailureBeforeModelCallIsStartFailure(t *testing.T) {
	fetchFailed := func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
		emit(events.AgentStart{})
		return errors.New("fetch failed")
	}
	t.Run("continuation", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			agent := playing(answer(assistant("error", service503)), fetchFailed, fetchFailed, fetchFailed)
			s, rec := newSessionOn(t, agent)
			err := s.Prompt(context.Background(), "hi")
			require.ErrorIs(t, err, policy.ErrStartFailed)
			assert.ErrorContains(t, err, "fetch failed")
			assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, `retry_end fail 1 "fetch failed"`}, rec.recovery())
			assert.Equal(t, 2, agent.calls())
		})
	})
	t.Run("user run", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			agent := playing(fetchFailed, fetchFailed)
			s, rec := newSessionOn(t, agent)
			require.ErrorIs(t, s.Prompt(context.Background(), "hi"), policy.ErrStartFailed)
			assert.Equal(t, 1, agent.calls())
			assert.Empty(t, rec.recovery())
			assert.Equal(t, []string{"agent_start", "agent_end"}, rec.lines())
		})
	})
}

// Item 11: a usage limit whose hint is over the cap switches to the free
// credential first (and retries at once); only without a switch does the
// hint end the chain. The key is blocked either way.
func TestUsageLimitHintOverCapSwitchesFirst(t *testing.T) {
	const text = "429 usage limit reached; retry-after: 3600"
	cfg := policy.DefaultConfig()
	cfg.Retry.HonorRetryAfter = true
	cfg.Retry.MaxDelayMs = 60_000
	t.Run("a free credential", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			store, err := credentials.NewMemoryCredentials(nil, twoKeys()...)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := store.Current("scripted", "test-session")
			s, _, rec := newSession(t, []scripted.Call{fail(text), ok("done")}, session.WithCredentials(store), session.WithConfig(cfg))
			start := time.Now()
			require.NoError(t, s.Prompt(context.Background(), "hi"))
			assert.Zero(t, time.Since(start))
			assert.Equal(t, []string{`retry_start 1/3 0ms "` + text + `"`, "retry_end ok 1"}, rec.recovery())
			assert.Equal(t, start.Add(time.Hour), store.BlockedUntil("scripted", first.ID))
		})
	})
	t.Run("no free credential", func(t *testing.T) {
		bubble(t, func(t *testing.T) {
			store, err := credentials.NewMemoryCredentials(nil, policy.Credential{ID: "only", Provider: "scripted", Type: "api_key"})
			if err != nil {
				t.Fatal(err)
			}
			s, _, rec := newSession(t, []scripted.Call{fail(text)}, session.WithCredentials(store), session.WithConfig(cfg))
			start := time.Now()
			require.ErrorIs(t, s.Prompt(context.Background(), "hi"), policy.ErrExhausted)
			assert.Empty(t, rec.recovery())
			assert.Equal(t, start.Add(time.Hour), store.BlockedUntil("scripted", "only"), "blocked all the same")
		})
	})
}

// Item 15: a panicking agent does not kill the process: the panic is the
// run's fatal error (never retried, whatever it says), logged with its
// stack, and the session goes on.
func TestAgentPanicIsFatalRunError(t *testing.T) {
	for _, c := range []struct {
		name string
		run  runFunc
	}{
		{"before anything", func(context.Context, session.RunRequest, func(events.Event)) error {
			panic("503 overloaded")
		}},
		{"mid-run", func(_ context.Context, _ session.RunRequest, emit func(events.Event)) error {
			emit(events.AgentStart{})
			emit(events.MessageStart{Message: assistant("", "")})
			panic(errors.New("503 overloaded"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				var log bytes.Buffer
				var logMu sync.Mutex
				logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &log}, nil))
				agent := playing(c.run)
				s, rec := newSessionOn(t, agent, session.WithLogger(logger))
				err := s.Prompt(context.Background(), "hi")
				require.ErrorIs(t, err, policy.ErrProvider)
				assert.ErrorContains(t, err, "the agent panicked: 503 overloaded")
				assert.Empty(t, rec.recovery(), "never retried")
				assert.Equal(t, 1, agent.calls())
				logMu.Lock()
				assert.Contains(t, log.String(), "503 overloaded")
				assert.Contains(t, log.String(), "goroutine", "the stack is logged")
				logMu.Unlock()
				require.NoError(t, s.Prompt(context.Background(), "again"), "the session is still usable")
			})
		})
	}
}

// Item 15: a panicking summarizer fails the compaction, not the process.
func TestSummarizerPanicFailsCompaction(t *testing.T) {
	bubble(t, func(t *testing.T) {
		sum := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) { panic("boom") })
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), ok("done")}, smallKeep(), session.WithSummarizer(sum))
		warmUp(t, s)
		err := s.Prompt(context.Background(), "second question, long enough to compact")
		require.ErrorIs(t, err, policy.ErrOverflow)
		assert.ErrorContains(t, err, "the summarizer panicked: boom")
		assert.Equal(t, []string{"compaction_start overflow",
			`compaction_end failed "Context overflow recovery failed: the summarizer panicked: boom"`}, rec.recovery())
		require.NoError(t, s.Prompt(context.Background(), "again"))
	})
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// When Prompt returns, or a subscriber receives turn_settled, the getters
// already read the settled session: idle, nothing in flight.
func TestStateIsSettledWhenTurnSettles(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, nil)
		var mu sync.Mutex
		var stale []string
		s.Subscribe(func(ev events.Event) {
			if _, ok := ev.(events.TurnSettled); ok && (s.Status().Streaming || s.Status().State != states.Idle) {
				mu.Lock()
				stale = append(stale, "subscriber")
				mu.Unlock()
			}
		})
		for range 1000 {
			require.NoError(t, s.Prompt(context.Background(), "hi"))
			if s.Status().Streaming || s.Status().State != states.Idle {
				mu.Lock()
				stale = append(stale, "Prompt")
				mu.Unlock()
			}
			s.Flush() // the subscriber reads the state before the next turn starts
		}
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, stale)
	})
}

// A setter's change is what the getters read as soon as it returns.
func TestSettersAreReadBackAtOnce(t *testing.T) {
	s, _, _ := newSession(t, nil)
	for i := range 20000 {
		on := i%2 == 0
		s.SetAutoRetryEnabled(on)
		s.SetAutoCompactionEnabled(!on)
		if s.Status().RetryEnabled != on || s.Status().CompactionEnabled == on {
			t.Fatalf("iteration %d: a getter read the value before the setter's", i)
		}
	}
}

// Status is one read: whatever moment it is taken at, its fields agree
// (an idle machine has no chain; retrying means an attempt; a backoff has
// no run in flight).
func TestStatusIsNeverTorn(t *testing.T) {
	bubble(t, func(t *testing.T) {
		calls := []scripted.Call{}
		for range 50 {
			calls = append(calls, fail(service503), fail(service503), ok("done"))
		}
		s, _, _ := newSession(t, calls)
		stop := make(chan struct{})
		var torn []policy.Status
		var readers sync.WaitGroup
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := s.Status()
				if (st.State == states.Idle && st.Retrying) || st.Retrying != (st.Attempt > 0) || (st.State == states.Backoff && st.Streaming) {
					torn = append(torn, st)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		for range 50 {
			require.NoError(t, s.Prompt(context.Background(), "hi"))
		}
		close(stop)
		readers.Wait()
		assert.Empty(t, torn)
	})
}
