package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

// The engine's own tests: a sequence of inputs in, the effects out, read
// as lines. No goroutine, no timer and no clock are involved: time is the
// inputs' own.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var testModel = policy.Model{Provider: "p", ID: "m", ContextWindow: 200000}

func newEngine(t *testing.T, mod func(*policy.Setup)) *policy.Engine {
	t.Helper()
	s := policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()}
	if mod != nil {
		mod(&s)
	}
	e, err := policy.New(s)
	require.NoError(t, err)
	return e
}

// describe reads effects as lines, leaving out the agent's own events.
// compactionIn is the compaction effects start: the ID of their
// StartCompaction, which the test requires.
func compactionIn(t *testing.T, effects []policy.Effect) policy.CompactionID {
	t.Helper()
	for _, ef := range effects {
		if ef.Kind == policy.StartCompaction {
			return ef.Compaction
		}
	}
	t.Fatalf("no compaction started: %v", describe(effects))
	return 0
}

func describe(effects []policy.Effect) []string {
	var out []string
	for _, ef := range effects {
		switch ef.Kind {
		case policy.Emit:
			switch ev := ef.Event.(type) {
			case events.StateChange:
				out = append(out, fmt.Sprintf("state %s>%s %s", ev.From, ev.To, ev.Trigger))
			case events.AutoRetryStart:
				out = append(out, fmt.Sprintf("retry_start %d/%d %dms", ev.Attempt, ev.MaxAttempts, ev.DelayMs))
			case events.AutoRetryEnd:
				l := fmt.Sprintf("retry_end %v %d %s", ev.Success, ev.Attempt, ev.FinalError)
				if ev.ResetWait {
					l += " resetWait"
				}
				out = append(out, l)
			case events.AutoCompactionStart:
				out = append(out, "compaction_start "+string(ev.Reason))
			case events.AutoCompactionEnd:
				out = append(out, fmt.Sprintf("compaction_end result=%v willRetry=%v %s", ev.Result != nil, ev.WillRetry, ev.ErrorMessage))
			case events.TurnSettled:
				out = append(out, fmt.Sprintf("turn_settled %v", ev.Err == nil))
			}
		case policy.StartRun:
			out = append(out, fmt.Sprintf("start_run %d prompt=%v context=%d", ef.Run, ef.Prompt != nil, len(ef.Context)))
		case policy.CancelRun:
			out = append(out, fmt.Sprintf("cancel_run %d", ef.Run))
		case policy.StartTimer:
			out = append(out, fmt.Sprintf("start_timer %d +%s", ef.Timer, ef.Deadline.Sub(t0)))
		case policy.StopTimer:
			out = append(out, "stop_timer")
		case policy.StartCompaction:
			out = append(out, fmt.Sprintf("start_compaction %d cut=%d kept=%d", ef.Compaction, len(ef.Request.Messages), len(ef.Request.Kept)))
		case policy.CancelCompaction:
			out = append(out, fmt.Sprintf("cancel_compaction %d", ef.Compaction))
		case policy.Append:
			var types []string
			for _, e := range ef.Entries {
				types = append(types, string(e.Type))
			}
			out = append(out, fmt.Sprintf("append %s await=%v", strings.Join(types, ","), ef.Await))
		case policy.MarkUsageLimit:
			out = append(out, fmt.Sprintf("mark_usage_limit %s", ef.Hint))
		case policy.FinishTurn:
			out = append(out, fmt.Sprintf("finish_turn %v", ef.Err))
		case policy.FinishCompact:
			out = append(out, fmt.Sprintf("finish_compact %v", ef.Err))
		}
	}
	return out
}

// runOf returns the run the effects start.
func runOf(t *testing.T, effects []policy.Effect) policy.RunID {
	t.Helper()
	for _, ef := range effects {
		if ef.Kind == policy.StartRun {
			return ef.Run
		}
	}
	t.Fatalf("no run started in %v", describe(effects))
	return 0
}

