package session_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/states"
	"github.com/agentfsm/agentfsm/transcript"
)

const tooLong = "prompt is too long: 213462 tokens > 200000 maximum"

// smallKeep makes compaction keep only the last few tokens, so short test
// conversations have something to compact.
func smallKeep() session.Option {
	cfg := policy.DefaultConfig()
	cfg.Compaction.KeepRecentTokens = 5
	return session.WithConfig(cfg)
}

func overflowCall() scripted.Call { return fail(tooLong) }

func usage(total int) *transcript.Usage { return &transcript.Usage{Input: total, TotalTokens: total} }

// summarizerFunc adapts a function to session.Summarizer.
type summarizerFunc func(ctx context.Context, req policy.SummaryRequest) (policy.Summary, error)

func (f summarizerFunc) Summarize(ctx context.Context, req policy.SummaryRequest) (policy.Summary, error) {
	return f(ctx, req)
}

// blockingSummarizer waits until its context ends.
var blockingSummarizer = summarizerFunc(func(ctx context.Context, _ policy.SummaryRequest) (policy.Summary, error) {
	<-ctx.Done()
	return policy.Summary{}, context.Cause(ctx)
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
			"classifying>idle accept",
		}, rec.lines()[n:])
		msgs := s.Messages()
		require.GreaterOrEqual(t, len(msgs), 2)
		assert.Equal(t, transcript.RoleSummary, msgs[0].Role, "the summary comes first")
		// The provider counted 213,462 tokens for a few short messages:
		// by that count the summary has room for its start only.
		assert.True(t, strings.HasPrefix(msgs[0].Text(), "Summary of 2 ear"), msgs[0].Text())
		for _, m := range msgs {
			assert.False(t, m.IsError(), "the overflow error left the runtime context")
		}
		entries := readAll(t, s.History())
		var kinds []transcript.EntryType
		for _, e := range entries {
			kinds = append(kinds, e.Type)
		}
		assert.Contains(t, kinds, transcript.EntryCompaction)
		assert.Len(t, entries, 7, "2 prompts, 3 answers (the error kept), the error's removal and the compaction")
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
		require.ErrorIs(t, <-done, policy.ErrAborted)
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
				require.Equal(t, states.Compacting, s.Status().State)
				require.True(t, s.Status().Compacting)
				if how == "Abort" {
					s.Abort()
				} else {
					s.AbortCompaction()
				}
				err := <-done
				if how == "Abort" {
					require.ErrorIs(t, err, policy.ErrAborted)
				} else {
					require.ErrorIs(t, err, policy.ErrOverflow)
					require.ErrorIs(t, err, policy.ErrCompactionCancelled)
				}
				lines := rec.lines()
				event := map[string]string{"Abort": "cancel", "AbortCompaction": "cancel_compaction"}[how]
				assert.Equal(t, []string{"compaction_end aborted", "compacting>cancelled " + event, "cancelled>idle reset"}, lines[len(lines)-3:])
				assert.Equal(t, []string{"compaction_start overflow", "compaction_end aborted"}, rec.recovery())
				assert.False(t, s.Status().Compacting)
			})
		})
	}
}

func TestSummarizerFails(t *testing.T) {
	failing := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) {
		return policy.Summary{}, errors.New("model unavailable")
	})
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first"), overflowCall()}, smallKeep(), session.WithSummarizer(failing))
		warmUp(t, s)
		err := s.Prompt(context.Background(), "second question, long enough too")
		require.ErrorIs(t, err, policy.ErrOverflow)
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

