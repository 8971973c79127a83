package view_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/cmd/agentfsm/view"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRetryCountdownAndEsc(t *testing.T) {
	var m view.Model
	assert.Equal(t, view.EscNothing, m.Esc())
	m.Apply(events.AgentStart{}, t0)
	assert.Equal(t, view.EscAbort, m.Esc())
	assert.Equal(t, "Working…", m.Spinner(t0))
	m.Apply(events.AgentEnd{}, t0)
	m.Apply(events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 4000, ErrorMessage: "503"}, t0)
	assert.Equal(t, view.EscAbortRetry, m.Esc())
	assert.Equal(t, "Retrying (1/3) in 4s… (esc to cancel)", m.Spinner(t0))
	assert.Equal(t, "Retrying (1/3) in 3s… (esc to cancel)", m.Spinner(t0.Add(1200*time.Millisecond)))
	assert.Equal(t, "Retrying (1/3) in 0s… (esc to cancel)", m.Spinner(t0.Add(time.Minute)))
	// The continuation starts: the retry spinner gives way to the working
	// one, and Esc goes back to aborting.
	m.Apply(events.AgentStart{}, t0.Add(4*time.Second))
	assert.Equal(t, "Working…", m.Spinner(t0))
	assert.Equal(t, view.EscAbort, m.Esc())
	m.Apply(events.AutoRetryEnd{Success: true, Attempt: 1}, t0)
	assert.Empty(t, m.TakeLines())
	m.Apply(events.AgentEnd{}, t0)
	assert.Equal(t, view.EscNothing, m.Esc())
}

// A wait for a usage limit's reset counts down to the reset itself, and
// Esc cancels it as any retry.
func TestResetWaitCountdown(t *testing.T) {
	var m view.Model
	m.Apply(events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 3 * 3600 * 1000, ErrorMessage: "usage limit",
		ResetAt: t0.Add(3 * time.Hour)}, t0.Add(2*time.Second))
	assert.Equal(t, view.EscAbortRetry, m.Esc())
	assert.Equal(t, "Usage limit: waiting for its reset at 03:00:00 UTC, in 2h59m58s (1/3)… (esc to cancel)", m.Spinner(t0.Add(2*time.Second)))
	assert.Equal(t, "Usage limit: waiting for its reset at 03:00:00 UTC, in 1h0m0s (1/3)… (esc to cancel)", m.Spinner(t0.Add(2*time.Hour)))
	assert.Equal(t, "Usage limit: waiting for its reset at 03:00:00 UTC, in 0s (1/3)… (esc to cancel)", m.Spinner(t0.Add(4*time.Hour)))
	m.Apply(events.AgentStart{}, t0.Add(3*time.Hour))
	assert.Equal(t, "Working…", m.Spinner(t0.Add(3*time.Hour)))
	// The next plain retry counts down as before.
	m.Apply(events.AgentEnd{}, t0)
	m.Apply(events.AutoRetryStart{Attempt: 2, MaxAttempts: 3, DelayMs: 4000}, t0)
	assert.Equal(t, "Retrying (2/3) in 4s… (esc to cancel)", m.Spinner(t0))
}

// A chain with no count limit (retry.maxRetries -1, the patient preset)
// counts its attempt out of ∞, not out of -1, in a retry's countdown and
// in a reset's; at and past its end the countdown reads 0, never less.
func TestRetryCountdownWithoutCountLimit(t *testing.T) {
	var m view.Model
	m.Apply(events.AutoRetryStart{Attempt: 7, MaxAttempts: -1, DelayMs: 60_000, ErrorMessage: "529 overloaded"}, t0)
	assert.Equal(t, "Retrying (7/∞) in 60s… (esc to cancel)", m.Spinner(t0))
	assert.Equal(t, "Retrying (7/∞) in 0s… (esc to cancel)", m.Spinner(t0.Add(60*time.Second)))
	assert.Equal(t, "Retrying (7/∞) in 0s… (esc to cancel)", m.Spinner(t0.Add(time.Hour)))
	m.Apply(events.AgentStart{}, t0.Add(time.Minute))
	m.Apply(events.AgentEnd{}, t0.Add(time.Minute))
	m.Apply(events.AutoRetryStart{Attempt: 8, MaxAttempts: -1, DelayMs: 3000, ErrorMessage: "usage limit",
		ResetAt: t0.Add(time.Minute + 3*time.Second)}, t0.Add(time.Minute))
	assert.Equal(t, "Usage limit: waiting for its reset at 00:01:03 UTC, in 3s (8/∞)… (esc to cancel)", m.Spinner(t0.Add(time.Minute)))
	assert.Equal(t, "Usage limit: waiting for its reset at 00:01:03 UTC, in 0s (8/∞)… (esc to cancel)", m.Spinner(t0.Add(time.Minute+3*time.Second)))
	assert.Equal(t, "Usage limit: waiting for its reset at 00:01:03 UTC, in 0s (8/∞)… (esc to cancel)", m.Spinner(t0.Add(time.Hour)))
}

func TestRetryFailedLines(t *testing.T) {
	var m view.Model
	m.Apply(events.AutoRetryStart{Attempt: 3, MaxAttempts: 3, DelayMs: 8000}, t0)
	m.Apply(events.AutoRetryEnd{Success: false, Attempt: 3, FinalError: "503 Service Unavailable"}, t0)
	assert.Equal(t, view.EscNothing, m.Esc(), "Esc goes back to what it did before")
	assert.Equal(t, "", m.Spinner(t0))
	assert.Equal(t, []string{"Retry failed after 3 attempts: 503 Service Unavailable"}, m.TakeLines())
	m.Apply(events.AutoRetryEnd{Success: false, Attempt: 1}, t0)
	assert.Equal(t, []string{"Retry failed after 1 attempts: Unknown error"}, m.TakeLines())
}