func answer(stop transcript.StopReason, text string) transcript.Message {
	m := transcript.Message{Role: transcript.RoleAssistant, StopReason: stop, Provider: "p", Model: "m",
		Usage: &transcript.Usage{Input: 100, Output: 20, TotalTokens: 120}}
	if stop == transcript.StopReasonError {
		m.ErrorMessage = text
	} else {
		m.Content = transcript.TextContent(text)
	}
	return m
}

// call feeds the events of one model call answered by m, and the run's end.
func call(e *policy.Engine, at time.Time, run policy.RunID, m transcript.Message) []string {
	var out []string
	for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
		out = append(out, describe(e.RunEvent(at, run, ev))...)
	}
	return append(out, describe(e.RunReturned(at, run, policy.RunReturn{}))...)
}

func prompt(t *testing.T, e *policy.Engine, at time.Time) ([]string, policy.RunID) {
	t.Helper()
	effects, err := e.Prompt(at, "hi")
	require.NoError(t, err)
	return describe(effects), runOf(t, effects)
}

func TestEngineTransientThenSuccess(t *testing.T) {
	e := newEngine(t, nil)
	lines, run := prompt(t, e, t0)
	assert.Equal(t, []string{"start_run 1 prompt=true context=1", "append message await=false"}, lines)

	assert.Equal(t, []string{
		"append message await=false",
		"state idle>classifying agent_end",
		"retry_start 1/3 2000ms",
		"start_timer 2 +2s",
		"state classifying>backoff retry",
		"append removal await=false",
	}, call(e, t0, run, answer(transcript.StopReasonError, "503 Service Unavailable")))
	assert.Equal(t, policy.Status{State: "backoff", Attempt: 1, Retrying: true, RetryEnabled: true, CompactionEnabled: true, MessageCount: 1}, e.Status())

	assert.Empty(t, describe(e.TimerFired(t0.Add(time.Second), 2)), "a firing before the deadline")
	assert.Empty(t, describe(e.TimerFired(t0.Add(2*time.Second), 1)), "another timer's firing")
	effects := e.TimerFired(t0.Add(2*time.Second), 2)
	assert.Equal(t, []string{"start_run 3 prompt=false context=1", "state backoff>continuing elapsed"}, describe(effects))

	assert.Equal(t, []string{
		"retry_end true 1 ",
		"append message await=false",
		"state continuing>classifying agent_end",
		"state classifying>idle accept",
		"turn_settled true",
		"finish_turn <nil>",
	}, call(e, t0.Add(2*time.Second), runOf(t, effects), answer(transcript.StopReasonStop, "done")))
	assert.True(t, !e.Status().Streaming && !e.Status().Compacting)
}

func TestEngineExhausted(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Config.Retry.MaxRetries = 1 })
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonError, "overloaded"))
	effects := e.TimerFired(t0.Add(2*time.Second), 2)
	assert.Equal(t, []string{
		"append message await=false",
		"state continuing>classifying agent_end",
		"retry_end false 1 overloaded",
		"state classifying>exhausted exhaust",
		"state exhausted>idle reset",
		"turn_settled false",
		"finish_turn policy: retries exhausted after 1 attempts: overloaded",
	}, call(e, t0, runOf(t, effects), answer(transcript.StopReasonError, "overloaded")))
}

// A usage limit asks the credential store before deciding; a switch
// retries at once.
func TestEngineUsageLimitAsksCredentials(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Credentials = true })
	_, run := prompt(t, e, t0)
	lines := call(e, t0, run, answer(transcript.StopReasonError, "429 usage limit reached; retry-after: 30"))
	assert.Equal(t, []string{"append message await=false", "state idle>classifying agent_end", "mark_usage_limit 30s"}, lines, "no decision yet")
	assert.True(t, e.Status().Streaming, "the run's decision is still pending")
	assert.Equal(t, states.Classifying, e.Status().State, "the machine waits in classifying")
	assert.Equal(t, []string{
		"retry_start 1/3 0ms",
		"start_timer 2 +0s",
		"state classifying>backoff retry_now",
		"append removal await=false",
	}, describe(e.UsageLimitAnswered(t0, true)))
}

