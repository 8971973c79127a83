package session

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// panicError is the error a panic in an embedder's code (the Agent, the
// Summarizer) becomes: the session recovers it, logs it with its stack,
// and goes on. A run that panicked ends in a fatal error message that is
// never retried.
type panicError struct {
	who   string
	value any
}

func (e *panicError) Error() string {
	return fmt.Sprintf("the %s panicked: %v", e.who, e.value)
}

// recovered turns the value of a recovered panic in who's code into a
// *panicError, and logs it with the stack through logger.
func recovered(who string, value any, logger *slog.Logger) error {
	logger.Error("session: recovered a panic", "in", who, "panic", fmt.Sprint(value), "stack", string(debug.Stack()))
	return &panicError{who: who, value: value}
}
