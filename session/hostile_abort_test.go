package session_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/states"
)

// The tests of this file stop a session at every point of a turn, as a
// hostile embedder would, and check what Abort's and Close's doc comments
// and docs/session.md promise:
//
//   - Abort: "Nothing the cancelled run still reports can start a retry, a
//     compaction or a continuation. Abort returns when the session is quiet
//     (no run and no compaction in flight)", and the turn fails with
//     ErrAborted.
//   - docs/session.md: "the session emits the AgentEnd an agent left out"
//     (every agent_start has its agent_end), and "The last event of every
//     turn is TurnSettled".

// waitCtx ends a run once its context is done, after emitting before; it
// then emits after (an agent that goes on reporting once cancelled).
func waitCtx(before, after []events.Event, ret func(ctx context.Context) error) runFunc {
	return func(ctx context.Context, _ session.RunRequest, emit func(events.Event)) error {
		for _, ev := range before {
			emit(ev)
		}
		<-ctx.Done()
		for _, ev := range after {
			emit(ev)
		}
		if ret == nil {
			return nil
		}
		return ret(ctx)
	}
}

func causeOf(ctx context.Context) error { return context.Cause(ctx) }

// abortPoint is one moment of a turn at which the caller stops it.
type abortPoint struct {
	name  string
	plays []runFunc
	opts  []session.Option
	// warm: a first successful turn before the one aborted.
	warm bool
	// wait is fake time to let pass after the prompt before stopping.
	wait time.Duration
	// wantState is what must hold just before the stop.
	wantState states.State
}

// reach starts a session on the point's agent, sends the prompt the point
// stops (with ctx), and lets the point's time pass: the session is at the
// point.
func (p abortPoint) reach(t *testing.T, ctx context.Context) (*session.Session, *recorder, *runs, <-chan error) {
	t.Helper()
	plays := p.plays
	if p.warm {
		plays = append([]runFunc{answer(assistant("stop", "first answer"))}, plays...)
	}
	agent := playing(plays...)
	s, rec := newSessionOn(t, agent, p.opts...)
	if p.warm {
		warmUp(t, s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Prompt(ctx, "second question, long enough to compact") }()
	time.Sleep(p.wait)
	synctest.Wait()
	return s, rec, agent, done
}

func abortPoints() []abortPoint {
	msgErr := assistant("error", service503)
	aborted := assistant("aborted", "")
	aborted.StopReason = "aborted"
	over := assistant("stop", "a long answer")
	over.Usage = usage(190_000)
	// The first summary waits for its context; later ones answer at once.
	slowSum := func() session.Option {
		var once sync.Once
		return session.WithSummarizer(summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
			first := false
			once.Do(func() { first = true })
			if first {
				<-ctx.Done()
				return policy.Summary{}, context.Cause(ctx)
			}
			return policy.Summary{Text: "summary"}, nil
		}))
	}
	return []abortPoint{
		{name: "before agent_start", plays: []runFunc{waitCtx(nil, nil, causeOf)}, wantState: states.Idle},
		{name: "after agent_start", plays: []runFunc{waitCtx([]events.Event{events.AgentStart{}}, nil, causeOf)}},
		{name: "between message_start and message_end", plays: []runFunc{waitCtx(
			[]events.Event{events.AgentStart{}, events.CallStart{}, events.MessageStart{Message: assistant("stop", "")}},
			[]events.Event{events.MessageEnd{Message: aborted}, events.CallEnd{}, events.AgentEnd{}}, nil)}},
		{name: "between message_start and message_end, agent returns its cause", plays: []runFunc{waitCtx(
			[]events.Event{events.AgentStart{}, events.CallStart{}, events.MessageStart{Message: assistant("stop", "")}},
			nil, causeOf)}},
		{name: "after an error message_end before agent_end", plays: []runFunc{tail(msgErr)}},
		{name: "after an overflow message_end before agent_end", plays: []runFunc{tail(assistant("error", tooLong))}, opts: []session.Option{smallKeep()}, warm: true},
		{name: "after a usage-over-threshold message_end before agent_end", plays: []runFunc{tail(over)}, opts: []session.Option{smallKeep()}, warm: true},
		{name: "after agent_end before Run returns", plays: []runFunc{waitCtx(
			[]events.Event{events.AgentStart{}, events.CallStart{}, events.MessageStart{Message: msgErr}, events.MessageEnd{Message: msgErr}, events.CallEnd{}, events.AgentEnd{}},
			nil, nil)}},
		{name: "after agent_end, then more events and a second agent_end", plays: []runFunc{waitCtx(
			[]events.Event{events.AgentStart{}, events.MessageStart{Message: msgErr}, events.MessageEnd{Message: msgErr}, events.AgentEnd{}},
			[]events.Event{events.MessageStart{Message: msgErr}, events.MessageEnd{Message: msgErr}, events.AgentEnd{}}, nil)}},
		{name: "during a backoff", plays: []runFunc{answer(msgErr)}, wait: time.Second, wantState: states.Backoff},
		{name: "during a continuation", plays: []runFunc{answer(msgErr), waitCtx([]events.Event{events.AgentStart{}}, nil, causeOf)}, wait: 3 * time.Second},
		{name: "during an overflow compaction", plays: []runFunc{answer(assistant("error", tooLong))},
			opts: []session.Option{smallKeep(), slowSum()}, warm: true, wantState: states.Compacting},
		{name: "during a threshold compaction", plays: []runFunc{answer(over)},
			opts: []session.Option{smallKeep(), slowSum()}, warm: true, wantState: states.Compacting},
	}
}