func TestAbortedMessages(t *testing.T) {
	var m view.Model
	aborted := events.MessageEnd{Message: transcript.Message{Role: transcript.RoleAssistant, StopReason: "aborted"}}
	m.Apply(aborted, t0)
	assert.Equal(t, []string{"Operation aborted"}, m.TakeLines())
	m.Apply(events.AutoRetryStart{Attempt: 2, MaxAttempts: 3, DelayMs: 1000}, t0)
	m.Apply(events.AgentStart{}, t0)
	m.Apply(events.AutoRetryEnd{Success: false, Attempt: 2, FinalError: "Retry cancelled"}, t0)
	m.Apply(aborted, t0)
	assert.Equal(t, []string{"Retry failed after 2 attempts: Retry cancelled", "Aborted after 2 retry attempt(s)"}, m.TakeLines())
}

func TestCompaction(t *testing.T) {
	var m view.Model
	m.Apply(events.AutoCompactionStart{Reason: transcript.ReasonOverflow}, t0)
	assert.Equal(t, view.EscAbortCompaction, m.Esc())
	assert.Equal(t, "Context overflow detected, Auto-compacting… (esc to cancel)", m.Spinner(t0))
	m.Apply(events.AutoCompactionEnd{Result: &transcript.Compaction{Summary: "the summary"}, WillRetry: true}, t0)
	assert.Equal(t, view.EscNothing, m.Esc())
	assert.Equal(t, []string{"the summary"}, m.TakeLines())

	m.Apply(events.AutoCompactionStart{Reason: transcript.ReasonThreshold}, t0)
	assert.Equal(t, "Auto-compacting… (esc to cancel)", m.Spinner(t0))
	m.Apply(events.AutoCompactionEnd{Aborted: true}, t0)
	m.Apply(events.AutoCompactionStart{Reason: transcript.ReasonThreshold}, t0)
	m.Apply(events.AutoCompactionEnd{ErrorMessage: "Auto-compaction failed: boom"}, t0)
	assert.Equal(t, []string{"Auto-compaction cancelled", "Auto-compaction failed: Auto-compaction failed: boom"}, m.TakeLines())
}

func TestEscNames(t *testing.T) {
	assert.Equal(t, "abort retry", view.EscAbortRetry.String())
}

// An overflow no compaction can make fit (the too_large rule) is shown in
// words: the line says the last message alone is N tokens, over the
// model's window, not "nothing to compact"; Esc goes back to what it did.
func TestCompactionTooLarge(t *testing.T) {
	var m view.Model
	m.Apply(events.AgentStart{}, t0)
	m.Apply(events.AgentEnd{}, t0)
	m.Apply(events.AutoCompactionStart{Reason: transcript.ReasonOverflow}, t0)
	m.Apply(events.AutoCompactionEnd{ErrorMessage: "Context overflow recovery failed: the last message alone is 229981 tokens, over the model's window of 200000 less its reserve of 16384"}, t0)
	assert.Equal(t, view.EscNothing, m.Esc())
	assert.Equal(t, "", m.Spinner(t0))
	assert.Equal(t, []string{"Auto-compaction failed: Context overflow recovery failed: the last message alone is 229981 tokens, over the model's window of 200000 less its reserve of 16384"}, m.TakeLines())
	m.Apply(events.TurnSettled{}, t0)
	assert.Empty(t, m.TakeLines())
}

// A wait on a limit shared by sessions (shared_limit_wait) counts down to
// the shared deadline, naming the key and why; Esc cancels it as a retry's
// wait; a retry of the session's own held by it keeps one Esc; the run at
// the deadline shows the working spinner.
func TestSharedLimitWaitCountdown(t *testing.T) {
	var m view.Model
	m.Apply(events.SharedLimitWait{Key: "anthropic/work", Until: t0.Add(2 * time.Second), Reason: "rate_limited"}, t0)
	assert.Equal(t, view.EscAbortRetry, m.Esc())
	assert.Equal(t, "Shared limit on anthropic/work (rate_limited): waiting until 00:00:02 UTC, in 2s… (esc to cancel)", m.Spinner(t0))
	assert.Equal(t, "Shared limit on anthropic/work (rate_limited): waiting until 00:00:02 UTC, in 0s… (esc to cancel)", m.Spinner(t0.Add(time.Hour)))
	m.Apply(events.AgentStart{}, t0.Add(2*time.Second))
	assert.Equal(t, "Working…", m.Spinner(t0.Add(2*time.Second)))
	assert.Equal(t, view.EscAbort, m.Esc())
	m.Apply(events.AgentEnd{}, t0.Add(2*time.Second))
	assert.Equal(t, view.EscNothing, m.Esc())

	// A retry whose continuation the shared limit then holds: one wait,
	// one Esc, the countdown to the shared deadline.
	m.Apply(events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "503"}, t0)
	m.Apply(events.SharedLimitWait{Key: "anthropic/work", Until: t0.Add(5 * time.Second), Reason: "rate_limited"}, t0.Add(2*time.Second))
	assert.Equal(t, "Shared limit on anthropic/work (rate_limited): waiting until 00:00:05 UTC, in 3s… (esc to cancel)", m.Spinner(t0.Add(2*time.Second)))
	m.Apply(events.AgentStart{}, t0.Add(5*time.Second))
	m.Apply(events.AgentEnd{}, t0.Add(5*time.Second))
	assert.Equal(t, view.EscNothing, m.Esc())
}