func TestEngineAbortDuringBackoff(t *testing.T) {
	e := newEngine(t, nil)
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonError, "503"))
	assert.Equal(t, []string{
		"stop_timer",
		"retry_end false 1 Retry cancelled",
		"state backoff>cancelled cancel",
		"state cancelled>idle reset",
		"turn_settled false",
		"finish_turn policy: aborted",
	}, describe(e.Abort(t0.Add(time.Second), errors.New("user"))))
	assert.Empty(t, describe(e.TimerFired(t0.Add(2*time.Second), 2)), "the cancelled wait's timer changes nothing")
}

// An aborted run's last message decides nothing.
func TestEngineAbortedRunDecidesNothing(t *testing.T) {
	e := newEngine(t, nil)
	_, run := prompt(t, e, t0)
	m := answer(transcript.StopReasonError, "503")
	e.RunEvent(t0, run, events.AgentStart{})
	e.RunEvent(t0, run, events.MessageEnd{Message: m})
	assert.Equal(t, []string{"cancel_run 1"}, describe(e.Abort(t0, errors.New("user"))))
	assert.Equal(t, []string{"turn_settled false", "finish_turn policy: aborted"},
		describe(e.RunReturned(t0, run, policy.RunReturn{})), "the missing agent_end is the driver's to report, and nothing is decided")
}

// An overflow compacts, appends the compaction (awaiting the history) and
// continues once it is written.
func TestEngineOverflowCompactsAndContinues(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Config.Compaction.KeepRecentTokens = 5 })
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonStop, "a first answer, long enough"))
	_, run = prompt(t, e, t0)
	lines := call(e, t0, run, answer(transcript.StopReasonError, "prompt is too long"))
	assert.Equal(t, []string{
		"append message await=false",
		"state idle>classifying agent_end",
		"compaction_start overflow",
		"start_compaction 3 cut=2 kept=1",
		"state classifying>compacting overflow",
		"append removal await=false",
	}, lines, "the provider said the request was over the window: by that, the answer leaves no room for a summary")
	assert.Equal(t, []string{"append compaction await=true"},
		describe(e.CompactionFinished(t0, 3, policy.Summary{Text: "summary"}, nil)), "nothing changes before the entry is written")
	effects := e.Appended(t0, nil)
	assert.Equal(t, []string{
		"compaction_end result=true willRetry=true ",
		"start_run 4 prompt=false context=2",
		"state compacting>continuing resume",
	}, describe(effects))
}

// A compaction whose entry cannot be written fails and changes nothing.
func TestEngineCompactionEntryNotWritten(t *testing.T) {
	e := newEngine(t, func(s *policy.Setup) { s.Config.Compaction.KeepRecentTokens = 5 })
	_, run := prompt(t, e, t0)
	call(e, t0, run, answer(transcript.StopReasonStop, "a first answer, long enough"))
	before := e.Messages()
	effects, err := e.Compact(t0, "")
	require.NoError(t, err)
	e.CompactionFinished(t0, compactionIn(t, effects), policy.Summary{Text: "summary"}, nil)
	assert.Equal(t, []string{"finish_compact policy: history write failed: disk full", "state compacting>idle compaction_end"},
		describe(e.Appended(t0, errors.New("disk full"))))
	assert.Equal(t, before, e.Messages())
}

// The same inputs give the same effects.
func TestEngineIsDeterministic(t *testing.T) {
	play := func() []string {
		e := newEngine(t, func(s *policy.Setup) { s.Config.Retry.Jitter = 0.5 })
		var out []string
		lines, run := prompt(t, e, t0)
		out = append(out, lines...)
		for i := range 3 {
			for _, ev := range []events.Event{events.AgentStart{}, events.MessageEnd{Message: answer(transcript.StopReasonError, "503")}, events.AgentEnd{}} {
				out = append(out, describe(e.RunEvent(t0, run, ev))...)
			}
			effects := e.RunReturned(t0, run, policy.RunReturn{Draw: 0.25 * float64(i)})
			out = append(out, describe(effects)...)
			for _, ef := range effects {
				if ef.Kind == policy.StartTimer {
					effects = e.TimerFired(ef.Deadline, ef.Timer)
					out = append(out, describe(effects)...)
					run = runOf(t, effects)
				}
			}
		}
		return out
	}
	assert.Equal(t, play(), play())
}

