package policy

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. A turn's error (FinishTurn) matches one of them with
// errors.Is and says why the turn failed. Their messages begin "policy:",
// the package that declares them; on the RPC wire they read "session:", as
// they always have (package session/rpc maps them).
var (
	// ErrBusy: Prompt or Compact was called while a turn was in flight.
	ErrBusy = errors.New("policy: busy: a turn is in flight")
	// ErrClosed: the session was closed.
	ErrClosed = errors.New("policy: closed")
	// ErrRetryCancelled: AbortRetry cancelled the retry the turn waited for.
	ErrRetryCancelled = errors.New("policy: retry cancelled")
	// ErrAborted: Abort (or the Prompt's context) stopped the turn.
	ErrAborted = errors.New("policy: aborted")
	// ErrExhausted: the retry chain ran out of attempts. The error is an
	// *ExhaustedError with the last provider error.
	ErrExhausted = errors.New("policy: retries exhausted")
	// ErrProvider: the turn ended in an error that is not retried. The
	// error also matches the agent's Go error (Message.Err) when it gave
	// one.
	ErrProvider = errors.New("policy: provider error")
	// ErrOverflow: the context overflowed and was not recovered. The error
	// also matches the agent's Go error when the overflow's message had
	// one, or the compaction's error when that failed.
	ErrOverflow = errors.New("policy: context overflow not recovered")
	// ErrHistory: the history could not be written; the turn went on,
	// but a session reopened on the history misses what was not written.
	ErrHistory = errors.New("policy: history write failed")
	// ErrStartFailed: the agent could not start a run.
	ErrStartFailed = errors.New("policy: run could not start")
)

// ExhaustedError is the error of a turn whose retry chain ran out: Attempts
// retries were made, and the last run ended in the provider error whose
// text is Last and whose Go error, when the agent gave one (Message.Err),
// is Err. Budget is not 0 when the chain's time budget
// (retry.maxElapsedMs) ended it: Elapsed had passed since the budget
// started, and the next retry, waiting Delay, would have ended past it.
// With retry.waitForReset, a usage limit whose reset is further away than
// retry.maxResetWaitMs ends the chain too: ResetAt is then that reset and
// MaxResetWaitMs the bound (zero otherwise), both in the text.
type ExhaustedError struct {
	Attempts       int
	Last           string
	Err            error
	Budget         time.Duration
	Elapsed        time.Duration
	Delay          time.Duration
	ResetAt        time.Time
	MaxResetWaitMs int64
}

func (e *ExhaustedError) Error() string {
	switch {
	case !e.ResetAt.IsZero():
		return fmt.Sprintf("policy: retries exhausted after %d attempts: %s; the limit resets at %s, more than retry.maxResetWaitMs (%d ms) away",
			e.Attempts, e.Last, e.ResetAt.UTC().Format(time.RFC3339), e.MaxResetWaitMs)
	case e.Budget > 0:
		return fmt.Sprintf("policy: retries exhausted after %d attempts: the next retry, in %v, would end past the time budget of %v (%v spent): %s",
			e.Attempts, e.Delay, e.Budget, e.Elapsed, e.Last)
	}
	return fmt.Sprintf("policy: retries exhausted after %d attempts: %s", e.Attempts, e.Last)
}

// Unwrap returns ErrExhausted, ErrProvider (the turn ended in a provider
// error) and Err when there is one, so that errors.Is and errors.As reach
// each.
func (e *ExhaustedError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrExhausted, ErrProvider}
	}
	return []error{ErrExhausted, ErrProvider, e.Err}
}

// providerError is the error of a turn that a provider error ended:
// sentinel and the error's text, matching the agent's Go error too when it
// gave one.
func providerError(sentinel error, text string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s", sentinel, text)
	}
	return &causedError{text: sentinel.Error() + ": " + text, errs: []error{sentinel, cause}}
}

// causedError is an error with its own text that matches each of errs.
type causedError struct {
	text string
	errs []error
}

func (e *causedError) Error() string   { return e.text }
func (e *causedError) Unwrap() []error { return e.errs }
