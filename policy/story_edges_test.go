package policy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// The edges of the engine's contract that the stories of a turn pass by:
// the agent's own message IDs, messages that cannot be written, settings
// and snapshots a hand could write, and the digest's limits.

// withID is m under the agent's own ID.
func withID(m transcript.Message, id string) transcript.Message {
	m.ID = id
	return m
}

// An agent's own ID is kept unless a message of the runtime context has it
// or it has the form of the session's IDs with a number the counter has
// passed (docs/session.md, "History"): then it is replaced by a new msg-N.
func TestStoryAgentMessageIDs(t *testing.T) {
	// After the prompt, user-1, the counter stands at 1.
	for id, want := range map[string]string{
		"":        "msg-2",
		"user-1":  "msg-2", // taken
		"msg-1":   "msg-2", // the counter has passed 1
		"msg-0":   "msg-0", // 0 is no number the counter gives out
		"msg-7":   "msg-7", // the counter has not reached 7
		"agent-1": "agent-1",
		"msg-x":   "msg-x",
	} {
		t.Run(id, func(t *testing.T) {
			play(t, story{steps: []step{
				{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
				{in: reply(withID(okAnswer("hello"), id)), want: []string{
					"message " + want + " stop", "append message:" + want, "agent_end [" + want + "]",
					"idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
				}},
			}})
		})
	}
}

// without leaves out of in's lines those that start with prefix (a check
// looks at them instead).
func without(prefix string, in input) input {
	return func(p *player) []string {
		var out []string
		for _, l := range in(p) {
			if !strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
		return out
	}
}

// only keeps of in's lines those that start with prefix.
func only(prefix string, in input) input {
	return func(p *player) []string {
		var out []string
		for _, l := range in(p) {
			if strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
		return out
	}
}

// unwritable is an assistant message with a block no history can hold.
func unwritable(id string) transcript.Message {
	m := okAnswer("partly")
	m.ID = id
	m.Content = append(m.Content, transcript.Block{Type: "hologram"})
	return m
}

// A message the agent ends that cannot be written is not kept: the run is
// cancelled and ends in an error message that names the message (by the
// agent's ID when it gave one) and what is wrong, and the turn fails on it,
// never retried (docs/session.md, "Content blocks").
func TestStoryUnwritableMessage(t *testing.T) {
	const bad = `unknown content block type \"hologram\"`
	refused := func(id string) []step {
		named := "message"
		if id != "" {
			named = `message \"` + id + `\"`
		}
		why := `policy: the agent's assistant ` + named + ` cannot be written: transcript: block 1: ` + bad
		return []step{
			{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: unwritable(id)}), want: []string{
				"cancel_run the agent sent a message that cannot be written",
				`message msg-2 error p/m "` + why + `"`,
				"agent_end [msg-2]", "append message:msg-2",
			}},
			{in: without("finish_turn", returned(policy.RunReturn{})), want: []string{
				"idle>classifying agent_end", "classifying>idle accept", "turn_settled fatal",
			}, check: func(t *testing.T, p *player) {
				turnFailed(policy.ErrProvider)(t, p)
				assert.ErrorContains(t, p.turnErr, strings.ReplaceAll(why, `\"`, `"`))
			}},
		}
	}
	playAll(t, []story{
		{name: "with no ID", steps: refused("")},
		{name: "with its ID", steps: refused("a-1")},
		{name: "in the run's list only", steps: []step{
			// agent_end carries the run's own messages when its list
			// holds one that cannot be written.
			{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
			{in: feed(events.AgentStart{}, events.MessageEnd{Message: okAnswer("fine")}, events.AgentEnd{Messages: []transcript.Message{unwritable("a-1")}}), want: []string{
				"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]",
			}},
		}},
	})
}

// A message in progress (message_start, message_update) is only shown: the
// blocks of it that cannot be written are left out of the event, the rest
// passed on.
func TestUnwritableBlocksAreNotShown(t *testing.T) {
	e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
	require.NoError(t, err)
	effects, err := e.Prompt(t0, "hi")
	require.NoError(t, err)
	var run policy.RunID
	for _, ef := range effects {
		if ef.Kind == policy.StartRun {
			run = ef.Run
		}
	}
	e.RunEvent(t0, run, events.AgentStart{})
	// A message with no content yet is shown as it is.
	empty := transcript.Message{Role: transcript.RoleAssistant}
	for _, ef := range e.RunEvent(t0, run, events.MessageStart{Message: empty}) {
		if ev, ok := ef.Event.(events.MessageStart); ok {
			assert.Equal(t, empty, ev.Message)
		}
	}
	for _, ev := range []events.Event{events.MessageStart{Message: unwritable("a-1")}, events.MessageUpdate{Message: unwritable("a-1")}} {
		var shown []transcript.Block
		for _, ef := range e.RunEvent(t0, run, ev) {
			switch ev := ef.Event.(type) {
			case events.MessageStart:
				shown = ev.Message.Content
			case events.MessageUpdate:
				shown = ev.Message.Content
			}
		}
		assert.Equal(t, okAnswer("partly").Content, shown, "%T", ev)
	}
}

// A summary longer than the session keeps (SummaryRequest.MaxChars: a
// quarter of the compaction threshold while the kept messages leave room)
// is cut to its end, on a whole character, after a first line that says
// so; when not even that line fits, the summary is cut to its start
// (docs/session.md, "The summary's budget and deeper cuts").
func TestStoryLongSummaryIsCut(t *testing.T) {
	const note = "[the start of this summary was cut]\n"
	long := strings.Repeat("é", 2000) + "x" // each é starts at an even byte
	for _, c := range []struct {
		name     string
		window   int
		summary  string
		maxChars int
		want     string
	}{
		{"within the limit", 1000, "short", 848, "short"},
		{"exactly the limit", 1000, strings.Repeat("s", 848), 848, strings.Repeat("s", 848)},
		{"cut to its end", 1000, long, 848, note + strings.Repeat("é", (848-len(note)-2)/2) + "x"},
		{"the note and nothing else", 44, long, 36, strings.Repeat("é", 18)},
		{"shorter than the note", 20, "x" + long, 16, "x" + strings.Repeat("é", 7)},
		// The smallest threshold with a budget is 4 tokens (one of budget);
		// below it, and with no window, a summary has no limit.
		{"the smallest budget", 4, long, 4, "éé"},
		{"a threshold too small for a budget", 3, long, 0, long},
		{"no window", 0, long, 0, long},
	} {
		t.Run(c.name, func(t *testing.T) {
			setup := func(s *policy.Setup) {
				compactionOff(s)
				s.Config.Compaction.ReserveTokens = 0
				s.Model.ContextWindow = c.window
				s.Config.Compaction.KeepRecentTokens = 1
			}
			small := func(text string) transcript.Message {
				m := okAnswer(text)
				m.Usage = &transcript.Usage{Input: 3, TotalTokens: 3} // under every window: no silent overflow
				return m
			}
			p := play(t, story{setup: setup, steps: []step{
				{in: without("", promptIn("a"))}, {in: without("", reply(small("b")))},
				{in: without("", promptIn("c"))}, {in: without("", reply(small("d")))},
				{in: without("", compactIn("")), check: func(t *testing.T, p *player) {
					require.NotNil(t, p.request, "a compaction started")
					assert.Equal(t, c.maxChars, p.request.MaxChars)
				}},
				{in: without("", summarized(c.summary))},
			}})
			require.NotNil(t, p.compactResult)
			assert.Equal(t, c.want, p.compactResult.Summary)
			if c.maxChars > 0 {
				assert.LessOrEqual(t, len(p.compactResult.Summary), c.maxChars)
			}
		})
	}
}

// A mistyped value is skipped whole, however deep, by the shape check:
// the error names the key whose type is wrong, and a null after it is
// still found.
func TestParseConfigSkipsNestedValues(t *testing.T) {
	for in, says := range map[string]string{
		`{"retry":{"maxRetries":{"a":[1,{"b":[]}],"c":{}}}}`:   "retry.maxRetries has the wrong type (a JSON object)",
		`{"retry":{"maxRetries":[[1],{"a":2},[]]}}`:            "retry.maxRetries has the wrong type (a JSON array)",
		`{"retry":{"maxRetries":[1,{"a":[2]}],"jitter":null}}`: "retry.jitter must not be null",
		`{"retry":{"maxRetries":{"a":1}},"compaction":null}`:   "compaction must not be null",
	} {
		cfg, err := policy.ParseConfig([]byte(in))
		require.ErrorIs(t, err, policy.ErrInvalidConfig, in)
		assert.Equal(t, policy.Config{}, cfg, in)
		assert.ErrorContains(t, err, says, in)
	}
}

// The images of a message are counted on its line of the digest.
func TestDigestCountsImages(t *testing.T) {
	image := transcript.Block{Type: transcript.BlockImage, Data: "QUJD", MimeType: "image/png"}
	req := policy.SummaryRequest{Messages: []transcript.Message{
		{Role: transcript.RoleUser, Content: []transcript.Block{transcript.TextBlock("compare"), image, image}},
		{Role: transcript.RoleToolResult, ToolName: "shot", Content: []transcript.Block{image, image, image}},
		{Role: transcript.RoleUser, Content: []transcript.Block{image}},
	}}
	sum, err := policy.DigestSummarizer{}.Summarize(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"- user: compare [2 images]", "- tool result (shot): [3 images]", "- user: [1 image]"},
		strings.Split(sum.Text, "\n")[1:])
}

// A history that went on past a snapshot with a compaction is refused,
// naming the entry (counted from 1 in the whole history) and how many the
// snapshot counts.
func TestResumeNamesTheCompactionPastTheSnapshot(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, err := d.e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	snap := d.e.Snapshot() // the run in flight: it may still write
	require.Equal(t, 1, snap.History)
	comp := transcript.Entry{Type: transcript.EntryCompaction, ID: "compaction-9", Compaction: &transcript.Compaction{
		Reason: transcript.ReasonManual, Summary: "s", FirstKeptEntryID: "user-1"}}
	msg := transcript.Entry{Type: transcript.EntryMessage, ID: "msg-2", Message: &transcript.Message{ID: "msg-2", Role: transcript.RoleAssistant, StopReason: "stop", Content: transcript.TextContent("a")}}
	for _, c := range []struct {
		before  int
		history []transcript.Entry
		says    string
	}{
		{0, append(d.history[:1:1], msg, comp), "entry 3, after the 1 it counts, is a compaction"},
		{0, append(d.history[:1:1], comp), "entry 2, after the 1 it counts, is a compaction"},
		// A tail that starts after the entries counted.
		{2, []transcript.Entry{comp}, "entry 3, after the 1 it counts, is a compaction"},
	} {
		_, _, err := policy.Restore(policy.Setup{Model: testModel, Before: c.before, History: c.history}, snap, t0, 0)
		require.ErrorIs(t, err, policy.ErrSnapshot)
		assert.ErrorContains(t, err, c.says)
	}
}

// sizedHistory is a history of alternating user and assistant messages,
// user-1, msg-2, …, each of the given size in estimated tokens.
func sizedHistory(tokens ...int) []transcript.Entry {
	var out []transcript.Entry
	for i, n := range tokens {
		id, role := fmt.Sprintf("user-%d", i+1), transcript.RoleUser
		if i%2 == 1 {
			id, role = fmt.Sprintf("msg-%d", i+1), transcript.RoleAssistant
		}
		m := &transcript.Message{ID: id, Role: role, Content: transcript.TextContent(strings.Repeat("w", 4*n))}
		if role == transcript.RoleAssistant {
			m.StopReason = "stop"
		}
		out = append(out, transcript.Entry{Type: transcript.EntryMessage, ID: id, Message: m})
	}
	return out
}

// toolHistory is a question (10 tokens), a tool call (10), its result
// (300) and an answer (10).
func toolHistory() []transcript.Entry {
	h := sizedHistory(10, 10, 300, 10)
	h[1].Message.Content = []transcript.Block{{Type: transcript.BlockToolCall, ID: "call-1", Name: "read", Arguments: []byte(`{"p":"` + strings.Repeat("w", 40-4-8) + `"}`)}}
	h[1].Message.StopReason = "toolUse"
	h[2].ID = "result-3"
	h[2].Message.ID, h[2].Message.Role, h[2].Message.ToolCallID, h[2].Message.ToolName = "result-3", transcript.RoleToolResult, "call-1", "read"
	return h
}

// keptCallHistory is three messages of 10 tokens, then a tool call (10)
// and its result (690).
func keptCallHistory() []transcript.Entry {
	h := sizedHistory(10, 10, 10, 10, 690)
	h[3].Message.Content = toolHistory()[1].Message.Content
	h[3].Message.StopReason = "toolUse"
	h[4].ID = "result-5"
	h[4].Message.ID, h[4].Message.Role, h[4].Message.ToolCallID, h[4].Message.ToolName = "result-5", transcript.RoleToolResult, "call-1", "read"
	return h
}

// resultFirstHistory is a tool result whose call is no longer in the
// context, an answer and a question, of 10 tokens each.
func resultFirstHistory() []transcript.Entry {
	h := sizedHistory(10, 10, 10)
	h[0].ID = "result-1"
	h[0].Message.ID, h[0].Message.Role, h[0].Message.ToolCallID, h[0].Message.ToolName = "result-1", transcript.RoleToolResult, "call-0", "read"
	return h
}

// With a known window, a compaction makes room for a summary of its budget,
// a quarter of the threshold: when the messages kept would take more than
// the threshold less the budget, it cuts deeper, at the next valid cut
// point until they fit (the last at most), also where keepRecentTokens
// keeps everything after the first message; and a summary over the budget
// in first place is summarized again. The summarizer is told the budget,
// or the room the kept messages leave under the threshold when that is
// less, or when they leave none there the room under the window less
// reserveTokens (docs/session.md, "The summary's budget and deeper cuts").
func TestStoryDeeperCuts(t *testing.T) {
	// A window of 1000 with no reserve: the threshold is 850 tokens, the
	// budget 212 (848 characters), the threshold less the budget 638.
	summarized := func(tokens int) []transcript.Entry {
		h := sizedHistory(10, 10, 0, 10, 10)
		h[2] = transcript.Entry{Type: transcript.EntryCompaction, ID: "compaction-3", Compaction: &transcript.Compaction{
			Reason: transcript.ReasonManual, Summary: strings.Repeat("s", 4*tokens), FirstKeptEntryID: "user-1"}}
		return h
	}
	for _, c := range []struct {
		name    string
		keep    int
		history []transcript.Entry
		want    string // the start_compaction line, or "" for nothing to compact
	}{
		{"the kept messages fit", 600, sizedHistory(10, 10, 300, 300, 300, 38),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4 user-5 msg-6] max=848"},
		{"one token over: one cut point deeper", 600, sizedHistory(10, 10, 300, 300, 300, 39),
			"start_compaction manual cut=[user-1 msg-2 user-3 msg-4] kept=[user-5 msg-6] max=848"},
		{"no later cut point: the room left", 1, sizedHistory(10, 10, 10, 700),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4] max=600"},
		// No room under the threshold: the room under the window (less
		// reserveTokens, here none), so that summary and kept still fit.
		{"no room left: the room under the window", 1, sizedHistory(10, 10, 10, 850),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4] max=600"},
		{"over the threshold: the room under the window", 1, sizedHistory(10, 10, 10, 900),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4] max=400"},
		{"over the window: the budget", 1, sizedHistory(10, 10, 10, 1000),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4] max=848"},
		{"everything kept, cut deeper", 10000, sizedHistory(10, 10, 400, 400),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4] max=848"},
		{"everything kept and it fits", 10000, sizedHistory(10, 10, 300, 300), ""},
		{"a summary over the budget", 10000, summarized(213),
			"start_compaction manual cut=[compaction-3] kept=[user-1 msg-2 msg-4 user-5] max=848"},
		{"a summary of the budget", 10000, summarized(212), ""},
		// A tool call and its result are kept or summarized together: the
		// cut moves on past the result.
		{"never between a tool call and its result", 305, toolHistory(),
			"start_compaction manual cut=[user-1 msg-2 result-3] kept=[msg-4] max=848"},
		// The kept messages are a tool call and its result, too big for
		// the threshold less the budget: kept together, the result
		// truncated to fit, so the summary has the whole budget (issue 23
		// item 5).
		{"a tool call and its result kept together", 1, keptCallHistory(),
			"start_compaction manual cut=[user-1 msg-2 user-3] kept=[msg-4 result-5] max=848"},
		// keepRecentTokens reached only at the first message, which is no
		// cut point: the cut is at the next one.
		{"the first message is no cut point", 30, resultFirstHistory(),
			"start_compaction manual cut=[result-1] kept=[msg-2 user-3] max=848"},
	} {
		t.Run(c.name, func(t *testing.T) {
			setup := func(s *policy.Setup) {
				s.Config.Compaction = policy.CompactionConfig{Enabled: false, ReserveTokens: 0, KeepRecentTokens: c.keep}
				s.Model.ContextWindow = 1000
				s.History = c.history
			}
			var want []string
			if c.want != "" {
				want = []string{c.want}
			}
			play(t, story{setup: setup, steps: []step{
				{in: only("start_compaction", compactIn("")), want: want, check: func(t *testing.T, p *player) {
					if c.want == "" {
						assert.ErrorIs(t, p.compactErr, policy.ErrNothingToCompact)
					} else {
						assert.NoError(t, p.compactErr)
					}
				}},
			}})
		})
	}
}

// A history is replayed into the runtime context: a compaction whose first
// kept entry names no message keeps none of those before it, unless the
// history is a tail that starts after that entry (Setup.Before), where it
// keeps every message replayed.
func TestStoryReplayedCompaction(t *testing.T) {
	history := sizedHistory(1, 1, 0)
	history[2] = transcript.Entry{Type: transcript.EntryCompaction, ID: "compaction-3", Compaction: &transcript.Compaction{
		Reason: transcript.ReasonManual, Summary: "s", FirstKeptEntryID: "user-0"}}
	for before, want := range map[int]string{
		0: "start_run prompt user-4 context=[compaction-3 user-4]",
		5: "start_run prompt user-4 context=[compaction-3 user-1 msg-2 user-4]",
	} {
		play(t, story{
			setup: func(s *policy.Setup) { s.History, s.Before = history, before },
			steps: []step{{in: only("start_run", promptIn("hi")), want: []string{want}}},
		})
	}
}

// An invalid entry of history is named by its place in the whole history,
// counting the entries before a tail.
func TestNewNamesTheInvalidEntry(t *testing.T) {
	history := sizedHistory(1, 1)
	history[1].Message = nil
	for before, says := range map[int]string{0: "entry 2", 3: "entry 5"} {
		_, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig(), History: history, Before: before})
		require.ErrorIs(t, err, transcript.ErrInvalidEntry)
		assert.ErrorContains(t, err, says)
	}
}