// checkStopped checks what must hold once a stopped turn has settled.
func checkStopped(t *testing.T, s *session.Session, rec *recorder, agent *runs, calls int) {
	t.Helper()
	time.Sleep(time.Hour)
	assert.Equal(t, calls, agent.calls(), "no run after the stop")
	evs := rec.events()
	starts, ends := 0, 0
	for _, ev := range evs {
		switch ev.(type) {
		case events.AgentStart:
			starts++
		case events.AgentEnd:
			ends++
		}
	}
	assert.Equal(t, starts, ends, "every agent_start has one agent_end")
	if assert.NotEmpty(t, evs) {
		_, last := evs[len(evs)-1].(events.TurnSettled)
		assert.True(t, last, "turn_settled is the last event, got %T", evs[len(evs)-1])
	}
	for _, l := range rec.recovery() {
		switch l {
		case `retry_end fail 1 "Retry cancelled"`, "compaction_end aborted", "compaction_start overflow", "compaction_start threshold",
			`retry_start 1/3 2000ms "503 Service Unavailable"`:
		default:
			t.Errorf("recovery event after the stop: %s", l)
		}
	}
}

// TestHostileAbortAtEveryPoint: Abort at each point of a turn returns with
// the session idle (Abort: "returns when the session is quiet"), the turn
// failed with ErrAborted, nothing started afterwards, every agent_start
// ended, turn_settled last, and the session usable for the next prompt.
func TestHostileAbortAtEveryPoint(t *testing.T) {
	for _, p := range abortPoints() {
		t.Run(p.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, rec, agent, done := p.reach(t, context.Background())
				if p.wantState != "" {
					require.Equal(t, p.wantState, s.Status().State, "the point reached")
				}
				calls := agent.calls()
				s.Abort()
				assert.Equal(t, states.Idle, s.Status().State)
				assert.False(t, s.Status().Streaming)
				assert.False(t, s.Status().Compacting)
				assert.Zero(t, s.Status().Attempt)
				require.ErrorIs(t, <-done, policy.ErrAborted)
				checkStopped(t, s, rec, agent, calls)
				require.NoError(t, s.Prompt(context.Background(), "again"), "the session is usable")
			})
		})
	}
}

// TestHostileAbortTwiceConcurrently: two Aborts at once both return quiet,
// at every point (Abort is "safe to call from any goroutine").
func TestHostileAbortTwiceConcurrently(t *testing.T) {
	for _, p := range abortPoints() {
		t.Run(p.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, rec, agent, done := p.reach(t, context.Background())
				calls := agent.calls()
				var wg sync.WaitGroup
				for range 3 {
					wg.Go(func() {
						s.Abort()
						assert.Equal(t, states.Idle, s.Status().State)
					})
				}
				wg.Wait()
				require.ErrorIs(t, <-done, policy.ErrAborted)
				checkStopped(t, s, rec, agent, calls)
			})
		})
	}
}

// TestHostileCloseAtEveryPoint: Close at each point returns, the Prompt in
// flight returns ErrAborted (Close "aborts whatever is in flight, waits
// until the session is quiet, and stops it"), every agent_start has its
// agent_end and turn_settled is the last event subscribers get.
func TestHostileCloseAtEveryPoint(t *testing.T) {
	for _, p := range abortPoints() {
		t.Run(p.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, rec, agent, done := p.reach(t, context.Background())
				calls := agent.calls()
				require.NoError(t, s.Close())
				require.ErrorIs(t, <-done, policy.ErrAborted)
				checkStopped(t, s, rec, agent, calls)
				assert.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
			})
		})
	}
}

// TestHostilePromptContextAtEveryPoint: a Prompt whose context ends at each
// point returns an error matching ErrAborted and the context's cause
// (Prompt: "When ctx is done first, the turn is aborted and Prompt returns
// once it is quiet, with an error matching ErrAborted and ctx's cause").
func TestHostilePromptContextAtEveryPoint(t *testing.T) {
	errMine := errors.New("caller gave up")
	for _, p := range abortPoints() {
		t.Run(p.name, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(context.Background())
				s, rec, agent, done := p.reach(t, ctx)
				calls := agent.calls()
				cancel(errMine)
				err := <-done
				require.ErrorIs(t, err, policy.ErrAborted)
				require.ErrorIs(t, err, errMine)
				assert.Equal(t, states.Idle, s.Status().State)
				checkStopped(t, s, rec, agent, calls)
			})
		})
	}
}
