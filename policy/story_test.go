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
	"github.com/agentfsm/agentfsm/transcript"
)

// The policy's stories, told to a bare Engine: each story is a table of
// inputs, each with the effects it must give, read as lines. A player
// stands in for the driver: it remembers the run, the timer and the
// compaction the engine last asked for, so that a step names only what
// happens ("the model answers 503", "the timer fires"), and it keeps the
// time, which moves only when a step says so.

// player carries out a story's inputs on an engine.
type player struct {
	t   *testing.T
	e   *policy.Engine
	now time.Time

	run      policy.RunID
	timer    policy.TimerID
	deadline time.Time
	comp     policy.CompactionID

	// turnErr and turnDone are the last FinishTurn's; compactErr and
	// compactResult the last Compact's or FinishCompact's; promptErr the
	// last Prompt's own error.
	turnErr       error
	turnDone      bool
	compactErr    error
	compactResult *transcript.Compaction
	promptErr     error
	// request is the last StartCompaction's.
	request *policy.SummaryRequest
	// runContext is the last StartRun's context.
	runContext []transcript.Message
	// history are the entries of every Append, in order.
	history []transcript.Entry
}

// input is one step's input: it feeds the engine and returns its effects
// as lines, read at once (an input's effects are valid until the next).
type input func(p *player) []string

// step is one input and the lines its effects must read as; check, when
// set, looks further at the player after the step.
type step struct {
	in    input
	want  []string
	check func(t *testing.T, p *player)
}

// story is one scenario of the policy.
type story struct {
	name  string
	setup func(*policy.Setup)
	steps []step
}

func play(t *testing.T, s story) *player {
	t.Helper()
	set := policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()}
	if s.setup != nil {
		s.setup(&set)
	}
	e, err := policy.New(set)
	require.NoError(t, err)
	p := &player{t: t, e: e, now: t0}
	for i, st := range s.steps {
		got := st.in(p)
		require.Equal(t, st.want, got, "step %d", i)
		if st.check != nil {
			st.check(t, p)
		}
	}
	return p
}

func playAll(t *testing.T, stories []story) {
	for _, s := range stories {
		t.Run(s.name, func(t *testing.T) { play(t, s) })
	}
}

// lines reads effects as lines, noting what the player must remember.
// Times are relative to the input's.
func (p *player) lines(effects []policy.Effect) []string {
	at := p.now
	var out []string
	for _, ef := range effects {
		switch ef.Kind {
		case policy.Emit:
			if l := p.eventLine(ef.Event); l != "" {
				out = append(out, l)
			}
		case policy.StartRun:
			p.run, p.runContext = ef.Run, ef.Context
			kind := "continuation"
			if ef.Prompt != nil {
				kind = "prompt " + ef.Prompt.ID
			}
			l := fmt.Sprintf("start_run %s context=%s", kind, ids(ef.Context))
			if ef.Model != p.e.Model() {
				// A fallback model's run (issue 25) names it.
				l += fmt.Sprintf(" model=%s/%d", ef.Model.ID, ef.Model.ContextWindow)
			}
			out = append(out, l)
		case policy.CancelRun:
			out = append(out, fmt.Sprintf("cancel_run %v", ef.Cause))
		case policy.StartTimer:
			p.timer, p.deadline = ef.Timer, ef.Deadline
			out = append(out, fmt.Sprintf("start_timer %s", ef.Deadline.Sub(at)))
		case policy.StopTimer:
			out = append(out, "stop_timer")
		case policy.StartCompaction:
			p.comp, p.request = ef.Compaction, ef.Request
			r := ef.Request
			l := fmt.Sprintf("start_compaction %s cut=%s kept=%s max=%d", r.Reason, ids(r.Messages), ids(r.Kept), r.MaxChars)
			if r.Instructions != "" {
				l += fmt.Sprintf(" %q", r.Instructions)
			}
			out = append(out, l)
		case policy.CancelCompaction:
			out = append(out, "cancel_compaction")
		case policy.Append:
			var es []string
			p.history = append(p.history, ef.Entries...)
			for _, en := range ef.Entries {
				es = append(es, string(en.Type)+":"+en.ID)
			}
			l := "append " + strings.Join(es, ",")
			if ef.Await {
				l += " await"
			}
			out = append(out, l)
		case policy.MarkUsageLimit:
			out = append(out, fmt.Sprintf("mark_usage_limit %s", ef.Hint))
		case policy.FinishTurn:
			p.turnErr, p.turnDone = ef.Err, true
			out = append(out, "finish_turn "+errLine(ef.Err))
		case policy.FinishCompact:
			p.compactErr, p.compactResult = ef.Err, ef.Result
			if ef.Result != nil {
				out = append(out, fmt.Sprintf("finish_compact %s", compactionLine(ef.Result)))
			} else {
				out = append(out, "finish_compact "+errLine(ef.Err))
			}
		default:
			out = append(out, "unknown effect "+ef.Kind.String())
		}
	}
	return out
}