// The session counts its IDs on from the highest number ending an ID of the
// history after a dash, whatever comes before the dash.
func TestStoryIDsCountOnFromTheHistory(t *testing.T) {
	for id, want := range map[string]string{
		"msg-41": "user-42",
		"-7":     "user-8",
		"7":      "user-1",
		// The largest number read: a larger one would leave the counter
		// no room, and is read as none.
		"msg-9007199254740992": "user-9007199254740993",
		"msg-9007199254740993": "user-1",
	} {
		history := sizedHistory(1)
		history[0].ID, history[0].Message.ID = id, id
		play(t, story{
			setup: func(s *policy.Setup) { s.History = history },
			steps: []step{{in: only("append", promptIn("hi")), want: []string{"append message:" + want}}},
		})
	}
}

// An effect kind that is none of the constants prints as its number.
func TestEffectKindString(t *testing.T) {
	assert.Equal(t, "Emit", policy.Emit.String())
	assert.Equal(t, "FinishCompact", policy.FinishCompact.String())
	assert.Equal(t, "EffectKind(0)", policy.EffectKind(0).String())
	assert.Equal(t, "EffectKind(12)", (policy.FinishCompact + 1).String())
	assert.Equal(t, "EffectKind(200)", policy.EffectKind(200).String())
}

