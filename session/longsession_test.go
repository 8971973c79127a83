package session_test

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/agentfsm/agentfsm/transitions"
)

var longTurns = flag.Int("long-turns", 100_000, "how many turns BenchmarkLongSession plays")

// sizedAgent answers like a provider whose usage is the size of what it is
// sent: each answer reports the session's own estimate of the context it
// was given plus the answer, and a context over the window is an overflow
// error. Every third run makes a tool call before it answers.
type sizedAgent struct {
	window int
	answer int // characters of an answer
	tool   int // characters of a tool result
	runs   atomic.Int64
}

func (a *sizedAgent) Run(_ context.Context, req session.RunRequest, emit func(events.Event)) error {
	n := a.runs.Add(1)
	size := sizes.Tokens(req.Context...)
	emit(events.AgentStart{})
	var made []transcript.Message
	say := func(m transcript.Message) {
		m.Provider, m.Model, m.Timestamp = req.Model.Provider, req.Model.ID, time.Now().UnixMilli()
		if m.Role == transcript.RoleAssistant {
			size += sizes.Tokens(m)
			m.Usage = &transcript.Usage{Input: size, TotalTokens: size}
		} else {
			size += sizes.Tokens(m)
		}
		emit(events.MessageStart{Message: m})
		emit(events.MessageEnd{Message: m})
		made = append(made, m)
	}
	emit(events.CallStart{})
	switch {
	case size > a.window:
		say(transcript.Message{ID: fmt.Sprintf("r%d-overflow", n), Role: transcript.RoleAssistant, StopReason: "error",
			ErrorMessage: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", size, a.window)})
	case n%3 == 0:
		call := fmt.Sprintf("r%d-call", n)
		say(transcript.Message{ID: call, Role: transcript.RoleAssistant, StopReason: "toolUse", Content: transcript.TextContent("reading the file for run " + call)})
		say(transcript.Message{ID: call + "-result", Role: transcript.RoleToolResult, ToolCallID: call, Content: transcript.TextContent(strings.Repeat("t", a.tool))})
		emit(events.CallEnd{})
		emit(events.CallStart{})
		fallthrough
	default:
		say(transcript.Message{ID: fmt.Sprintf("r%d-answer", n), Role: transcript.RoleAssistant, StopReason: "stop",
			Content: transcript.TextContent(fmt.Sprintf("answer %d: ", n) + strings.Repeat("a", a.answer))})
	}
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: made})
	return nil
}

// longSession plays turns on a session of the default model and the
// options, calling check with the runtime context after every compaction.
// It returns the number of compactions and the final context's estimate.
func longSession(tb testing.TB, turns int, opts []session.Option, check func(turn int, summary string, msgs []transcript.Message)) (compactions, final int) {
	return longSessionTimed(tb, turns, newTurnClock(turns), opts, check)
}

// longSessionTimed is longSession timing its turns on clock.
func longSessionTimed(tb testing.TB, turns int, clock *turnClock, opts []session.Option, check func(turn int, summary string, msgs []transcript.Message)) (compactions, final int) {
	agent := &sizedAgent{window: scripted.DefaultModel.ContextWindow, answer: 12_000, tool: 30_000}
	s, err := session.New(agent, append([]session.Option{session.WithModel(scripted.DefaultModel)}, opts...)...)
	require.NoError(tb, err)
	defer s.Close()
	var mu sync.Mutex
	var summaries []string
	s.Subscribe(func(ev events.Event) {
		if e, ok := ev.(events.AutoCompactionEnd); ok {
			mu.Lock()
			defer mu.Unlock()
			if e.Result == nil {
				tb.Errorf("a compaction failed: %q", e.ErrorMessage)
				return
			}
			summaries = append(summaries, e.Result.Summary)
		}
	})
	seen := 0
	for turn := range turns {
		clock.time(turn, func() {
			if err := s.Prompt(context.Background(), fmt.Sprintf("question %d: %s", turn, strings.Repeat("q", 400))); err != nil {
				tb.Fatalf("turn %d: %v", turn, err)
			}
		})
		s.Flush()
		mu.Lock()
		fresh := summaries[seen:]
		seen = len(summaries)
		mu.Unlock()
		if len(fresh) > 0 {
			// A threshold compaction is the last step of its turn: the
			// context now is the one it left.
			check(turn, fresh[len(fresh)-1], s.Messages())
		}
	}
	return seen, sizes.Tokens(s.Messages()...)
}