func TestEngineBusy(t *testing.T) {
	e := newEngine(t, nil)
	prompt(t, e, t0)
	effects, err := e.Prompt(t0, "again")
	assert.ErrorIs(t, err, policy.ErrBusy)
	assert.Empty(t, effects)
	_, err = e.Compact(t0, "")
	assert.ErrorIs(t, err, policy.ErrBusy)
}

func TestEngineRefusesBadSetup(t *testing.T) {
	_, err := policy.New(policy.Setup{Config: policy.DefaultConfig()})
	assert.ErrorContains(t, err, "empty session ID")
	cfg := policy.DefaultConfig()
	cfg.Retry.Jitter = 2
	_, err = policy.New(policy.Setup{SessionID: "s", Config: cfg})
	assert.ErrorIs(t, err, policy.ErrInvalidConfig)
	_, err = policy.New(policy.Setup{SessionID: "s", Config: policy.DefaultConfig(), History: []transcript.Entry{{Type: "nope", ID: "x"}}})
	assert.ErrorIs(t, err, transcript.ErrInvalidEntry)
}

// An engine started on a history's tail, from the latest compaction's
// first kept entry on, with the count of the entries before it, has the
// runtime context, the entry count and the ID counter of one started on
// the whole history, an earlier compaction inside the tail included (issue
// item 2). A negative count is refused.
func TestEngineOnATail(t *testing.T) {
	msg := func(id string, role transcript.Role) transcript.Entry {
		return transcript.Entry{Type: transcript.EntryMessage, ID: id, Message: &transcript.Message{ID: id, Role: role, StopReason: "stop", Content: transcript.TextContent(id)}}
	}
	compaction := func(id, kept string) transcript.Entry {
		return transcript.Entry{Type: transcript.EntryCompaction, ID: id, Compaction: &transcript.Compaction{Summary: "summary " + id, FirstKeptEntryID: kept}}
	}
	history := []transcript.Entry{
		msg("user-1", transcript.RoleUser), msg("msg-2", transcript.RoleAssistant),
		msg("user-3", transcript.RoleUser), msg("msg-4", transcript.RoleAssistant),
		compaction("compaction-5", "user-1"), // before the tail
		msg("user-6", transcript.RoleUser), msg("msg-7", transcript.RoleAssistant),
		{Type: transcript.EntryRemoval, ID: "msg-7"},
		compaction("compaction-8", "user-3"),
		msg("user-9", transcript.RoleUser),
	}
	whole, err := policy.New(policy.Setup{SessionID: "s", Config: policy.DefaultConfig(), History: history})
	require.NoError(t, err)
	tail, err := policy.New(policy.Setup{SessionID: "s", Config: policy.DefaultConfig(), History: history[2:], Before: 2})
	require.NoError(t, err)
	assert.Equal(t, whole.Messages(), tail.Messages())
	assert.Len(t, tail.Messages(), 5, "the summary, user-3, msg-4, user-6, user-9")
	assert.Equal(t, whole.Snapshot(), tail.Snapshot())
	_, err = whole.Prompt(t0, "next")
	require.NoError(t, err)
	_, err = tail.Prompt(t0, "next")
	require.NoError(t, err)
	assert.Equal(t, whole.Messages(), tail.Messages(), "the same next ID")

	_, err = policy.New(policy.Setup{SessionID: "s", Config: policy.DefaultConfig(), History: history, Before: -1})
	assert.ErrorContains(t, err, "negative Before")
}