// The check before a prompt (docs/policy.md §4.6) weighs the last assistant
// message of the runtime context, even when it is the first message.
func TestStoryCheckBeforePromptOnTheFirstMessage(t *testing.T) {
	history := sizedHistory(0, 1)[1:]
	history[0].Message.Usage = &transcript.Usage{Input: 190000, TotalTokens: 190000}
	play(t, story{
		setup: func(s *policy.Setup) { s.History = history },
		steps: []step{{in: only("idle>", promptIn("hi")), want: []string{"idle>compacting check_threshold"}}},
	})
}

// A success reported for an append that awaits none changes nothing; a
// failure fails the turn in flight with ErrHistory.
func TestStoryAppendedOutsideACompaction(t *testing.T) {
	prompt := step{in: promptIn("hi"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}}
	playAll(t, []story{
		{name: "a success", steps: []step{prompt,
			{in: appended(nil), want: nil},
			{in: reply(okAnswer("hello")), want: []string{
				"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]",
				"idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
			}},
		}},
		{name: "a failure", steps: []step{prompt,
			{in: appended(errors.New("disk full")), want: nil},
			{in: without("finish_turn", reply(okAnswer("hello"))), want: []string{
				"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]",
				"idle>classifying agent_end", "classifying>idle accept", "turn_settled none",
			}, check: turnFailed(policy.ErrHistory)},
		}},
	})
}

