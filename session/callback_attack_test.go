package session_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// callEverything calls every method of s, Close last when closing, and
// returns the errors of those that return one.
func callEverything(s *session.Session, closing bool) []error {
	_, _, _, _ = s.ID(), s.Model(), s.Status(), s.History()
	_, _, _, _ = s.Status().RetryEnabled, s.Status().CompactionEnabled, s.Status().Retrying, s.Status().Attempt
	_, _, _, _ = s.Status().State, s.Status().Streaming, s.Status().Compacting, s.Status().MessageCount
	s.Subscribe(func(events.Event) {})()
	s.SubscribeSession(func(*session.Session, events.Event) {})()
	_, _ = s.Config(), s.Messages()
	s.SetAutoRetryEnabled(true)
	s.SetAutoCompactionEnabled(true)
	s.AbortRetry()
	s.AbortCompaction()
	_, snapErr := s.Snapshot()
	_, compactErr := s.Compact(context.Background(), "")
	errs := []error{snapErr, compactErr, s.Prompt(context.Background(), "called back")}
	settled, err := s.Send("called back")
	if settled != nil {
		err = <-settled
	}
	errs = append(errs, err)
	s.Abort()
	s.Flush()
	if closing {
		errs = append(errs, s.Close())
	}
	return errs
}

// callbacks collects what the callbacks' calls returned.
type callbacks struct {
	mu   sync.Mutex
	on   bool
	errs []error
	nils int // calls whose context held no session
}

func (c *callbacks) enabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on
}

func (c *callbacks) set(on bool) {
	c.mu.Lock()
	c.on = on
	c.mu.Unlock()
}

// call calls every method on the session ctx holds, then panics.
func (c *callbacks) call(ctx context.Context, closing bool) {
	if !c.enabled() {
		return
	}
	s := session.FromContext(ctx)
	if s == nil {
		c.mu.Lock()
		c.nils++
		c.mu.Unlock()
		return
	}
	errs := callEverything(s, closing)
	c.mu.Lock()
	c.errs = append(c.errs, errs...)
	c.mu.Unlock()
	panic("the callback broke after calling back")
}

func (c *callbacks) results() ([]error, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...), c.nils
}

// panickingCaller is an observer that calls every method back, then
// panics, in each of its calls.
type panickingCaller struct{ *callbacks }

func (o panickingCaller) StartTurn(ctx context.Context, _ string, _ policy.Model) context.Context {
	o.call(ctx, true)
	return ctx
}

func (o panickingCaller) StartRun(ctx context.Context, _ session.RunRequest) (context.Context, func(error)) {
	o.call(ctx, true)
	return ctx, func(error) { o.call(ctx, true) }
}

func (o panickingCaller) Observe(ctx context.Context, _ events.Event) { o.call(ctx, true) }

// callingHandler is a log handler that calls every method back, then
// panics, on each record.
type callingHandler struct {
	*callbacks
	closing bool
}

func (h callingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h callingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h callingHandler) WithGroup(string) slog.Handler            { return h }
func (h callingHandler) Handle(ctx context.Context, _ slog.Record) error {
	h.call(ctx, h.closing)
	return nil
}

// An observer and a log handler that call every method of the session
// through the value their context holds, and then panic, never wait for
// ever: every call that would wait for the session's goroutine returns
// ErrObserverCall, the panics are contained, the turn and the next one end
// as if the callbacks had done nothing, and Close closes.
func TestObserverAndLogHandlerCallEverythingThenPanic(t *testing.T) {
	bubble(t, func(t *testing.T) {
		obs := &callbacks{on: true}
		logs := &callbacks{on: true}
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done"), ok("again")},
			session.WithObserver(panickingCaller{obs}), session.WithLogger(slog.New(callingHandler{logs, true})))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, "retry_end ok 1"}, rec.recovery())
		require.NoError(t, s.Prompt(context.Background(), "again"))
		for name, c := range map[string]*callbacks{"observer": obs, "log handler": logs} {
			errs, nils := c.results()
			require.NotEmpty(t, errs, "the %s called back", name)
			assert.Zero(t, nils, "every %s call is handed the session", name)
			for _, err := range errs {
				require.ErrorIs(t, err, session.ErrObserverCall, "from the %s", name)
			}
		}
		obs.set(false)
		logs.set(false)
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
	})
}

