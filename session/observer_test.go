package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
)

type ctxKey string

// label is the value a test context carries under key, "-" for none.
func label(ctx context.Context, key ctxKey) string {
	if v, ok := ctx.Value(key).(string); ok {
		return v
	}
	return "-"
}

// logObserver writes down every call it receives, with the labels of the
// context it was called with: "caller" (set by the test around Prompt),
// "turn" (set by StartTurn) and "run" (set by StartRun).
type logObserver struct {
	name string
	mu   sync.Mutex
	log  []string
	evs  []events.Event
	runs int
}

func (o *logObserver) events() []events.Event {
	synctest.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]events.Event(nil), o.evs...)
}

func (o *logObserver) add(format string, a ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, fmt.Sprintf(format, a...))
}

func (o *logObserver) lines() []string {
	synctest.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.log...)
}

func (o *logObserver) StartTurn(ctx context.Context, id string, model policy.Model) context.Context {
	_, hasDeadline := ctx.Deadline()
	o.add("turn caller=%s session=%s model=%s/%s deadline=%v done=%v", label(ctx, "caller"), id, model.Provider, model.ID, hasDeadline, ctx.Done() != nil)
	return context.WithValue(ctx, ctxKey("turn"), o.name)
}

func (o *logObserver) StartRun(ctx context.Context, req session.RunRequest) (context.Context, func(error)) {
	o.mu.Lock()
	o.runs++
	n := o.runs
	o.mu.Unlock()
	o.add("run %d caller=%s turn=%s prompt=%v", n, label(ctx, "caller"), label(ctx, "turn"), req.Prompt != nil)
	return context.WithValue(ctx, ctxKey("run"), fmt.Sprint(n)), func(err error) { o.add("end %d err=%v", n, err) }
}

func (o *logObserver) Observe(ctx context.Context, ev events.Event) {
	o.mu.Lock()
	o.evs = append(o.evs, ev)
	o.mu.Unlock()
	if d := describe(ev); d != "" {
		o.add("event turn=%s %s", label(ctx, "turn"), d)
	} else if settled, ok := ev.(events.TurnSettled); ok {
		o.add("event turn=%s settled err=%v", label(ctx, "turn"), settled.Err)
	}
}

// ctxAgent records the labels of the context each run is given, and
// whether it can be cancelled.
type ctxAgent struct {
	session.Agent
	mu   sync.Mutex
	seen []string
}

func (a *ctxAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	a.mu.Lock()
	a.seen = append(a.seen, fmt.Sprintf("caller=%s turn=%s run=%s", label(ctx, "caller"), label(ctx, "turn"), label(ctx, "run")))
	a.mu.Unlock()
	return a.Agent.Run(ctx, req, emit)
}

// TestObserverSeesTheTurnInTheCallersContext: the observer starts the turn
// with the values of Prompt's context (not its deadline), each run under
// the turn's context, and sees every event with the turn's context, a
// run's end after its events and before the retry it leads to. The agent
// runs with the values the observer added. Issue item 2.
func TestObserverSeesTheTurnInTheCallersContext(t *testing.T) {
	bubble(t, func(t *testing.T) {
		obs := &logObserver{name: "T"}
		agent := &ctxAgent{Agent: scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{fail(service503), ok("done")}})}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithSessionID("obs"), session.WithObserver(obs))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey("caller"), "C"), time.Hour)
		defer cancel()
		require.NoError(t, s.Prompt(ctx, "hi"))
		assert.Equal(t, []string{
			"turn caller=C session=obs model=scripted/scripted-1 deadline=false done=false",
			"run 1 caller=C turn=T prompt=true",
			"event turn=T agent_start",
			`event turn=T message error "503 Service Unavailable"`,
			"event turn=T agent_end",
			"end 1 err=<nil>",
			"event turn=T idle>classifying agent_end",
			`event turn=T retry_start 1/3 2000ms "503 Service Unavailable"`,
			"event turn=T classifying>backoff retry",
			"run 2 caller=C turn=T prompt=false",
			"event turn=T backoff>continuing elapsed",
			"event turn=T agent_start",
			"event turn=T message stop",
			"event turn=T retry_end ok 1",
			"event turn=T agent_end",
			"end 2 err=<nil>",
			"event turn=T continuing>classifying agent_end",
			"event turn=T classifying>idle accept",
			"event turn=T settled err=<nil>",
		}, obs.lines())
		assert.Equal(t, []string{"caller=C turn=T run=1", "caller=C turn=T run=2"}, agent.seen)
		assert.Equal(t, rec.events(), obs.events(), "the observer sees what the subscribers see")
	})
}