// The turn's error matches the agent's own Go error of the message it
// failed on (Message.Err), besides the policy's sentinel.
func TestStoryTurnErrorWrapsTheAgentsError(t *testing.T) {
	cause := errors.New("the agent's own error")
	failing := func(text string) transcript.Message {
		m := errorAnswer(text)
		m.Err = cause
		return m
	}
	playAll(t, []story{
		{name: "a provider error", steps: []step{
			{in: only("finish", promptIn("hi"))},
			{in: only("turn_settled", reply(failing("400 bad request"))), want: []string{"turn_settled fatal"},
				check: turnFailed(policy.ErrProvider, cause)},
		}},
		{name: "retries exhausted", setup: func(s *policy.Setup) { s.Config.Retry.MaxRetries = 1 }, steps: []step{
			{in: only("finish", promptIn("hi"))},
			{in: only("retry_start", reply(failing("503 overloaded"))), want: []string{`retry_start 1/1 2000ms retryable "503 overloaded"`}},
			{in: only("finish", fire())},
			{in: only("turn_settled", reply(failing("503 overloaded"))), want: []string{"turn_settled retryable"},
				check: turnFailed(policy.ErrExhausted, policy.ErrProvider, cause)},
		}},
		{name: "an overflow not recovered", setup: compactionOff, steps: []step{
			{in: only("finish", promptIn("hi"))},
			{in: only("turn_settled", reply(failing(tooLong))), want: []string{"turn_settled overflow"},
				check: turnFailed(policy.ErrOverflow, cause)},
		}},
	})
}

