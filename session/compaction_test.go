package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
)

const tooLong = "prompt is too long: 213462 tokens > 200000 maximum"

// smallKeep makes compaction keep only the last few tokens, so short test
// conversations have something to compact.
func smallKeep() session.Option {
	cfg := session.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	return session.WithConfig(cfg)
}

func overflowCall() scripted.Call { return fail(tooLong) }

func usage(total int) *session.Usage { return &session.Usage{Input: total, TotalTokens: total} }

// summarizerFunc adapts a function to session.Summarizer.
type summarizerFunc func(ctx context.Context, req session.SummaryRequest) (session.Summary, error)

func (f summarizerFunc) Summarize(ctx context.Context, req session.SummaryRequest) (session.Summary, error) {
	return f(ctx, req)
}

// blockingSummarizer waits until its context ends.
var blockingSummarizer = summarizerFunc(func(ctx context.Context, _ session.SummaryRequest) (session.Summary, error) {
	<-ctx.Done()
	return session.Summary{}, context.Cause(ctx)
})

// warmUp gives the session a first exchange to compact later.
func warmUp(t *testing.T, s *session.Session) {
	t.Helper()
	require.NoError(t, s.Prompt(context.Background(), "first question, long enough to matter"))
}

func TestOverflowCompactionContinuation(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), slow(ok("recovered"), 500)}, smallKeep())
		warmUp(t, s)
		n := len(rec.lines())
		start := time.Now()
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		assert.Equal(t, 500*time.Millisecond, time.Since(start), "Prompt returns after the continuation settles")
		assert.Equal(t, []string{
			"agent_start",
			`message error "` + tooLong + `"`,
			"agent_end",
			"idle>classifying agent_end",
			"compaction_start overflow",
			"classifying>compacting overflow",
			"compaction_end ok willRetry=true",
			"compacting>continuing resume",
			"agent_start",
			"message stop",
			"agent_end",
			"continuing>classifying agent_end",
			"classifying>idle settle",
		}, rec.lines()[n:])
		msgs := s.Messages()
		require.GreaterOrEqual(t, len(msgs), 2)
		assert.Equal(t, session.RoleSummary, msgs[0].Role, "the summary comes first")
		assert.Contains(t, msgs[0].Text(), "first question")
		for _, m := range msgs {
			assert.False(t, m.IsError(), "the overflow error left the runtime context")
		}
		entries := readAll(t, s.History())
		var kinds []session.EntryType
		for _, e := range entries {
			kinds = append(kinds, e.Type)
		}
		assert.Contains(t, kinds, session.EntryCompaction)
		assert.Len(t, entries, 7, "2 prompts, 3 answers (the error kept), the error's removal and the compaction")
	})
}

// A second overflow in the same episode is refused with a start/end pair
// (§11: every end has a start) and the turn fails.
func TestSecondOverflowInEpisode(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), overflowCall()}, smallKeep())
		warmUp(t, s)
		err := s.Prompt(context.Background(), "second question, long enough too")
		require.ErrorIs(t, err, session.ErrOverflow)
		assert.Equal(t, []string{
			"compaction_start overflow",
			"compaction_end ok willRetry=true",
			"compaction_start overflow",
			`compaction_end failed "Context overflow recovery failed after one compact-and-retry attempt. Try reducing context or switching to a larger-context model."`,
		}, rec.recovery())
		assert.Equal(t, states.Idle, s.State())
	})
}

func TestOverflowWithCompactionDisabled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{overflowCall()})
		s.SetAutoCompactionEnabled(false)
		assert.False(t, s.AutoCompactionEnabled())
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, session.ErrOverflow)
		assert.Contains(t, err.Error(), tooLong)
		assert.Empty(t, rec.recovery())
	})
}

// An overflow is never retried, even when its text also says 503.
func TestOverflowIsNeverRetried(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{fail("503 overloaded: prompt is too long")})
		s.SetAutoCompactionEnabled(false)
		require.ErrorIs(t, s.Prompt(context.Background(), "hi"), session.ErrOverflow)
		assert.Empty(t, rec.recovery())
	})
}