// TestObserversInOrderAndSend: Send starts a turn without a caller's context;
// several observers are called in order, each given what the previous one
// returned; an agent's panic ends its run with an error.
func TestObserversInOrderAndSend(t *testing.T) {
	bubble(t, func(t *testing.T) {
		a, b := &logObserver{name: "A"}, &logObserver{name: "B"}
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel})
		s, err := session.New(panicAgent{agent}, session.WithModel(scripted.DefaultModel), session.WithSessionID("obs"),
			session.WithObserver(a), session.WithObserver(b))
		require.NoError(t, err)
		defer s.Close()
		settled, err := s.Send("hi")
		require.NoError(t, err)
		require.ErrorIs(t, <-settled, policy.ErrProvider)
		assert.Equal(t, "turn caller=- session=obs model=scripted/scripted-1 deadline=false done=false", a.lines()[0])
		assert.Equal(t, "run 1 caller=- turn=B prompt=true", b.lines()[1], "each StartRun is given the turn's context, as the last observer made it")
		assert.Contains(t, a.lines(), "end 1 err=the agent panicked: boom")
		assert.Contains(t, b.lines(), "end 1 err=the agent panicked: boom")
		assert.Equal(t, "event turn=B settled err=policy: provider error: the agent panicked: boom", b.lines()[len(b.lines())-1])
	})
}

type panicAgent struct{ session.Agent }

func (panicAgent) Run(context.Context, session.RunRequest, func(events.Event)) error { panic("boom") }

// panicObserver panics in every call.
type panicObserver struct{}

func (panicObserver) StartTurn(context.Context, string, policy.Model) context.Context { panic("turn") }
func (panicObserver) StartRun(context.Context, session.RunRequest) (context.Context, func(error)) {
	return context.Background(), func(error) { panic("end") }
}
func (panicObserver) Observe(context.Context, events.Event) { panic("observe") }

// TestObserverPanicsAreContained: an observer that panics everywhere is
// logged, and the session, the other observers and the subscribers go on
// as if it had returned what it was given.
func TestObserverPanicsAreContained(t *testing.T) {
	bubble(t, func(t *testing.T) {
		var logs bytes.Buffer
		good := &logObserver{name: "G"}
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")},
			session.WithObserver(panicObserver{}), session.WithObserver(good),
			session.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, "retry_end ok 1"}, rec.recovery())
		assert.Contains(t, good.lines(), "event turn=G settled err=<nil>")
		panics := map[string]int{}
		for line := range strings.Lines(logs.String()) {
			var rec struct{ In, Panic string }
			require.NoError(t, json.Unmarshal([]byte(line), &rec))
			assert.Equal(t, "observer", rec.In)
			panics[rec.Panic]++
		}
		assert.Equal(t, 1, panics["turn"])
		assert.Equal(t, 2, panics["end"])
		assert.Equal(t, len(rec.events())+0, panics["observe"])
	})
}

func TestWithObserverRefusesNil(t *testing.T) {
	_, err := session.New(scripted.New(scripted.Script{}), session.WithObserver(nil))
	assert.EqualError(t, err, "session: nil Observer")
}

// TestObserverSeesAResumedTurn: a snapshot taken during a turn's backoff
// resumes with the turn in flight: the observer starts it without a
// caller's context and sees it to its end.
func TestObserverSeesAResumedTurn(t *testing.T) {
	bubble(t, func(t *testing.T) {
		history := &history.MemoryHistory{}
		s, _, _ := newSession(t, []scripted.Call{fail(service503)}, session.WithHistory(history))
		done := promptAsync(s, "hi")
		synctest.Wait()
		require.Equal(t, states.Backoff, s.Status().State)
		snap, err := s.Snapshot()
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-done, policy.ErrAborted)

		obs := &logObserver{name: "R"}
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{ok("done")}})
		r, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithHistory(history),
			session.WithSnapshot(snap), session.WithObserver(obs))
		require.NoError(t, err)
		defer r.Close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		lines := obs.lines()
		require.NotEmpty(t, lines)
		assert.Equal(t, "turn caller=- session=test-session model=scripted/scripted-1 deadline=false done=false", lines[0])
		assert.Equal(t, "run 1 caller=- turn=R prompt=false", lines[1])
		assert.Equal(t, "event turn=R backoff>continuing elapsed", lines[2])
		assert.Equal(t, "event turn=R settled err=<nil>", lines[len(lines)-1])
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "event") {
				assert.Contains(t, l, "turn=R")
			}
		}
		// The next turn is a turn of its own.
		require.NoError(t, r.Prompt(context.WithValue(context.Background(), ctxKey("caller"), "D"), "again"))
		assert.Contains(t, obs.lines(), "turn caller=D session=test-session model=scripted/scripted-1 deadline=false done=false")
	})
}

