// Package view is the terminal view of a session as a pure model
// (docs/policy.md §8): events go in; the spinner text, the lines to print and what the Esc
// key does come out. It reads no clock and draws nothing, so it is tested
// without a terminal; the demo renders it.
package view

import (
	"fmt"
	"math"
	"time"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/transcript"
)

// Esc is what the Esc key does.
type Esc int

// What Esc can do.
const (
	// EscNothing: nothing is running.
	EscNothing Esc = iota
	// EscAbort: abort the running operation.
	EscAbort
	// EscAbortRetry: cancel the pending retry.
	EscAbortRetry
	// EscAbortCompaction: cancel the running compaction.
	EscAbortCompaction
)

func (e Esc) String() string {
	return [...]string{"nothing", "abort", "abort retry", "abort compaction"}[e]
}

// Model is the view's state. The zero value is an idle view.
type Model struct {
	esc     []Esc // what Esc did before, innermost last
	spinner string
	// retry is the pending retry's countdown: its attempt, its end and
	// the text around it.
	retry      bool
	attempt    int
	maxAttempt int
	until      time.Time
	// reset: the pending retry waits for a usage limit's reset, at until.
	reset bool
	// shared is the key a limit shared by sessions holds, the wait being
	// for its deadline (until); "" for a retry of the session's own.
	shared, sharedWhy string
	working           bool
	// cancelled is the attempt count of the chain the last "Retry
	// cancelled" ended, for the aborted message that may follow.
	cancelled int
	lines     []string
}

// Apply takes one event that happened at now.
func (m *Model) Apply(ev events.Event, now time.Time) {
	switch e := ev.(type) {
	case events.AgentStart:
		if m.retry {
			// The continuation shows the normal working spinner.
			m.retry = false
			m.pop()
		}
		if !m.working {
			m.working = true
			m.push(EscAbort)
		}
		m.spinner = "Working…"
	case events.AgentEnd:
		if m.working {
			m.working = false
			m.pop()
		}
		m.spinner = ""
	case events.MessageEnd:
		msg := e.Message
		if msg.Role == transcript.RoleAssistant && msg.StopReason == "aborted" {
			if m.cancelled > 0 {
				m.say(fmt.Sprintf("Aborted after %d retry attempt(s)", m.cancelled))
			} else {
				m.say("Operation aborted")
			}
			m.cancelled = 0
		}
	case events.SharedLimitWait:
		if !m.retry {
			m.push(EscAbortRetry)
		}
		m.retry, m.reset = true, false
		m.shared, m.sharedWhy, m.until = e.Key, e.Reason, e.Until
	case events.AutoRetryStart:
		if m.retry {
			m.pop() // a shared wait that a retry of its own follows
		}
		m.retry, m.shared = true, ""
		m.attempt, m.maxAttempt = e.Attempt, e.MaxAttempts
		m.until = now.Add(time.Duration(e.DelayMs) * time.Millisecond)
		m.reset = !e.ResetAt.IsZero()
		if m.reset {
			// The reset is an instant: the countdown is to it.
			m.until = e.ResetAt
		}
		m.push(EscAbortRetry)
	case events.AutoRetryEnd:
		if m.retry {
			m.retry = false
			m.pop()
		}
		m.spinner = ""
		if !e.Success {
			final := e.FinalError
			if final == "" {
				final = "Unknown error"
			}
			m.say(fmt.Sprintf("Retry failed after %d attempts: %s", e.Attempt, final))
			if final == "Retry cancelled" {
				m.cancelled = e.Attempt
			}
		}
	case events.AutoCompactionStart:
		m.push(EscAbortCompaction)
		if e.Reason == transcript.ReasonOverflow {
			m.spinner = "Context overflow detected, Auto-compacting… (esc to cancel)"
		} else {
			m.spinner = "Auto-compacting… (esc to cancel)"
		}
	case events.AutoCompactionEnd:
		m.pop()
		m.spinner = ""
		switch {
		case e.Aborted:
			m.say("Auto-compaction cancelled")
		case e.Result != nil:
			m.say(e.Result.Summary)
		case e.ErrorMessage != "":
			m.say("Auto-compaction failed: " + e.ErrorMessage)
		default:
			m.say("Auto-compaction failed: nothing to compact")
		}
	case events.ModelFallback:
		m.say(FallbackWords(e))
	case events.ModelRevert:
		m.say(RevertWords(e))
	case events.TurnSettled:
		*m = Model{lines: m.lines}
	}
}