func TestManualCompact(t *testing.T) {
	bubble(t, func(t *testing.T) {
		s, _, rec := newSession(t, []scripted.Call{ok("first answer")}, smallKeep())
		_, err := s.Compact(context.Background(), "")
		require.ErrorIs(t, err, policy.ErrNothingToCompact)
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
		require.ErrorIs(t, err, policy.ErrAlreadyCompacted)
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
		require.ErrorIs(t, err, policy.ErrCompactionCancelled)
		// AbortCompaction and Abort from elsewhere too.
		for _, stop := range []func(){s.AbortCompaction, s.Abort} {
			done := make(chan error, 1)
			go func() { _, err := s.Compact(context.Background(), ""); done <- err }()
			synctest.Wait()
			stop()
			require.ErrorIs(t, <-done, policy.ErrCompactionCancelled)
		}
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
		sum := summarizerFunc(func(_ context.Context, req policy.SummaryRequest) (policy.Summary, error) {
			return policy.Summary{Text: "summary of " + string(req.Reason), Details: details}, nil
		})
		var h history.MemoryHistory
		s, _, rec := newSession(t, []scripted.Call{ok("first answer"), overflowCall(), ok("recovered"), ok("third")},
			smallKeep(), session.WithSummarizer(sum), session.WithHistory(&h))
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		require.NoError(t, s.Prompt(context.Background(), "third question, long enough too"))
		manual, err := s.Compact(context.Background(), "")
		require.NoError(t, err)

		var entries []transcript.Compaction
		for _, e := range readAll(t, &h) {
			if e.Type == transcript.EntryCompaction {
				entries = append(entries, *e.Compaction)
			}
		}
		var auto []transcript.Compaction
		for _, ev := range rec.events() {
			if end, ok := ev.(events.AutoCompactionEnd); ok && end.Result != nil {
				auto = append(auto, *end.Result)
			}
		}
		require.Len(t, entries, 2)
		require.Len(t, auto, 1)
		assert.Equal(t, entries[0], auto[0], "the event's result is the entry's")
		assert.Equal(t, transcript.ReasonOverflow, auto[0].Reason)
		// Cut to the room the overflow's count leaves it.
		assert.True(t, strings.HasPrefix("summary of overflow", auto[0].Summary), auto[0].Summary)
		assert.NotEmpty(t, auto[0].Summary)
		assert.Equal(t, details, auto[0].Details)
		assert.Equal(t, entries[1], manual, "Compact's result is the entry's")
		assert.Equal(t, transcript.Compaction{Reason: transcript.ReasonManual, Summary: "summary of manual",
			FirstKeptEntryID: manual.FirstKeptEntryID, TokensBefore: manual.TokensBefore, TokensAfter: manual.TokensAfter, Details: details}, manual)
		assert.NotEmpty(t, manual.FirstKeptEntryID)
		assert.Positive(t, manual.TokensAfter, "the size of the summary and the messages kept")
	})
}

// contextRecorder is a scripted agent that keeps the size of the context
// of each run, by the estimate.
type contextRecorder struct {
	*scripted.Agent
	mu    sync.Mutex
	sizes []int
}

func (c *contextRecorder) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	c.mu.Lock()
	c.sizes = append(c.sizes, sizes.Tokens(req.Context...))
	c.mu.Unlock()
	return c.Agent.Run(ctx, req, emit)
}

// Issue 23's reproduction, with default settings: two answers of 68 KB
// each (the scripted usage, 120 tokens a call, says nothing true of them),
// then "400 prompt is too long: 210345 tokens > 200000 maximum". The
// overflow's count calibrates the estimate: the compaction keeps the
// second answer and the question only, and the continuation is smaller
// than the request that overflowed, and fits by the provider's count.
func TestOverflowContinuationIsSmallerThanTheRequest(t *testing.T) {
	bubble(t, func(t *testing.T) {
		answer := strings.Repeat("word ", 68*1000/5)
		agent := &contextRecorder{Agent: scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
			ok(answer), ok(answer), fail("400 prompt is too long: 210345 tokens > 200000 maximum"), ok("recovered"),
		}})}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithSessionID("test-session"))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		rec := record(s)
		for _, q := range []string{"first question", "second question", "third question"} {
			require.NoError(t, s.Prompt(context.Background(), q))
		}
		require.Len(t, agent.sizes, 4)
		overflowed, continuation := agent.sizes[2], agent.sizes[3]
		assert.Less(t, continuation, overflowed, "the continuation is smaller than the request that overflowed")
		var ends []events.AutoCompactionEnd
		for _, ev := range rec.events() {
			if e, ok := ev.(events.AutoCompactionEnd); ok {
				ends = append(ends, e)
			}
		}
		require.Len(t, ends, 1)
		res := ends[0].Result
		require.NotNil(t, res, ends[0].ErrorMessage)
		assert.Equal(t, 210345, res.TokensBefore, "the provider's count")
		usable := scripted.DefaultModel.ContextWindow - policy.DefaultConfig().Compaction.ReserveTokens
		assert.Less(t, res.TokensAfter, usable, "the continuation fits by the provider's count")
		ratio := 210345 / float64(overflowed)
		assert.InDelta(t, float64(continuation)*ratio, float64(res.TokensAfter), ratio+1)
		st := s.Status()
		assert.Equal(t, transcript.ReasonOverflow, st.LastCompaction)
		assert.Equal(t, 210345, st.CompactionTokensBefore)
		assert.Equal(t, res.TokensAfter, st.CompactionTokensAfter)
	})
}