// A run has started once it made a model call: its first assistant
// message_start or message_end. One that returns an error before that
// could not start; one that returns an error after it, without agent_end,
// ends in an error message that is decided on (docs/session.md).
func TestStoryARunStartsWithAnAssistantMessage(t *testing.T) {
	boom := errors.New("boom")
	tool := transcript.Message{Role: transcript.RoleToolResult, ToolCallID: "c", ToolName: "read", Content: transcript.TextContent("x")}
	calling := okAnswer("let me look")
	calling.StopReason = "toolUse"
	playAll(t, []story{
		{name: "a tool result only", steps: []step{
			{in: only("finish", promptIn("hi"))},
			{in: only("finish", feed(events.AgentStart{}, events.MessageEnd{Message: tool}))},
			{in: only("turn_settled", returned(policy.RunReturn{Err: boom})), want: []string{"turn_settled none"},
				check: turnFailed(policy.ErrStartFailed, boom)},
		}},
		{name: "an assistant message_end with no message_start", steps: []step{
			{in: only("finish", promptIn("hi"))},
			{in: only("finish", feed(events.AgentStart{}, events.MessageEnd{Message: calling}))},
			{in: only("message", returned(policy.RunReturn{Err: boom})), want: []string{`message msg-3 error p/m "boom"`},
				check: func(t *testing.T, p *player) {
					assert.NotErrorIs(t, p.turnErr, policy.ErrStartFailed)
				}},
		}},
	})
}