func TestThresholdBoundary(t *testing.T) {
	for _, c := range []struct {
		tokens   int
		compacts bool
	}{{170000, false}, {170001, true}} {
		bubble(t, func(t *testing.T) {
			s, _, rec := newSession(t, []scripted.Call{ok("first"), {StopReason: "stop", Text: "big", Usage: usage(c.tokens)}}, smallKeep())
			warmUp(t, s)
			require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
			if c.compacts {
				assert.Equal(t, []string{"compaction_start threshold", "compaction_end ok willRetry=false"}, rec.recovery(), "%d tokens", c.tokens)
				assert.Contains(t, rec.lines(), "compacting>idle compaction_end")
			} else {
				assert.Empty(t, rec.recovery(), "%d tokens", c.tokens)
			}
		})
	}
}

// A context window of 0 never compacts on threshold (§11).
func TestUnknownWindowNeverCompactsOnThreshold(t *testing.T) {
	bubble(t, func(t *testing.T) {
		model := scripted.DefaultModel
		model.ContextWindow = 0
		s, _, rec := newSession(t, []scripted.Call{ok("first"), {StopReason: "stop", Usage: usage(10_000_000)}}, smallKeep(), session.WithModel(model))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		assert.Empty(t, rec.recovery())
	})
}

// Usage reported before the latest compaction is stale: the check before
// the next prompt does not compact again (§11), while a message after the
// compaction counts.
func TestStaleUsage(t *testing.T) {
	bubble(t, func(t *testing.T) {
		big := scripted.Call{StopReason: "stop", Text: "big", Usage: usage(180000)}
		s, _, rec := newSession(t, []scripted.Call{ok("first"), big, ok("small"), big}, smallKeep())
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		require.Equal(t, []string{"compaction_start threshold", "compaction_end ok willRetry=false"}, rec.recovery())
		// The last assistant message (big, kept) is at/before the compaction:
		// stale, so the check before this prompt does nothing.
		require.NoError(t, s.Prompt(context.Background(), "third question, long enough also"))
		assert.Len(t, rec.recovery(), 2)
		// A new message after the compaction is not stale.
		require.NoError(t, s.Prompt(context.Background(), "fourth question, long enough again"))
		assert.Len(t, rec.recovery(), 4)
	})
}

// The check before a prompt compacts on an aborted message too (§4.6): a
// run aborted near the limit compacts before the next prompt is sent.
func TestCheckBeforePromptCompactsAborted(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, agent, rec := newSession(t, []scripted.Call{ok("first")}, smallKeep())
		warmUp(t, s)
		agent.Append(scripted.Call{StopReason: "stop", Usage: usage(180000), LatencyMs: 1000})
		done := promptAsync(s, "second question, long enough too")
		time.Sleep(500 * time.Millisecond)
		s.Abort()
		require.ErrorIs(t, <-done, session.ErrAborted)
		assert.Empty(t, rec.recovery(), "an aborted message does not compact after its run")
		n := len(rec.lines())
		require.NoError(t, s.Prompt(context.Background(), "third question, long enough also"))
		assert.Equal(t, []string{
			"compaction_start threshold",
			"idle>compacting check_threshold",
			"compaction_end ok willRetry=false",
			"compacting>idle compaction_end",
			"agent_start",
		}, rec.lines()[n:n+5], "the compaction happens before the prompt is sent")
	})
}

func TestAbortDuringCompaction(t *testing.T) {
	for _, how := range []string{"Abort", "AbortCompaction"} {
		t.Run(how, func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				s, _, rec := newSession(t, []scripted.Call{ok("first"), overflowCall()}, smallKeep(), session.WithSummarizer(blockingSummarizer))
				warmUp(t, s)
				done := promptAsync(s, "second question, long enough too")
				synctest.Wait()
				require.Equal(t, states.Compacting, s.State())
				require.True(t, s.IsCompacting())
				if how == "Abort" {
					s.Abort()
				} else {
					s.AbortCompaction()
				}
				err := <-done
				if how == "Abort" {
					require.ErrorIs(t, err, session.ErrAborted)
				} else {
					require.ErrorIs(t, err, session.ErrOverflow)
					require.ErrorIs(t, err, session.ErrCompactionCancelled)
				}
				lines := rec.lines()
				event := map[string]string{"Abort": "cancel", "AbortCompaction": "cancel_compaction"}[how]
				assert.Equal(t, []string{"compaction_end aborted", "compacting>cancelled " + event, "cancelled>idle reset"}, lines[len(lines)-3:])
				assert.Equal(t, []string{"compaction_start overflow", "compaction_end aborted"}, rec.recovery())
				assert.False(t, s.IsCompacting())
			})
		})
	}
}