// A log handler told of a subscriber's panic may call every method of the
// session through the value its record's context holds, Flush and then
// Close included, and then panic itself: every call returns, the other
// subscribers received everything before Close returned, and the session
// is closed.
func TestLogHandlerOfASubscribersPanicCallsEverything(t *testing.T) {
	for _, handed := range []bool{false, true} {
		t.Run(map[bool]string{false: "Subscribe", true: "SubscribeSession"}[handed], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				logs := &callbacks{on: true}
				s, _ := newSessionOn(t, playing(answer(assistant("stop", "fine"))), session.WithLogger(slog.New(callingHandler{logs, true})))
				var mu sync.Mutex
				var slowGot []events.Event
				s.Subscribe(func(ev events.Event) {
					time.Sleep(time.Second)
					mu.Lock()
					slowGot = append(slowGot, ev)
					mu.Unlock()
				})
				var once sync.Once
				breaks := func(ev events.Event) {
					if _, ok := ev.(events.AgentEnd); ok {
						once.Do(func() { panic("subscriber broke") })
					}
				}
				if handed {
					s.SubscribeSession(func(_ *session.Session, ev events.Event) { breaks(ev) })
				} else {
					s.Subscribe(breaks)
				}
				err := s.Prompt(context.Background(), "hi")
				if err != nil {
					require.ErrorIs(t, err, policy.ErrAborted)
				}
				var errs []error
				for {
					errs, _ = logs.results()
					if len(errs) > 0 {
						break
					}
					time.Sleep(time.Second) // the handler runs when the subscriber gets there
				}
				_, nils := logs.results()
				assert.Zero(t, nils)
				for _, err := range errs {
					assert.False(t, errors.Is(err, session.ErrObserverCall), "a subscriber's line is not the loop's: %v", err)
				}
				require.NoError(t, errs[len(errs)-1], "Close through the subscriber's value")
				require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				require.NotEmpty(t, slowGot)
				assert.IsType(t, events.TurnSettled{}, slowGot[len(slowGot)-1], "the other subscriber received everything before Close returned")
			})
		})
	}
}

// Subscribers that flush through their values on every event, each
// waiting for the others, some panicking after their Flush, while the
// caller flushes from outside, closes from two goroutines and flushes
// again as it closes, and one subscriber closes from inside: every call
// returns, and no subscriber is called once the first Close has returned.
func TestSubscribersFlushingEachOtherWhileClosing(t *testing.T) {
	for round := range 4 {
		t.Run("", func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, _, _ := newSession(t, []scripted.Call{fail(service503), slow(ok("done"), 500), ok("again")})
				var closed atomic.Bool
				var late atomic.Int32
				for i := range 3 {
					n := 0
					s.SubscribeSession(func(in *session.Session, ev events.Event) {
						if closed.Load() {
							late.Add(1)
						}
						n++
						time.Sleep(time.Duration(i*100+round*37) * time.Millisecond)
						in.Flush()
						if _, ok := ev.(events.TurnSettled); ok && i == round%3 {
							assert.NoError(t, in.Close())
						}
						if n%3 == i {
							panic("a subscriber broke after its Flush")
						}
					})
				}
				outside := make(chan struct{})
				go func() {
					defer close(outside)
					for range 5 {
						s.Flush()
						time.Sleep(300 * time.Millisecond)
					}
				}()
				err := s.Prompt(context.Background(), "hi")
				if err != nil {
					require.ErrorIs(t, err, policy.ErrAborted)
				}
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						assert.NoError(t, s.Close())
						closed.Store(true)
					})
				}
				wg.Go(func() { s.Flush() })
				wg.Wait()
				<-outside
				synctest.Wait()
				assert.Zero(t, late.Load(), "a subscriber called after Close returned")
				require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
			})
		})
	}
}

