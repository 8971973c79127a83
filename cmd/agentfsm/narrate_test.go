package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

// liveNarrator is a narrator on a terminal width columns wide, writing to
// out.
func liveNarrator(out *syncBuffer, width int) *narrator {
	return &narrator{w: out, words: true, liveWidth: width, keep: func() bool { return false }, now: time.Now}
}

var overloaded = events.AutoRetryStart{Attempt: 1, MaxAttempts: 3, DelayMs: 3000,
	ErrorMessage: "529 overloaded_error: Overloaded", ErrorClass: classify.Retryable}

// TestNarratorCountsDown: on a terminal, a retry's line counts down in
// place each second, and the event that ends the wait leaves it as a
// file would hold it. The countdown's goroutine ends with it (synctest
// fails on one left behind).
func TestNarratorCountsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		n := liveNarrator(&out, 200)
		n.apply(nil, overloaded)
		n.apply(nil, events.StateChange{From: states.Classifying, To: states.Backoff, Trigger: transitions.Retry})
		time.Sleep(2500 * time.Millisecond)
		n.apply(nil, events.StateChange{From: states.Backoff, To: states.Continuing, Trigger: transitions.Elapsed})
		const line = "agentfsm chat: retrying in %s (attempt 1 of 3): 529 overloaded_error: Overloaded"
		want := "\r\x1b[K" + strings.Replace(line, "%s", "3s", 1) +
			"\r\x1b[K" + strings.Replace(line, "%s", "2s", 1) +
			"\r\x1b[K" + strings.Replace(line, "%s", "1s", 1) +
			"\r\x1b[K" + strings.Replace(line, "%s", "3s", 1) + "\n"
		assert.Equal(t, want, out.String())

		// Nothing more is drawn once the wait ended.
		time.Sleep(5 * time.Second)
		assert.Equal(t, want, out.String())
	})
}

// TestNarratorCountdownStartsAtItsDelay: the countdown's first line says
// the whole delay, however long the narrator took between reading the
// clock for the deadline and drawing it (a loaded machine: each reading of
// the clock here is a millisecond later than the one before).
func TestNarratorCountdownStartsAtItsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		n := liveNarrator(&out, 200)
		clock := time.Now()
		n.now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
		short := overloaded
		short.DelayMs = 50
		n.apply(nil, short)
		n.apply(nil, events.StateChange{From: states.Classifying, To: states.Backoff, Trigger: transitions.Retry})
		n.apply(nil, events.StateChange{From: states.Backoff, To: states.Continuing, Trigger: transitions.Elapsed})
		const line = "agentfsm chat: retrying in 50ms (attempt 1 of 3): 529 overloaded_error: Overloaded"
		assert.Equal(t, "\r\x1b[K"+line+"\r\x1b[K"+line+"\n", out.String())
	})
}

// TestNarratorLiveLineFitsTheTerminal: a live line longer than the
// terminal is cut to its width (a wrapped line could not be rewritten in
// place); the line left at the end is whole.
func TestNarratorLiveLineFitsTheTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		n := liveNarrator(&out, 30)
		n.apply(nil, overloaded)
		n.apply(nil, events.StateChange{Trigger: transitions.Retry})
		n.apply(nil, events.TurnSettled{})
		assert.Equal(t, "\r\x1b[Kagentfsm chat: retrying in 3…"+
			"\r\x1b[Kagentfsm chat: retrying in 3s (attempt 1 of 3): 529 overloaded_error: Overloaded\n", out.String())
	})
}

// TestNarratorCompactionOnATerminal: a compaction's line shows the time it
// has taken until it ends, through the state changes in between; then its
// outcome.
func TestNarratorCompactionOnATerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		n := liveNarrator(&out, 200)
		n.apply(nil, events.AutoCompactionStart{Reason: transcript.ReasonOverflow})
		n.apply(nil, events.StateChange{From: states.Classifying, To: states.Compacting, Trigger: transitions.Overflow})
		time.Sleep(1500 * time.Millisecond)
		n.apply(nil, events.AutoCompactionEnd{Result: &transcript.Compaction{TokensBefore: 213462, TokensAfter: 1204}, WillRetry: true})
		const what = "agentfsm chat: compacting the conversation: the context overflowed"
		assert.Equal(t, "\r\x1b[K"+what+"… 0s\r\x1b[K"+what+"… 1s\r\x1b[K"+what+"\n"+
			"agentfsm chat: compacted the conversation: 213462 tokens → 1204; the turn goes on\n", out.String())
	})
}