// complete fills in a finished message's time when the agent left it out,
// and keeps the agent's own.
func TestStoryMessageTimes(t *testing.T) {
	for given, want := range map[int64]int64{0: t0.UnixMilli(), 123: 123} {
		e, err := policy.New(policy.Setup{SessionID: "s", Model: testModel, Config: policy.DefaultConfig()})
		require.NoError(t, err)
		effects, err := e.Prompt(t0, "hi")
		require.NoError(t, err)
		run := effects[0].Run
		require.Equal(t, policy.StartRun, effects[0].Kind)
		m := okAnswer("hello")
		m.Timestamp = given
		var got []int64
		for _, ef := range e.RunEvent(t0, run, events.MessageEnd{Message: m}) {
			if ev, ok := ef.Event.(events.MessageEnd); ok {
				got = append(got, ev.Message.Timestamp)
			}
			for _, en := range ef.Entries {
				got = append(got, en.Message.Timestamp)
			}
		}
		assert.Equal(t, []int64{want, want}, got, "given %d", given)
	}
}

// A snapshot's Tickets may be as high as 2^53, the largest a resumed
// engine numbers on from; above, it is refused, naming the field.
func TestResumeTicketsUpToTheLimit(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	snap := d.e.Snapshot()
	snap.Tickets = 1 << 53
	e, _, err := policy.Restore(policy.Setup{Model: testModel}, snap, t0, 0)
	require.NoError(t, err)
	effects, err := e.Prompt(t0, "hi")
	require.NoError(t, err)
	require.Equal(t, policy.StartRun, effects[0].Kind)
	assert.Equal(t, policy.RunID(1<<53+1), effects[0].Run)

	snap.Tickets++
	_, _, err = policy.Restore(policy.Setup{Model: testModel}, snap, t0, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "tickets: 9007199254740993")
}