// The session a callback is handed never reaches the agent, even when the
// callback passes its own context to Prompt: a log handler that prompts
// with the context of its record starts a turn whose runs do not see it.
func TestHandedSessionNeverReachesTheAgentThroughPrompt(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []*session.Session
		agent := playing(answer(assistant("stop", "fine")), func(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
			mu.Lock()
			seen = append(seen, session.FromContext(ctx))
			mu.Unlock()
			return answer(assistant("stop", "again"))(ctx, req, emit)
		})
		prompted := make(chan error, 1)
		h := promptingHandler{prompted: prompted}
		s, _ := newSessionOn(t, agent, session.WithLogger(slog.New(h)))
		var once sync.Once
		s.Subscribe(func(ev events.Event) {
			if _, ok := ev.(events.TurnSettled); ok {
				once.Do(func() { panic("subscriber broke") })
			}
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		require.NoError(t, <-prompted)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []*session.Session{nil}, seen, "the agent's context holds no handed session")
	})
}

// promptingHandler prompts, with its record's context, on the session that
// context holds.
type promptingHandler struct{ prompted chan error }

func (h promptingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h promptingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h promptingHandler) WithGroup(string) slog.Handler            { return h }
func (h promptingHandler) Handle(ctx context.Context, _ slog.Record) error {
	h.prompted <- session.FromContext(ctx).Prompt(ctx, "from the handler")
	return nil
}

// A plain subscriber's function that waits for a goroutine calling Flush
// on the session it captured waits as documented (Subscribe): that Flush
// is a call from outside, and waits for the function itself, which is
// why such a subscriber flushes through SubscribeSession's value instead.
func TestCapturedFlushWaitsForTheSubscriber(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{ok("answer")})
		flushed := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		s.Subscribe(func(ev events.Event) {
			if _, ok := ev.(events.AgentEnd); !ok {
				return
			}
			once.Do(func() {
				go func() { s.Flush(); close(flushed) }()
				select {
				case <-flushed:
				case <-release:
				}
			})
		})
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		synctest.Wait()
		select {
		case <-flushed:
			t.Fatal("a Flush on the captured session returned while the subscriber's function waited for it")
		default:
		}
		close(release)
		<-flushed
	})
}

// A nil function subscribes nothing: no delivery goroutine calls it, so no
// panic is recovered and logged for every event, and its unsubscribe does
// nothing, any number of times.
func TestNilSubscriberFunctionSubscribesNothing(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs strings.Builder
		var mu sync.Mutex
		logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))
		s, _, _ := newSession(t, []scripted.Call{ok("answer")}, session.WithLogger(logger))
		stop := s.Subscribe(nil)
		stopSession := s.SubscribeSession(nil)
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Flush()
		synctest.Wait()
		stop()
		stop()
		stopSession()
		require.NoError(t, s.Close())
		mu.Lock()
		defer mu.Unlock()
		assert.Empty(t, logs.String(), "nothing was logged")
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// A subscriber whose function panics, or calls runtime.Goexit, and flushes
// and closes through its value in deferred calls as it unwinds, returns
// from both: the session is closed, the other subscriber received
// everything emitted before, and nothing waits for ever.
func TestSubscriberFlushesAndClosesWhileUnwinding(t *testing.T) {
	for _, how := range []string{"panic", "Goexit"} {
		t.Run(how, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, _, _ := newSession(t, []scripted.Call{ok("answer")})
				var mu sync.Mutex
				var slowGot []events.Event
				s.Subscribe(func(ev events.Event) {
					time.Sleep(time.Second)
					mu.Lock()
					slowGot = append(slowGot, ev)
					mu.Unlock()
				})
				closed := make(chan error, 1)
				var once sync.Once
				s.SubscribeSession(func(in *session.Session, ev events.Event) {
					if _, ok := ev.(events.TurnSettled); !ok {
						return
					}
					once.Do(func() {
						defer func() { closed <- in.Close() }()
						defer in.Flush()
						if how == "panic" {
							panic("the subscriber broke")
						}
						runtime.Goexit()
					})
				})
				require.NoError(t, s.Prompt(context.Background(), "hi"))
				require.NoError(t, <-closed)
				require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
				mu.Lock()
				defer mu.Unlock()
				require.NotEmpty(t, slowGot)
				assert.IsType(t, events.TurnSettled{}, slowGot[len(slowGot)-1])
			})
		})
	}
}
