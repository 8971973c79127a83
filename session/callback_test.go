package session_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// callbackHandler is a slog.Handler that calls back into the session on
// every record, through the session value the record's context holds.
type callbackHandler struct {
	mu   sync.Mutex
	call func(s *session.Session) []error
	errs []error
	nils int // records whose context held no session
}

func (h *callbackHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *callbackHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *callbackHandler) WithGroup(string) slog.Handler            { return h }
func (h *callbackHandler) Handle(ctx context.Context, _ slog.Record) error {
	s := session.FromContext(ctx)
	if s == nil {
		h.mu.Lock()
		h.nils++
		h.mu.Unlock()
		return nil
	}
	errs := h.call(s)
	h.mu.Lock()
	h.errs = append(h.errs, errs...)
	h.mu.Unlock()
	return nil
}

func (h *callbackHandler) results() (errs []error, nils int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...), h.nils
}

// everyWaitingCall calls every method of s that waits, and returns their
// errors.
func everyWaitingCall(s *session.Session) []error {
	_ = s.Config()
	_ = s.Messages()
	s.AbortRetry()
	s.AbortCompaction()
	s.SetAutoRetryEnabled(true)
	s.Abort()
	s.Flush()
	_, snapErr := s.Snapshot()
	_, compactErr := s.Compact(context.Background(), "")
	return []error{snapErr, compactErr, s.Prompt(context.Background(), "from the handler"), s.Close()}
}

// A log handler that calls back into the session, through the value its
// record's context holds, never waits for ever: a line logged while the
// session's own goroutine, the agent's or the summarizer's waits for the
// handler gets ErrObserverCall from the methods that would wait for it,
// and the session goes on.
func TestLogHandlerCallingBackOnTheLoopGetsAnError(t *testing.T) {
	for _, who := range []string{"observer", "agent"} {
		t.Run(who, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				h := &callbackHandler{call: everyWaitingCall}
				opts := []session.Option{session.WithLogger(slog.New(h))}
				var agent session.Agent = playing(answer(assistant("stop", "fine")), answer(assistant("stop", "again")))
				if who == "observer" {
					opts = append(opts, session.WithObserver(panicObserver{}))
				} else {
					agent = playing(func(context.Context, session.RunRequest, func(events.Event)) error { panic("agent broke") },
						answer(assistant("stop", "again")))
				}
				s, _ := newSessionOn(t, agent, opts...)
				_ = s.Prompt(context.Background(), "hi") // a panicking agent fails the turn
				errs, nils := h.results()
				require.NotEmpty(t, errs, "the handler was called")
				assert.Zero(t, nils, "every record's context holds the session")
				for _, err := range errs {
					require.ErrorIs(t, err, session.ErrObserverCall)
				}
				h.mu.Lock()
				h.call = func(*session.Session) []error { return nil }
				h.mu.Unlock()
				require.NoError(t, s.Prompt(context.Background(), "the session goes on"))
				require.NoError(t, s.Close())
			})
		})
	}
}

// A log handler told of a subscriber's panic may Flush and Close the
// session through the value its record's context holds: they do not wait
// for the subscriber, which waits for the handler, and Close closes.
func TestLogHandlerClosesOnASubscribersPanic(t *testing.T) {
	bubble(t, func(t *testing.T) {
		h := &callbackHandler{call: func(s *session.Session) []error {
			s.Flush()
			return []error{s.Close()}
		}}
		s, _ := newSessionOn(t, playing(answer(assistant("stop", "fine"))), session.WithLogger(slog.New(h)))
		var mu sync.Mutex
		var slowGot []events.Event
		s.Subscribe(func(ev events.Event) {
			time.Sleep(time.Second)
			mu.Lock()
			slowGot = append(slowGot, ev)
			mu.Unlock()
		})
		s.Subscribe(func(ev events.Event) {
			if _, ok := ev.(events.AgentEnd); ok {
				panic("subscriber broke")
			}
		})
		_ = s.Prompt(context.Background(), "hi") // the Close may abort it
		errs, nils := h.results()
		for errs == nil && nils == 0 {
			time.Sleep(time.Second) // the handler runs when the subscriber gets there
			errs, nils = h.results()
		}
		assert.Zero(t, nils)
		require.Equal(t, []error{nil}, errs)
		require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, slowGot)
		assert.IsType(t, events.TurnSettled{}, slowGot[len(slowGot)-1], "the other subscriber received everything before Close returned")
	})
}