// A compaction reports the context's size before it: the usage of the
// last assistant message that has one and is no error, even the first.
func TestStoryCompactionTokensBefore(t *testing.T) {
	history := sizedHistory(10, 10, 10)
	history[0].ID = "msg-1"
	history[0].Message.ID, history[0].Message.Role, history[0].Message.StopReason = "msg-1", transcript.RoleAssistant, "stop"
	history[0].Message.Usage = &transcript.Usage{Input: 700, Output: 77, TotalTokens: 777}
	play(t, story{
		setup: func(s *policy.Setup) { s.History = history; s.Config.Compaction.KeepRecentTokens = 1 },
		steps: []step{
			{in: only("start_compaction", compactIn("")), want: []string{"start_compaction manual cut=[msg-1 msg-2] kept=[user-3] max=170000"}},
			{in: only("finish_compact", summarized("s")), want: []string{`finish_compact manual "s" kept=user-3 before=777`}},
		},
	})
}

// The stale rule (docs/policy.md §4.2 step 2) looks at the latest
// compaction: with none, no message is stale, not even one whose append
// failed, and a context over the threshold compacts.
func TestStoryNothingIsStaleBeforeACompaction(t *testing.T) {
	big := okAnswer("big")
	big.Usage = &transcript.Usage{Input: 190000, TotalTokens: 190000}
	play(t, story{setup: smallKeep, steps: with(warmUp, []step{
		{in: only("append", promptIn(secondQuestion)), want: []string{"append message:user-3"}},
		{in: only("append", feed(events.AgentStart{}, events.MessageStart{Message: big}, events.MessageEnd{Message: big})), want: []string{"append message:msg-4"}},
		{in: appended(errors.New("disk full"))},
		{in: only("classifying>", with2(feed(events.AgentEnd{}), returned(policy.RunReturn{}))), want: []string{"classifying>compacting threshold"}},
	})})
}

