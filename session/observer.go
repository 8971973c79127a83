package session

import (
	"context"
	"errors"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
)

// Observer watches a session's work together with the context each part of
// it belongs to: what a tracer needs to make a span of every turn, under the
// span of the caller of Prompt, and of every run, under the turn's (package
// otelsession is one). A subscriber sees the same events, but never the
// caller's context.
//
// The session calls its observers on its own goroutine, one call at a time
// and in order, before any subscriber receives the event: an observer must
// return quickly. Most of the session's methods wait for that goroutine, so
// an observer calls back only through the value FromContext finds in the
// context it is given: on it, ID, Model, Status, History,
// Subscribe and the unsubscribe it returns work as anywhere, Flush returns
// at once, and the others return ErrObserverCall, or do nothing when they
// return no error. Called on any other value, such as the one New
// returned, those others wait for ever: the session cannot tell that the
// call comes from its own goroutine. An observer shared by several
// sessions is called by each of them concurrently. A panic in an observer is recovered
// and logged (WithLogger); the call then counts as having returned the
// context it was given. An observer must not call runtime.Goexit: it would
// end the session's goroutine in the middle of its work.
type Observer interface {
	// StartTurn is called as a turn begins, with the caller's context
	// stripped of its deadline and cancellation: Prompt's, or
	// context.Background() for Send and for the turn in flight of a
	// restored snapshot. It returns the turn's context: the turn's events
	// are observed with it and its runs start from it.
	StartTurn(ctx context.Context, sessionID string, model policy.Model) context.Context
	// StartRun is called just before the agent is called for a run, with
	// the context of the turn it belongs to (context.Background() outside
	// a turn) and the run's request. The agent's Run gets the context it
	// returns, with the session's cancellation added. end is called once
	// Run has returned, with what it returned (a panic as an error), after
	// the run's events and before what the session does about its end;
	// end may be nil.
	StartRun(ctx context.Context, req RunRequest) (runCtx context.Context, end func(err error))
	// Observe is called with every event the session emits, in order,
	// with the context of the turn the event belongs to
	// (context.Background() for an event outside a turn). events.TurnSettled is a
	// turn's last event.
	Observe(ctx context.Context, ev events.Event)
}

// WithObserver adds an observer. Given more than once, the observers are
// called in the order given, and each StartTurn and StartRun is given the
// context the previous observer returned. An observer calls the session
// back only through the value FromContext finds in its context, on which
// the methods that would wait for the session's goroutine return
// ErrObserverCall (see Observer). A nil o makes New fail, and so does a
// nil pointer or func in it.
func WithObserver(o Observer) Option {
	return option("WithObserver", func(s *Session) error {
		if err := refuseNil(o, "Observer"); err != nil {
			return err
		}
		set := s.own()
		set.observers = append(set.observers, o)
		return nil
	})
}

// startTurn begins the observed turn: the turn's context is ctx's values,
// as the observers extend them.
func (s *Session) startTurn(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	id, model := s.x.engine.SessionID(), s.x.engine.Model()
	for _, o := range s.observers {
		func() {
			defer s.recoverObserver()
			if c := o.StartTurn(s.callerCtx(ctx), id, model); c != nil {
				ctx = context.WithoutCancel(s.uncallerCtx(c))
			}
		}()
	}
	s.x.turnCtx = ctx
}

// withoutCancel is context.WithoutCancel(ctx), but ctx itself when it is
// context.Background(), which has no cancellation to shed: a turn sent
// without a context (Send) keeps no wrapper while it waits.
func withoutCancel(ctx context.Context) context.Context {
	if ctx == context.Background() {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// turnContext is the context of the turn in flight, context.Background()
// outside a turn.
func (s *Session) turnContext() context.Context {
	if s.x.turnCtx != nil {
		return s.x.turnCtx
	}
	return context.Background()
}

// startObservedRun tells the observers that run req starts: it returns the
// context the agent is to run in and what to call when Run has returned.
func (s *Session) startObservedRun(req RunRequest) (context.Context, func(error)) {
	ctx := s.turnContext()
	if len(s.observers) == 0 {
		return ctx, nil
	}
	ends := make([]func(error), 0, len(s.observers))
	for _, o := range s.observers {
		func() {
			defer s.recoverObserver()
			c, end := o.StartRun(s.callerCtx(ctx), req)
			if c != nil {
				ctx = context.WithoutCancel(s.uncallerCtx(c))
			}
			if end != nil {
				ends = append(ends, end)
			}
		}()
	}
	return ctx, func(err error) {
		for i := len(ends) - 1; i >= 0; i-- {
			func() {
				defer s.recoverObserver()
				ends[i](err)
			}()
		}
	}
}

// observe gives ev to the observers.
func (s *Session) observe(ev events.Event) {
	ctx := s.callerCtx(s.turnContext())
	for _, o := range s.observers {
		func() {
			defer s.recoverObserver()
			o.Observe(ctx, ev)
		}()
	}
}

// recoverObserver recovers and logs an observer's panic.
func (s *Session) recoverObserver() {
	if r := recover(); r != nil {
		s.logPanic("observer", r)
	}
}

// ErrObserverCall is what a session method that waits for the session's
// goroutine returns when it is called on the value FromContext finds in an
// observer's context, or in a log handler's that the session's goroutine,
// the agent's or the summarizer's waits for; the methods without an error
// do nothing. The call would wait for the goroutine that waits for it.
var ErrObserverCall = errors.New("session: called back from an observer or a log handler, which the session waits for")

// callerKey is the context key under which a callback finds the session
// value to call back through.
type callerKey struct{}

// FromContext returns the session value a callback is handed in its
// context, or nil when ctx holds none. An observer finds it in the context
// of each call: on it, the methods that wait for the session's goroutine
// return ErrObserverCall, or do nothing (see Observer). A log handler
// (WithLogger) finds it in the context of each record (Handler.Handle):
// for a line about a subscriber (its panic), a value whose calls are that
// subscriber's, as SubscribeSession hands it; for any other line, logged
// while the session's goroutine, the agent's or the summarizer's waits
// for the handler, the observers' value. The contexts the session passes
// on (a turn's and a run's, the agent's included) never hold it, whatever
// Prompt's context or an observer's StartTurn and StartRun returned.
func FromContext(ctx context.Context) *Session {
	s, _ := ctx.Value(callerKey{}).(*Session)
	return s
}

// callerCtx is ctx holding the value of the session's own goroutine.
func (s *Session) callerCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerKey{}, &s.loopView)
}

// uncallerCtx is ctx, an observer's, without the value of the session's
// own goroutine, which must not reach the agent or another goroutine.
func (s *Session) uncallerCtx(ctx context.Context) context.Context {
	if ctx.Value(callerKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, nil)
}