// A subscriber's function that waits for a goroutine of its own, which
// flushes and closes the session through the value the subscriber was
// handed, returns: those calls are the subscriber's wherever they are made.
func TestSubscribersHelperGoroutineFlushesAndCloses(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{ok("answer")})
		var once sync.Once
		done := make(chan struct{})
		s.SubscribeSession(func(in *session.Session, ev events.Event) {
			if _, ok := ev.(events.MessageEnd); !ok {
				return
			}
			once.Do(func() {
				helper := make(chan error)
				go func() {
					in.Flush()
					helper <- in.Close()
				}()
				assert.NoError(t, <-helper)
				close(done)
			})
		})
		err := s.Prompt(context.Background(), "hi")
		if err != nil {
			require.ErrorIs(t, err, policy.ErrAborted)
		}
		<-done
		require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
	})
}

// A Flush from outside keeps its contract while a subscriber is inside a
// Flush of its own: it returns only once that subscriber too has received
// every event emitted before it.
func TestOutsideFlushWaitsForASubscriberInsideFlush(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{ok("answer")})
		s.Subscribe(func(events.Event) { time.Sleep(time.Second) }) // slow
		var mu sync.Mutex
		var got []events.Event
		s.SubscribeSession(func(in *session.Session, ev events.Event) {
			if _, ok := ev.(events.AgentEnd); ok {
				in.Flush() // waits for the slow one
			}
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush()
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, got)
		assert.IsType(t, events.TurnSettled{}, got[len(got)-1], "the outside Flush waited for the flushing subscriber")
	})
}

// passObserver hands back the contexts it is given.
type passObserver struct{}

func (passObserver) StartTurn(ctx context.Context, _ string, _ policy.Model) context.Context {
	return ctx
}

func (passObserver) StartRun(ctx context.Context, _ session.RunRequest) (context.Context, func(error)) {
	return ctx, nil
}
func (passObserver) Observe(context.Context, events.Event) {}

// The session value an observer's context holds, which refuses to wait for
// the session's goroutine, never reaches the agent through the contexts the
// observer hands back: an agent may call the session from its run.
func TestObserversSessionDoesNotReachTheAgent(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var seen []*session.Session
		var cfgErr error
		agent := playing(func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
			in := session.FromContext(ctx)
			seen = append(seen, in)
			if in != nil {
				if _, err := in.Snapshot(); err != nil {
					cfgErr = err
				}
			}
			return answer(assistant("stop", "fine"))(ctx, req, emit)
		})
		s, _ := newSessionOn(t, agent, session.WithObserver(passObserver{}))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []*session.Session{nil}, seen)
		assert.NoError(t, cfgErr)
		if errors.Is(cfgErr, session.ErrObserverCall) {
			t.Error("the agent was handed the observers' session")
		}
	})
}

// Two Flushes at once on the value one subscriber is handed (its function's
// and a helper goroutine's) keep it counted as flushing until both have
// returned: when the first returns, another subscriber's Flush still does
// not wait for it, since its function waits, in the second, for that other
// subscriber. A flag that the first Flush cleared made the two wait for
// each other for ever.
func TestTwoFlushesOnOneHandedValue(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := playing(func(_ context.Context, _ session.RunRequest, emit func(events.Event)) error {
			m := assistant("stop", "fine")
			emit(events.AgentStart{})
			time.Sleep(time.Second)
			emit(events.CallStart{}) // t=1s
			time.Sleep(time.Second)
			emit(events.MessageStart{Message: m}) // t=2s
			time.Sleep(10 * time.Second)
			emit(events.MessageEnd{Message: m})
			emit(events.CallEnd{})
			emit(events.AgentEnd{})
			return nil
		})
		s, _ := newSessionOn(t, agent)
		helperDone := make(chan struct{})
		var yFlushed atomic.Bool
		// x flushes from a helper at t=0 (first flush: waits for y, slow on
		// agent_start until t=3s), then from its own function at t=2.5s
		// (second flush: waits for y to get past message_start).
		s.SubscribeSession(func(in *session.Session, ev events.Event) {
			if _, ok := ev.(events.AgentStart); !ok {
				return
			}
			go func() { in.Flush(); close(helperDone) }()
			time.Sleep(2500 * time.Millisecond)
			in.Flush()
			<-helperDone
		})
		// y, past the first flush's barrier at t=3s, flushes at t=3.1s,
		// handling turn_start, ahead of the second flush's barrier.
		s.SubscribeSession(func(in *session.Session, ev events.Event) {
			switch ev.(type) {
			case events.AgentStart:
				time.Sleep(3 * time.Second)
			case events.CallStart:
				time.Sleep(100 * time.Millisecond)
				select {
				case <-helperDone:
				default:
					t.Error("the first flush had not returned when y flushed")
				}
				in.Flush()
				yFlushed.Store(true)
			}
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush() // waits for both: for ever if they wait for each other
		assert.True(t, yFlushed.Load())
	})
}