// with2 is in1 then in2, as one step.
func with2(in1, in2 input) input {
	return func(p *player) []string { return append(in1(p), in2(p)...) }
}

// A digest that fits MaxChars exactly keeps every line; one character less
// drops the oldest lines until they fit with a note that says so. An earlier digest's note of no dropped
// lines is not carried over either.
func TestDigestFitsExactly(t *testing.T) {
	msgs := []transcript.Message{
		{Role: transcript.RoleSummary, Content: transcript.TextContent("Summary of 1 earlier messages (1 from the user, 0 from the assistant, 0 tool results).\n[0 earlier lines dropped]\n- user: first")},
		{Role: transcript.RoleUser, Content: transcript.TextContent("second")},
		okAnswer("third"),
	}
	full, err := policy.DigestSummarizer{}.Summarize(context.Background(), policy.SummaryRequest{Messages: msgs})
	require.NoError(t, err)
	head := "Summary of 3 earlier messages (1 from the user, 1 from the assistant, 0 tool results)."
	require.Equal(t, head+"\n- user: first\n- user: second\n- assistant (stop): third", full.Text)

	exact, err := policy.DigestSummarizer{MaxChars: len(full.Text)}.Summarize(context.Background(), policy.SummaryRequest{Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, full.Text, exact.Text)

	short, err := policy.DigestSummarizer{MaxChars: len(full.Text) - 1}.Summarize(context.Background(), policy.SummaryRequest{Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, head+"\n[2 earlier lines dropped]\n- assistant (stop): third", short.Text, "the note takes the room of more than one line")
}

// A line of the digest longer than MaxLineChars runes is cut there and
// ends in an ellipsis; one of exactly MaxLineChars is whole.
func TestDigestClipsLines(t *testing.T) {
	req := policy.SummaryRequest{Messages: []transcript.Message{
		{Role: transcript.RoleUser, Content: transcript.TextContent("ééééé")},
		{Role: transcript.RoleUser, Content: transcript.TextContent("éééééé")},
	}}
	sum, err := policy.DigestSummarizer{MaxLineChars: 5}.Summarize(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{"- user: ééééé", "- user: ééééé…"}, strings.Split(sum.Text, "\n")[1:])
}

// A history that moved on past a snapshot taken at rest is refused,
// counting the entries before a tail.
func TestResumeCountsTheHistoryThatMovedOn(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, err := d.e.Prompt(t0, "hi")
	require.NoError(t, err)
	d.feed(effects)
	d.answerRun(t0, okAnswer("done"), 0)
	snap := d.e.Snapshot()
	require.Equal(t, 2, snap.History)
	_, _, err = policy.Restore(policy.Setup{Model: testModel, Before: 1, History: d.history}, snap, t0, 0)
	require.ErrorIs(t, err, policy.ErrSnapshot)
	assert.ErrorContains(t, err, "the history moved on after it (3 entries, the snapshot counts 2)")
}