func (p *player) eventLine(ev events.Event) string {
	switch ev := ev.(type) {
	case events.StateChange:
		return fmt.Sprintf("%s>%s %s", ev.From, ev.To, ev.Trigger)
	case events.AutoRetryStart:
		l := fmt.Sprintf("retry_start %d/%d %dms %s %q", ev.Attempt, ev.MaxAttempts, ev.DelayMs, ev.ErrorClass, ev.ErrorMessage)
		if ev.Credential != "" {
			l += " cred=" + ev.Credential
		}
		if ev.MaxElapsedMs != 0 || ev.ElapsedMs != 0 || ev.RemainingMs != 0 {
			l += fmt.Sprintf(" budget=%d elapsed=%d left=%d", ev.MaxElapsedMs, ev.ElapsedMs, ev.RemainingMs)
		}
		if !ev.ResetAt.IsZero() {
			l += " reset=" + ev.ResetAt.Format(time.RFC3339Nano)
		}
		return l
	case events.AutoRetryEnd:
		wait := ""
		if ev.ResetWait {
			wait = " resetWait"
		}
		if ev.Success {
			return fmt.Sprintf("retry_end ok %d %s%s", ev.Attempt, ev.Outcome, wait)
		}
		l := fmt.Sprintf("retry_end fail %d %s %s %q", ev.Attempt, ev.Outcome, ev.ErrorClass, ev.FinalError)
		if ev.Limit != "" {
			l += " limit=" + string(ev.Limit)
		}
		return l + wait
	case events.AutoCompactionStart:
		return "compaction_start " + string(ev.Reason)
	case events.AutoCompactionEnd:
		switch {
		case ev.Aborted:
			return fmt.Sprintf("compaction_end aborted willRetry=%v", ev.WillRetry)
		case ev.Result != nil:
			return fmt.Sprintf("compaction_end ok willRetry=%v %s", ev.WillRetry, compactionLine(ev.Result))
		}
		return fmt.Sprintf("compaction_end failed willRetry=%v %q", ev.WillRetry, ev.ErrorMessage)
	case events.TurnSettled:
		if ev.Err == nil {
			return "turn_settled ok"
		}
		return fmt.Sprintf("turn_settled %s", ev.ErrorClass)
	case events.MessageEnd:
		m := ev.Message
		if m.IsError() {
			return fmt.Sprintf("message %s %s %s/%s %q", m.ID, m.StopReason, m.Provider, m.Model, m.ErrorMessage)
		}
		if m.Role != transcript.RoleAssistant {
			return fmt.Sprintf("message %s %s", m.ID, m.Role)
		}
		return fmt.Sprintf("message %s %s", m.ID, m.StopReason)
	case events.AgentEnd:
		return fmt.Sprintf("agent_end %s", ids(ev.Messages))
	case events.ModelFallback:
		return fmt.Sprintf("model_fallback %s>%s %s until=%s", ev.From, ev.To, ev.Reason, ev.Until.Sub(p.now))
	case events.ModelRevert:
		return fmt.Sprintf("model_revert %s>%s", ev.From, ev.To)
	case events.SharedLimitWait:
		return fmt.Sprintf("shared_limit_wait %s %s until=%s", ev.Key, ev.Reason, ev.Until.Sub(p.now))
	}
	// agent_start, message_start and message_update are the agent's own,
	// passed through: left out.
	return ""
}

func compactionLine(c *transcript.Compaction) string {
	return fmt.Sprintf("%s %q kept=%s before=%d", c.Reason, c.Summary, c.FirstKeptEntryID, c.TokensBefore)
}

