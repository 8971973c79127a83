package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"

	"github.com/agentfsm/agentfsm/events"
)

// errGoexit is what the session records of embedder code that called
// runtime.Goexit where it was to return: a panic that cannot be recovered.
var errGoexit = errors.New("runtime.Goexit was called")

// logError hands one line to l's handler at level Error, on a goroutine of
// its own that it waits for, under a recover: a handler that panics (with
// any value, nil included) or calls runtime.Goexit loses its line, never
// the caller's goroutine, which may be the session's own or one that is
// recovering another panic. attrs is called on that goroutine too, so that
// what formats an embedder's value (a String or Error method) is
// contained as well. The record's context is ctx: it holds the session
// value the handler may call back through (FromContext). A discarding
// logger costs nothing.
func logError(ctx context.Context, l *slog.Logger, msg string, attrs func() []any) {
	if l == discardLogger {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = recover() }()
		l.ErrorContext(ctx, msg, attrs()...)
	}()
	<-done
}

// logPanic reports a panic in the embedder's code, with its stack, from the
// session's own goroutine (see logPanicIn).
func (s *Session) logPanic(who string, value any) {
	s.logPanicIn(s.callerCtx(context.Background()), who, value)
}

// logPanicIn is logPanic from any goroutine: ctx is the record's context.
func (s *Session) logPanicIn(ctx context.Context, who string, value any) {
	if s.logger == discardLogger {
		return
	}
	stack := debug.Stack() // the panicking goroutine's, taken here
	logError(ctx, s.logger, "session: recovered a panic", func() []any {
		// Redacted: a panic's value or stack may quote a noted secret.
		return []any{"in", who, "panic", s.secrets.text(fmt.Sprint(value)), "stack", s.secrets.text(string(stack))}
	})
}

// logSubscriberPanic reports a subscriber's panic on ev, its value
// redacted (redact) as every other panic's is.
func logSubscriberPanic(ctx context.Context, l *slog.Logger, redact func(string) string, ev events.Event, value any) {
	logError(ctx, l, "session: a subscriber panicked", func() []any {
		return []any{"event", reflect.TypeOf(ev).Name(), "panic", redact(fmt.Sprint(value))}
	})
}