// TestNarratorInAPipe: without a terminal, each line is written once,
// whole; --quiet (words false) writes none.
func TestNarratorInAPipe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		n := liveNarrator(&out, 0)
		budget := overloaded
		budget.MaxAttempts, budget.DelayMs, budget.MaxElapsedMs, budget.RemainingMs = -1, 1500, 600000, 590000
		n.apply(nil, budget)
		n.apply(nil, events.StateChange{Trigger: transitions.Retry})
		time.Sleep(3 * time.Second)
		n.apply(nil, events.AutoCompactionStart{Reason: transcript.ReasonThreshold})
		n.apply(nil, events.AutoCompactionEnd{ErrorMessage: "the summarizer failed:\n\x1b[31mboom"})
		assert.Equal(t, "agentfsm chat: retrying in 1.5s (attempt 1, no count limit, 9m50s of the 10m0s budget left): 529 overloaded_error: Overloaded\n"+
			"agentfsm chat: compacting the conversation: the context nears the model's window\n"+
			`agentfsm chat: the compaction failed: the summarizer failed: \x1b[31mboom`+"\n", out.String())

		var quiet syncBuffer
		n = liveNarrator(&quiet, 200)
		n.words = false
		n.apply(nil, overloaded)
		n.apply(nil, events.StateChange{Trigger: transitions.Retry})
		n.apply(nil, events.AutoCompactionStart{Reason: transcript.ReasonOverflow})
		n.apply(nil, events.AutoCompactionEnd{Aborted: true})
		n.apply(nil, events.TurnSettled{})
		assert.Empty(t, quiet.String())
	})
}

// TestTurnErrorNamesTheRetriedError: a turn ended by --timeout while a
// chain was retrying names that chain's latest error; a chain that
// recovered before is not named; other errors are as they are.
func TestTurnErrorNamesTheRetriedError(t *testing.T) {
	var out syncBuffer
	n := liveNarrator(&out, 0)
	n.words = false
	deadline := fmt.Errorf("%w: %w", policy.ErrAborted, context.DeadlineExceeded)
	n.apply(nil, overloaded)
	n.apply(nil, events.AutoRetryEnd{Success: false, Attempt: 1, FinalError: "Retry cancelled", Outcome: events.RetryCancelled})
	n.apply(nil, events.TurnSettled{Err: deadline})
	assert.Equal(t, "the turn ran past --timeout 3s while retrying (attempt 1 of 3) after: 529 overloaded_error: Overloaded; policy: aborted: context deadline exceeded",
		turnError(deadline, 3*time.Second, n))

	n.apply(nil, overloaded)
	n.apply(nil, events.AutoRetryEnd{Success: true, Attempt: 1, Outcome: events.RetryRecovered})
	n.apply(nil, events.TurnSettled{Err: deadline})
	assert.Equal(t, "the turn ran past --timeout 3s; policy: aborted: context deadline exceeded", turnError(deadline, 3*time.Second, n))
	assert.Equal(t, "policy: aborted: context deadline exceeded", turnError(deadline, 0, n), "no --timeout: a deadline of the caller's")
}

// A wait on a limit shared by sessions is one line in words, naming the
// key, why and until when.
func TestNarratorSaysASharedLimitWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out syncBuffer
		n := liveNarrator(&out, 0)
		n.apply(nil, events.SharedLimitWait{Key: "anthropic/work", Until: time.Now().Add(2 * time.Second), Reason: "rate_limited"})
		until := time.Now().Add(2 * time.Second).UTC().Format(time.TimeOnly)
		assert.Equal(t, "agentfsm chat: the shared limit on anthropic/work (rate_limited) holds this session: waiting until "+until+" UTC, in 2s\n", out.String())
	})
}