// gettersObserver reads the session's getters from inside every call, as
// the Observer contract allows.
type gettersObserver struct {
	s    *session.Session
	mu   sync.Mutex
	seen []string
}

func (g *gettersObserver) note() {
	st := g.s.Status()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, fmt.Sprintf("%s %s %s %d", g.s.ID(), g.s.Model().ID, st.State, g.s.Status().Attempt))
}

func (g *gettersObserver) StartTurn(ctx context.Context, _ string, _ policy.Model) context.Context {
	g.note()
	return ctx
}

func (g *gettersObserver) StartRun(ctx context.Context, _ session.RunRequest) (context.Context, func(error)) {
	g.note()
	return ctx, func(error) { g.note() }
}

func (g *gettersObserver) Observe(context.Context, events.Event) { g.note() }

// TestObserverMayReadTheGetters: an observer that reads ID, Model and the
// Status getters from inside its calls does not hold the session up.
func TestObserverMayReadTheGetters(t *testing.T) {
	bubble(t, func(t *testing.T) {
		g := &gettersObserver{}
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{fail(service503), ok("done")}})
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithSessionID("g"), session.WithObserver(g))
		require.NoError(t, err)
		g.s = s
		defer s.Close()
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		g.mu.Lock()
		defer g.mu.Unlock()
		assert.Contains(t, g.seen, "g scripted-1 backoff 1", "the status the retry's event comes with")
		assert.Equal(t, "g scripted-1 idle 0", g.seen[len(g.seen)-1])
	})
}

// reentrantObserver calls back into its session from every call, as an
// observer must not: each method that waits for the session's goroutine.
type reentrantObserver struct {
	on   bool
	errs []error
	nils int // calls whose context held no session
}

func (o *reentrantObserver) call(ctx context.Context) {
	if !o.on {
		return
	}
	s := session.FromContext(ctx)
	if s == nil {
		o.nils++
		return
	}
	_ = s.Config()
	_ = s.Messages()
	_, snapErr := s.Snapshot()
	_, compactErr := s.Compact(context.Background(), "")
	o.errs = append(o.errs, snapErr, compactErr, s.Prompt(context.Background(), "again"), s.Close())
	s.Abort()
	s.AbortRetry()
	s.AbortCompaction()
	s.SetAutoRetryEnabled(true)
	s.SetAutoCompactionEnabled(true)
	s.Flush()
	if settled, err := s.Send("again"); settled != nil {
		o.errs = append(o.errs, errors.New("Send from an observer returned a channel"))
	} else {
		o.errs = append(o.errs, err)
	}
}

func (o *reentrantObserver) StartTurn(ctx context.Context, _ string, _ policy.Model) context.Context {
	o.call(ctx)
	return ctx
}

func (o *reentrantObserver) StartRun(ctx context.Context, _ session.RunRequest) (context.Context, func(error)) {
	o.call(ctx)
	return ctx, func(error) { o.call(ctx) }
}

func (o *reentrantObserver) Observe(ctx context.Context, _ events.Event) { o.call(ctx) }

// An observer that calls back into its session, against its contract,
// through the session its context holds, gets ErrObserverCall (or nothing
// happens) instead of waiting for ever for the goroutine it runs on; the
// turn goes on, and Close still closes.
func TestObserverCallingBackGetsAnErrorNotADeadlock(t *testing.T) {
	bubble(t, func(t *testing.T) {
		o := &reentrantObserver{}
		s, _, rec := newSession(t, []scripted.Call{fail(service503), ok("done")}, session.WithObserver(o))
		o.on = true
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		assert.Equal(t, []string{`retry_start 1/3 2000ms "503 Service Unavailable"`, "retry_end ok 1"}, rec.recovery())
		require.NotEmpty(t, o.errs)
		assert.Zero(t, o.nils, "every observer call is handed the session to call back")
		for _, err := range o.errs {
			require.ErrorIs(t, err, session.ErrObserverCall)
		}
		o.on = false
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Prompt(context.Background(), "after"), policy.ErrClosed)
	})
}