func TestSummarizerFails(t *testing.T) {
	failing := summarizerFunc(func(context.Context, session.SummaryRequest) (session.Summary, error) {
		return session.Summary{}, errors.New("model unavailable")
	})
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first"), overflowCall()}, smallKeep(), session.WithSummarizer(failing))
		warmUp(t, s)
		err := s.Prompt(context.Background(), "second question, long enough too")
		require.ErrorIs(t, err, session.ErrOverflow)
		assert.Equal(t, []string{"compaction_start overflow", `compaction_end failed "Context overflow recovery failed: model unavailable"`}, rec.recovery())
		assert.Contains(t, rec.lines(), "compacting>idle recovery_failed")
	})
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first"), {StopReason: "stop", Usage: usage(190000)}}, smallKeep(), session.WithSummarizer(failing))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"), "the turn's answer succeeded")
		assert.Equal(t, []string{"compaction_start threshold", `compaction_end failed "Auto-compaction failed: model unavailable"`}, rec.recovery())
	})
}

// An overflow in the middle of a retry chain ends the chain with the
// overflow text, then compacts.
func TestOverflowMidChain(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first"), fail(service503), overflowCall(), ok("recovered")}, smallKeep())
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		assert.Equal(t, []string{
			`retry_start 1/3 2000ms "503 Service Unavailable"`,
			`retry_end fail 1 "` + tooLong + `"`,
			"compaction_start overflow",
			"compaction_end ok willRetry=true",
		}, rec.recovery())
	})
}

// A silent overflow (a "stop" whose usage exceeds the window) is recovered
// like an error overflow.
func TestSilentOverflow(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first"), {StopReason: "stop", Usage: &session.Usage{Input: 250000}}, ok("again")}, smallKeep())
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		assert.Equal(t, []string{"compaction_start overflow", "compaction_end ok willRetry=true"}, rec.recovery())
	})
}

// Nothing to compact: the overflow is not recovered.
func TestOverflowNothingToCompact(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{overflowCall()})
		err := s.Prompt(context.Background(), "hi")
		require.ErrorIs(t, err, session.ErrOverflow)
		require.ErrorIs(t, err, session.ErrNothingToCompact)
		// Item 19: the end says why nothing was recovered.
		assert.Equal(t, []string{"compaction_start overflow",
			`compaction_end failed "Context overflow recovery failed: session: nothing to compact"`}, rec.recovery())
	})
}

func TestManualCompact(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first answer")}, smallKeep())
		_, err := s.Compact(context.Background(), "")
		require.ErrorIs(t, err, session.ErrNothingToCompact)
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		n := len(rec.lines())
		res, err := s.Compact(context.Background(), "keep the numbers")
		require.NoError(t, err)
		assert.Contains(t, res.Summary, "Focus: keep the numbers")
		assert.Contains(t, res.Summary, "first question")
		assert.Equal(t, 120, res.TokensBefore)
		assert.NotEmpty(t, res.FirstKeptEntryID)
		assert.Equal(t, res.FirstKeptEntryID, s.Messages()[1].ID)
		assert.Equal(t, []string{"idle>compacting compact", "compacting>idle compaction_end"}, rec.lines()[n:],
			"a manual compaction emits no automatic compaction events, only its moves")

		_, err = s.Compact(context.Background(), "")
		require.ErrorIs(t, err, session.ErrAlreadyCompacted)
	})
}

func TestManualCompactCancelled(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, _ := newSession(t, []scripted.Call{ok("first")}, smallKeep(), session.WithSummarizer(blockingSummarizer))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.Compact(ctx, "")
		require.ErrorIs(t, err, session.ErrCompactionCancelled)
		// AbortCompaction and Abort from elsewhere too.
		for _, stop := range []func(){s.AbortCompaction, s.Abort} {
			done := make(chan error, 1)
			go func() { _, err := s.Compact(context.Background(), ""); done <- err }()
			synctest.Wait()
			stop()
			require.ErrorIs(t, <-done, session.ErrCompactionCancelled)
		}
	})
}