func errLine(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func ids(ms []transcript.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// The inputs.

// prompt is the user's Prompt.
func promptIn(text string) input {
	return func(p *player) []string {
		effects, err := p.e.Prompt(p.now, text)
		p.promptErr = err
		return p.lines(effects)
	}
}

// reply is one whole run answered by the model with m: agent_start, the
// message, agent_end, and the run's return.
func reply(m transcript.Message) input { return replyWith(m, policy.RunReturn{}) }

func replyWith(m transcript.Message, ret policy.RunReturn) input {
	return func(p *player) []string {
		var out []string
		for _, ev := range []events.Event{events.AgentStart{}, events.MessageStart{Message: m}, events.MessageEnd{Message: m}, events.AgentEnd{}} {
			out = append(out, p.lines(p.e.RunEvent(p.now, p.run, ev))...)
		}
		return append(out, p.lines(p.e.RunReturned(p.now, p.run, ret))...)
	}
}

// feed feeds the run in flight some of its events, not its end.
func feed(evs ...events.Event) input {
	return func(p *player) []string {
		var out []string
		for _, ev := range evs {
			out = append(out, p.lines(p.e.RunEvent(p.now, p.run, ev))...)
		}
		return out
	}
}

// returned is the run in flight's return.
func returned(ret policy.RunReturn) input {
	return func(p *player) []string { return p.lines(p.e.RunReturned(p.now, p.run, ret)) }
}

// fire moves the time to the backoff's deadline and fires its timer.
func fire() input {
	return func(p *player) []string {
		p.now = p.deadline
		return p.lines(p.e.TimerFired(p.now, p.timer))
	}
}

// elapse moves the time on; it is no input to the engine.
func elapse(d time.Duration) input {
	return func(p *player) []string {
		p.now = p.now.Add(d)
		return nil
	}
}

// summarized is the summarizer's answer and the compaction entry's append.
func summarized(text string) input {
	return func(p *player) []string {
		out := p.lines(p.e.CompactionFinished(p.now, p.comp, policy.Summary{Text: text}, nil))
		return append(out, p.lines(p.e.Appended(p.now, nil))...)
	}
}

// summaryFailed is the summarizer's failure.
func summaryFailed(err error) input {
	return func(p *player) []string {
		return p.lines(p.e.CompactionFinished(p.now, p.comp, policy.Summary{}, err))
	}
}

// appended is the history's report of the last Append.
func appended(err error) input {
	return func(p *player) []string { return p.lines(p.e.Appended(p.now, err)) }
}

func abortIn() input {
	return func(p *player) []string { return p.lines(p.e.Abort(p.now, errors.New("user"))) }
}

func abortRetryIn() input {
	return func(p *player) []string { return p.lines(p.e.AbortRetry(p.now)) }
}

func abortCompactionIn() input {
	return func(p *player) []string { return p.lines(p.e.AbortCompaction(p.now)) }
}

func compactIn(instructions string) input {
	return func(p *player) []string {
		effects, err := p.e.Compact(p.now, instructions)
		lines := p.lines(effects)
		p.compactErr = err
		return lines
	}
}

// switched is the credential store's answer.
func switched(yes bool) input {
	return func(p *player) []string { return p.lines(p.e.UsageLimitAnswered(p.now, yes)) }
}

// set changes a setting; it has no effects.
func set(f func(e *policy.Engine)) input {
	return func(p *player) []string {
		f(p.e)
		return nil
	}
}

// The model's answers.

func errorAnswer(text string) transcript.Message { return answer(transcript.StopReasonError, text) }

func okAnswer(text string) transcript.Message { return answer(transcript.StopReasonStop, text) }

// sized is a successful answer reporting a context of total tokens.
func sized(total int) transcript.Message {
	m := okAnswer("big")
	m.Usage = &transcript.Usage{Input: total, TotalTokens: total}
	return m
}

// turnFailed checks the turn's error is each of targets.
func turnFailed(targets ...error) func(t *testing.T, p *player) {
	return func(t *testing.T, p *player) {
		t.Helper()
		require.True(t, p.turnDone, "the turn settled")
		for _, target := range targets {
			assert.ErrorIs(t, p.turnErr, target)
		}
	}
}

// smallKeep keeps only the last few tokens in a compaction, so a short
// conversation has something to compact.
func smallKeep(s *policy.Setup) { s.Config.Compaction.KeepRecentTokens = 5 }

// The warm-up every compaction story starts with: a first exchange.
var warmUp = []step{
	{in: promptIn("first question, long enough to matter"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
	{in: reply(okAnswer("first answer")), want: []string{
		"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]",
		"idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
	}},
}

func with(steps ...[]step) []step {
	var out []step
	for _, s := range steps {
		out = append(out, s...)
	}
	return out
}

const tooLong = "prompt is too long: 213462 tokens > 200000 maximum"