// The summary of a long session stays within its budget and every
// compaction leaves the context under the threshold, so the session never
// compacts on every turn nor wedges on "nothing to compact" (issue item 23).
func TestLongSessionStaysUnderThreshold(t *testing.T) {
	start := time.Now()
	var compactions int
	bubble(t, func(t *testing.T) {
		last := -1
		compactions, _ = longSession(t, 2000, nil, func(turn int, summary string, msgs []transcript.Message) {
			require.Equal(t, transcript.RoleSummary, msgs[0].Role, "turn %d", turn)
			assert.Equal(t, summary, msgs[0].Text())
			assert.LessOrEqual(t, len(summary), sizes.DigestChars, "turn %d: the summary's budget", turn)
			assert.LessOrEqual(t, sizes.Tokens(msgs...), threshold, "turn %d: the context after compaction", turn)
			assert.NotEqual(t, transcript.RoleToolResult, msgs[1].Role, "turn %d: a tool result stays with its call", turn)
			assert.Greater(t, turn-last, 1, "turn %d: compacted on two turns in a row", turn)
			last = turn
		})
	})
	assert.Greater(t, compactions, 50)
	t.Logf("2,000 turns, %d compactions, in %v", compactions, time.Since(start))
}

// threshold is the default model's compaction threshold with the default
// settings, and budget the summary's: a quarter of it.
var threshold, _ = transitions.CompactionThreshold(scripted.DefaultModel.ContextWindow, policy.DefaultConfig().Compaction.ReserveTokens)

const budget = 170_000 / 4

// Whatever the summarizer returns, a compaction leaves a summary within
// the budget (the start of a longer one cut, and said so) and the context
// under the threshold (issue item 23).
func TestHugeSummaryIsCutToTheBudget(t *testing.T) {
	huge := summarizerFunc(func(_ context.Context, req policy.SummaryRequest) (policy.Summary, error) {
		assert.Equal(t, budget*4, req.MaxChars, "the session asks for its budget")
		return policy.Summary{Text: strings.Repeat("une longue phrase résumée, ", 100_000) + "the end"}, nil
	})
	bubble(t, func(t *testing.T) {
		last := -1
		n, _ := longSession(t, 300, []session.Option{session.WithSummarizer(huge)}, func(turn int, summary string, msgs []transcript.Message) {
			assert.LessOrEqual(t, sizes.Tokens(msgs[0]), budget, "turn %d", turn)
			assert.True(t, strings.HasPrefix(summary, "[the start of this summary was cut]\n"), "turn %d", turn)
			assert.True(t, strings.HasSuffix(summary, "the end"), "turn %d: the end is kept", turn)
			assert.True(t, utf8.ValidString(summary), "turn %d: cut between characters", turn)
			assert.LessOrEqual(t, sizes.Tokens(msgs...), threshold, "turn %d", turn)
			assert.Greater(t, turn-last, 1, "turn %d: compacted on two turns in a row", turn)
			last = turn
		})
		assert.Greater(t, n, 5)
	})
}

// When the recent messages kept would leave no room for the summary under
// the threshold, a compaction cuts deeper, at a later valid cut point
// (issue item 23).
func TestCompactionCutsDeeperToFitUnderTheThreshold(t *testing.T) {
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 160_000 // nearly the threshold
	bubble(t, func(t *testing.T) {
		last := -1
		n, _ := longSession(t, 300, []session.Option{session.WithConfig(cfg)}, func(turn int, summary string, msgs []transcript.Message) {
			assert.LessOrEqual(t, sizes.Tokens(msgs...), threshold, "turn %d", turn)
			assert.LessOrEqual(t, sizes.Tokens(msgs[1:]...), threshold-budget, "turn %d: room for a summary of the budget", turn)
			assert.Contains(t, []transcript.Role{transcript.RoleUser, transcript.RoleAssistant}, msgs[1].Role, "turn %d: a valid cut point", turn)
			for i, m := range msgs {
				if m.Role == transcript.RoleToolResult {
					assert.Equal(t, m.ToolCallID, msgs[i-1].ID, "turn %d: a tool result stays with its call", turn)
				}
			}
			assert.Greater(t, turn-last, 1, "turn %d: compacted on two turns in a row", turn)
			last = turn
		})
		assert.Greater(t, n, 5)
	})
}