func TestDigestSummarizer(t *testing.T) {
	req := session.SummaryRequest{Messages: []session.Message{
		{Role: session.RoleSummary, Content: session.TextContent("Summary of 2 earlier messages.\n- user: hello")},
		{Role: session.RoleUser, Content: session.TextContent("please\nread   the file " + strings.Repeat("x", 300))},
		{Role: session.RoleAssistant, StopReason: "toolUse", Content: session.TextContent("reading")},
		{Role: session.RoleToolResult, Content: session.TextContent("42 lines")},
		{Role: session.RoleAssistant, StopReason: "error", ErrorMessage: "503"},
	}}
	a, err := session.DigestSummarizer{}.Summarize(context.Background(), req)
	require.NoError(t, err)
	b, _ := session.DigestSummarizer{}.Summarize(context.Background(), req)
	assert.Equal(t, a, b, "deterministic")
	assert.Contains(t, a.Text, "\n- user: hello\n", "the earlier summary's lines are carried over")
	assert.NotContains(t, a.Text, "Summary of 2", "but not its header")
	assert.Contains(t, a.Text, "- user: please read the file xxx")
	assert.Contains(t, a.Text, "- assistant (toolUse): reading")
	assert.Contains(t, a.Text, "- tool result: 42 lines")
	assert.Contains(t, a.Text, "- error: 503")
	for _, line := range strings.Split(a.Text, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 220)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = session.DigestSummarizer{}.Summarize(ctx, req)
	assert.ErrorIs(t, err, context.Canceled)
}

// Found by the model-based test: an overflow left unrecovered (compaction
// was off) is compacted by the check before the next prompt, and that must
// not use up the new prompt's own recovery.
func TestOverflowAfterCheckBeforePromptIsRecovered(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first"), overflowCall(), overflowCall(), ok("recovered")}, smallKeep())
		warmUp(t, s)
		s.SetAutoCompactionEnabled(false)
		require.ErrorIs(t, s.Prompt(context.Background(), "second question, long enough too"), session.ErrOverflow)
		s.SetAutoCompactionEnabled(true)
		require.NoError(t, s.Prompt(context.Background(), "third question, long enough also"))
		assert.Equal(t, []string{
			"compaction_start overflow", "compaction_end ok willRetry=false", // the check before the prompt
			"compaction_start overflow", "compaction_end ok willRetry=true", // the prompt's own recovery
		}, rec.recovery())
	})
}

// TestCompactionIsOneType: what Compact returns, the result an
// AutoCompactionEnd reports and the content of the history entry are one
// type, Compaction, and the same value: the reason, the summary, where the
// kept messages start, the size before and the summarizer's details. Issue
// item 5.
func TestCompactionIsOneType(t *testing.T) {
	bubble(t, func(t *testing.T) {
		details := map[string]any{"files": []any{"a.go"}}
		sum := summarizerFunc(func(_ context.Context, req session.SummaryRequest) (session.Summary, error) {
			return session.Summary{Text: "summary of " + string(req.Reason), Details: details}, nil
		})
		var h session.MemoryHistory
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), ok("recovered"), ok("third")},
			smallKeep(), session.WithSummarizer(sum), session.WithHistory(&h))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		require.NoError(t, s.Prompt(context.Background(), "third question, long enough too"))
		manual, err := s.Compact(context.Background(), "")
		require.NoError(t, err)

		var entries []session.Compaction
		for _, e := range readAll(t, &h) {
			if e.Type == session.EntryCompaction {
				entries = append(entries, *e.Compaction)
			}
		}
		var auto []session.Compaction
		for _, ev := range rec.events() {
			if end, ok := ev.(session.AutoCompactionEnd); ok && end.Result != nil {
				auto = append(auto, *end.Result)
			}
		}
		require.Len(t, entries, 2)
		require.Len(t, auto, 1)
		assert.Equal(t, entries[0], auto[0], "the event's result is the entry's")
		assert.Equal(t, session.ReasonOverflow, auto[0].Reason)
		assert.Equal(t, "summary of overflow", auto[0].Summary)
		assert.Equal(t, details, auto[0].Details)
		assert.Equal(t, entries[1], manual, "Compact's result is the entry's")
		assert.Equal(t, session.Compaction{Reason: session.ReasonManual, Summary: "summary of manual",
			FirstKeptEntryID: manual.FirstKeptEntryID, TokensBefore: manual.TokensBefore, Details: details}, manual)
		assert.NotEmpty(t, manual.FirstKeptEntryID)
	})
}