// FallbackWords says a model fallback in words: "Model claude-opus-4-5 is
// overloaded: switching to claude-sonnet-4-5 until 15:05:00 UTC".
func FallbackWords(e events.ModelFallback) string {
	why := "keeps failing"
	switch e.Reason {
	case events.FallbackOverloaded:
		why = "is overloaded"
	case events.FallbackUsageLimit:
		why = "hit a usage limit"
	}
	return fmt.Sprintf("Model %s %s: switching to %s until %s UTC", e.From, why, e.To, e.Until.UTC().Format(time.TimeOnly))
}

// RevertWords says the end of a fallback in words: "Back to model
// claude-opus-4-5 (from claude-sonnet-4-5)".
func RevertWords(e events.ModelRevert) string {
	return fmt.Sprintf("Back to model %s (from %s)", e.To, e.From)
}

// Spinner returns the spinner's text at now, "" when there is none. A
// pending retry counts down: "Retrying (1/3) in 4s… (esc to cancel)"; a
// wait for a usage limit's reset counts down to it, in hours, minutes and
// seconds: "Usage limit: waiting for its reset at 15:00:00 UTC, in
// 2h59m58s (1/3)… (esc to cancel)". A chain with no count limit
// (retry.maxRetries -1) shows its attempt out of ∞: "Retrying (5/∞) in
// 60s… (esc to cancel)". A wait on a limit shared by sessions counts down
// to its deadline: "Shared limit on anthropic/work (rate_limited): waiting
// until 15:00:02 UTC, in 2s… (esc to cancel)".
func (m *Model) Spinner(now time.Time) string {
	if m.retry && m.shared != "" {
		left := time.Duration(math.Round(max(m.until.Sub(now), 0).Seconds())) * time.Second
		return fmt.Sprintf("Shared limit on %s (%s): waiting until %s, in %s… (esc to cancel)",
			m.shared, m.sharedWhy, m.until.UTC().Format("15:04:05 UTC"), left)
	}
	if m.retry && m.reset {
		left := time.Duration(math.Round(max(m.until.Sub(now), 0).Seconds())) * time.Second
		return fmt.Sprintf("Usage limit: waiting for its reset at %s, in %s (%s)… (esc to cancel)",
			m.until.UTC().Format("15:04:05 UTC"), left, m.attempts())
	}
	if m.retry {
		left := max(m.until.Sub(now), 0)
		secs := int(math.Round(left.Seconds()))
		return fmt.Sprintf("Retrying (%s) in %ds… (esc to cancel)", m.attempts(), secs)
	}
	return m.spinner
}

// attempts is the pending retry's attempt out of the chain's count limit,
// "1/3"; "5/∞" for a chain with no count limit (maxAttempts -1, bounded
// by its time budget).
func (m *Model) attempts() string {
	if m.maxAttempt < 0 {
		return fmt.Sprintf("%d/∞", m.attempt)
	}
	return fmt.Sprintf("%d/%d", m.attempt, m.maxAttempt)
}

// Esc returns what the Esc key does now.
func (m *Model) Esc() Esc {
	if len(m.esc) == 0 {
		return EscNothing
	}
	return m.esc[len(m.esc)-1]
}

// TakeLines returns the lines to print since the last call.
func (m *Model) TakeLines() []string {
	out := m.lines
	m.lines = nil
	return out
}

func (m *Model) say(line string) { m.lines = append(m.lines, line) }
func (m *Model) push(e Esc)      { m.esc = append(m.esc, e) }
func (m *Model) pop() {
	if len(m.esc) > 0 {
		m.esc = m.esc[:len(m.esc)-1]
	}
}