// A history whose summary alone overflows the context window (written
// before summaries had a budget) no longer wedges the session on "nothing
// to compact": the summary is summarized again (issue item 23).
func TestOversizedSummaryInHistoryIsSummarizedAgain(t *testing.T) {
	var old strings.Builder
	for i := range 20_000 {
		fmt.Fprintf(&old, "- user: question %d of a conversation long ago\n", i)
	}
	require.Greater(t, old.Len()/4, scripted.DefaultModel.ContextWindow)
	history := &history.MemoryHistory{}
	for _, e := range []transcript.Entry{
		{Type: transcript.EntryMessage, ID: "u1", Message: &transcript.Message{ID: "u1", Role: transcript.RoleUser, Content: transcript.TextContent("a question")}},
		{Type: transcript.EntryMessage, ID: "a1", Message: &transcript.Message{ID: "a1", Role: transcript.RoleAssistant, StopReason: "stop", Content: transcript.TextContent("an answer")}},
		{Type: transcript.EntryCompaction, ID: "c1", Compaction: &transcript.Compaction{Reason: transcript.ReasonThreshold, Summary: old.String(), FirstKeptEntryID: "u1"}},
	} {
		require.NoError(t, history.Append(e))
	}
	bubble(t, func(t *testing.T) {
		agent := &sizedAgent{window: scripted.DefaultModel.ContextWindow, answer: 100, tool: 100}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithHistory(history))
		require.NoError(t, err)
		defer s.Close()
		require.Greater(t, sizes.Tokens(s.Messages()...), scripted.DefaultModel.ContextWindow)
		require.NoError(t, s.Prompt(context.Background(), "a new question"))
		msgs := s.Messages()
		assert.LessOrEqual(t, len(msgs[0].Text()), sizes.DigestChars)
		assert.Contains(t, msgs[0].Text(), "- user: question 19999 of a conversation long ago", "the newest lines are kept")
		assert.Regexp(t, `\n\[\d+ earlier lines dropped\]\n`, msgs[0].Text())
		assert.LessOrEqual(t, sizes.Tokens(msgs...), threshold)
		require.NoError(t, s.Prompt(context.Background(), "and another"))
	})
}

// A prompt too big for the window is never sent (the check before it
// fails the turn with the too_large reason) and never enters the context;
// the session goes on, and stays under the threshold (issue 23).
func TestOversizedMessageIsCompactedAwayByTheNextTurn(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := &sizedAgent{window: scripted.DefaultModel.ContextWindow, answer: 100, tool: 100}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel))
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Prompt(context.Background(), "a question"))
		err = s.Prompt(context.Background(), strings.Repeat("x", 1_000_000))
		require.ErrorIs(t, err, policy.ErrOverflow)
		assert.ErrorContains(t, err, "the last message alone is 250000 tokens, over the model's window of 200000")
		require.Less(t, sizes.Tokens(s.Messages()...), scripted.DefaultModel.ContextWindow, "the prompt was not sent")
		require.NoError(t, s.Prompt(context.Background(), "a small question"))
		assert.LessOrEqual(t, sizes.Tokens(s.Messages()...), threshold)
		for _, m := range s.Messages() {
			assert.Less(t, len(m.Text()), 1_000_000)
		}
		require.NoError(t, s.Prompt(context.Background(), "and another"))
	})
}

// discardHistory keeps nothing: a long benchmark measures the session, not
// gigabytes of history in memory.
type discardHistory struct{}

func (discardHistory) Append(...transcript.Entry) error { return nil }
func (discardHistory) Entries() iter.Seq2[transcript.Entry, error] {
	return func(func(transcript.Entry, error) bool) {}
}

// BenchmarkLongSession plays -long-turns turns (100,000 by default) of a
// session whose context grows past the threshold again and again, checking
// after every compaction that the context is under the threshold and the
// summary within its budget. It reports turns per second, the number of
// compactions, the final context's size, the bytes allocated per turn,
// and the time of a turn among the first thousand and among the last
// thousand (issue item 1).
// Run it once, without -race:
// go test ./session -run '^$' -bench LongSession -benchtime 1x
func BenchmarkLongSession(b *testing.B) {
	for b.Loop() {
		start, allocated := time.Now(), totalAlloc()
		clock := newTurnClock(*longTurns)
		compactions, final := longSessionTimed(b, *longTurns, clock, []session.Option{session.WithHistory(discardHistory{})}, func(turn int, summary string, msgs []transcript.Message) {
			if n := sizes.Tokens(msgs...); n > threshold || len(summary) > sizes.DigestChars {
				b.Fatalf("turn %d: context %d tokens (threshold %d), summary %d characters", turn, n, threshold, len(summary))
			}
		})
		b.ReportMetric(float64(*longTurns)/time.Since(start).Seconds(), "turns/s")
		b.ReportMetric(float64(compactions), "compactions")
		b.ReportMetric(float64(final), "final-context-tokens")
		b.ReportMetric(float64(totalAlloc()-allocated)/float64(*longTurns), "allocated-B/turn")
		clock.report(b)
	}
}
