package session_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// histories runs f on a MemoryHistory and on a FileHistory. reopen gives
// the history to start the next session on: the same MemoryHistory, or
// the file closed and opened again.
func histories(t *testing.T, f func(t *testing.T, h history.History, reopen func() history.History)) {
	t.Run("memory", func(t *testing.T) {
		h := &history.MemoryHistory{}
		f(t, h, func() history.History { return h })
	})
	t.Run("file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		t.Cleanup(func() { h.Close() })
		f(t, h, func() history.History {
			require.NoError(t, h.Close())
			h, err = history.OpenFileHistory(path)
			require.NoError(t, err)
			return h
		})
	})
}

// reopened starts a session on h with a new scripted agent playing calls,
// as a new process would.
func reopened(t *testing.T, h history.History, calls []scripted.Call, opts ...session.Option) *session.Session {
	t.Helper()
	agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: calls})
	opts = append([]session.Option{session.WithModel(scripted.DefaultModel), session.WithHistory(h)}, opts...)
	s, err := session.New(agent, opts...)
	require.NoError(t, err)
	return s
}

func messageIDs(ms []transcript.Message) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// A compaction that keeps a settled fatal error as its first kept entry:
// reopening rebuilds the runtime context the session had, the error and
// the turn after it included (issue item 5).
func TestReopenKeepsSettledErrorAndWhatFollows(t *testing.T) {
	histories(t, func(t *testing.T, h history.History, reopen func() history.History) {
		bubble(t, func(t *testing.T) {
			cfg := policy.DefaultConfig()
			cfg.Compaction.KeepRecentTokens = 5
			s := reopened(t, h, []scripted.Call{fail("401 invalid x-api-key"), ok("done")}, session.WithConfig(cfg))
			require.ErrorIs(t, s.Prompt(context.Background(), "first question"), policy.ErrProvider)
			require.NoError(t, s.Prompt(context.Background(), "second"))
			res, err := s.Compact(context.Background(), "")
			require.NoError(t, err)
			live := s.Messages()
			require.Len(t, live, 4, "the summary, the error, the second prompt and its answer")
			assert.Equal(t, live[1].ID, res.FirstKeptEntryID)
			assert.True(t, live[1].IsError())
			require.NoError(t, s.Close())

			s2 := reopened(t, reopen(), nil, session.WithConfig(cfg))
			defer s2.Close()
			assert.Equal(t, live, s2.Messages())
		})
	})
}

// A message removed for a retry, and one removed before an overflow's
// compaction, stay out of the rebuilt runtime context; a settled error
// stays in (issue item 5).
func TestReopenReplaysRemovals(t *testing.T) {
	histories(t, func(t *testing.T, h history.History, reopen func() history.History) {
		bubble(t, func(t *testing.T) {
			cfg := policy.DefaultConfig()
			cfg.Compaction.KeepRecentTokens = 5
			s := reopened(t, h, []scripted.Call{fail(service503), ok("answer"), fail(tooLong), ok("recovered"), fail("401 invalid x-api-key")},
				session.WithConfig(cfg))
			require.NoError(t, s.Prompt(context.Background(), "first question"))
			require.NoError(t, s.Prompt(context.Background(), "second question"))
			require.ErrorIs(t, s.Prompt(context.Background(), "third"), policy.ErrProvider)
			live := s.Messages()
			var errs int
			for _, m := range live {
				if m.IsError() {
					errs++
				}
			}
			assert.Equal(t, 1, errs, "only the settled error is in the runtime context")
			require.NoError(t, s.Close())

			s2 := reopened(t, reopen(), nil, session.WithConfig(cfg))
			defer s2.Close()
			assert.Equal(t, live, s2.Messages())
		})
	})
}

// A session on an existing history never reuses an ID found there, the
// agent's own IDs included: a compaction after the reopen cuts where it
// says and the runtime context shrinks (issue item 6).
func TestReopenCompactionShrinksContext(t *testing.T) {
	histories(t, func(t *testing.T, h history.History, reopen func() history.History) {
		bubble(t, func(t *testing.T) {
			s := reopened(t, h, []scripted.Call{ok("first answer"), ok("second answer")})
			require.NoError(t, s.Prompt(context.Background(), "first question"))
			require.NoError(t, s.Prompt(context.Background(), "second question"))
			require.NoError(t, s.Close())

			cfg := policy.DefaultConfig()
			cfg.Compaction.KeepRecentTokens = 5
			s = reopened(t, reopen(), []scripted.Call{ok("third answer")}, session.WithConfig(cfg))
			defer s.Close()
			require.NoError(t, s.Prompt(context.Background(), "third question"))
			before := s.Messages()
			require.Len(t, before, 6)
			assert.Equal(t, "user-3", before[4].ID, "numbered after the highest number of the history (user-2)")
			res, err := s.Compact(context.Background(), "")
			require.NoError(t, err)
			assert.Equal(t, before[4].ID, res.FirstKeptEntryID, "the cut is at the new prompt")
			after := s.Messages()
			assert.Equal(t, append([]string{after[0].ID}, messageIDs(before[4:])...), messageIDs(after),
				"the summary and the last exchange: the context shrank")
			assertUniqueIDs(t, readAll(t, s.History()))
		})
	})
}

// assertUniqueIDs checks, replaying entries, that no message takes the ID
// of a message of the runtime context, so that a removal or a first kept
// entry names one message, and that the session's own IDs (user-N, msg-N,
// compaction-N) never repeat in the whole history.
func assertUniqueIDs(t require.TestingT, entries []transcript.Entry) {
	own := regexp.MustCompile(`^(user|msg|compaction)-[0-9]+$`)
	seen := map[string]int{}
	var live []string // the IDs of the runtime context, in order
	for i, e := range entries {
		switch e.Type {
		case transcript.EntryRemoval:
			if j := slices.Index(live, e.ID); j >= 0 {
				live = slices.Delete(live, j, j+1)
			}
			continue
		case transcript.EntryMessage:
			if slices.Contains(live, e.ID) {
				assert.Fail(t, "duplicate ID", "entry %d takes the ID %q of a message of the runtime context", i+1, e.ID)
			}
			live = append(live, e.ID)
		case transcript.EntryCompaction:
			kept := slices.Index(live, e.Compaction.FirstKeptEntryID)
			if kept < 0 {
				kept = len(live)
			}
			live = append([]string{e.ID}, live[kept:]...)
		}
		if j, dup := seen[e.ID]; dup && own.MatchString(e.ID) {
			assert.Fail(t, "duplicate ID", "entries %d and %d share the session's ID %q", j+1, i+1, e.ID)
		}
		seen[e.ID] = i
	}
}

// IDs find one message over several sessions on one history, each with a
// new agent numbering its messages from 1 again, retries, tools and
// compactions included (issue item 6): an agent's ID is replaced when a
// message of the runtime context has it, and the session's own IDs never
// repeat.
func TestIDsUniqueAcrossReopens(t *testing.T) {
	histories(t, func(t *testing.T, h history.History, reopen func() history.History) {
		bubble(t, func(t *testing.T) {
			cfg := policy.DefaultConfig()
			cfg.Compaction.KeepRecentTokens = 5
			for cycle := range 4 {
				s := reopened(t, h, []scripted.Call{fail(service503), toolUse("look"), ok("done"), ok("again")}, session.WithConfig(cfg))
				require.NoError(t, s.Prompt(context.Background(), fmt.Sprintf("question %d", cycle)))
				require.NoError(t, s.Prompt(context.Background(), fmt.Sprintf("follow-up %d", cycle)))
				_, err := s.Compact(context.Background(), "")
				require.NoError(t, err)
				live := s.Messages()
				for _, m := range live {
					if m.Role == transcript.RoleToolResult {
						assert.Contains(t, messageIDs(live), m.ToolCallID, "a tool result points at its call")
					}
				}
				require.NoError(t, s.Close())
				h = reopen()
			}
			assertUniqueIDs(t, readAll(t, h))
		})
	})
}

// An agent that reuses an ID within one session gets a new one for the
// later message, so that an ID finds one message (issue item 6).
func TestAgentReusedIDReplaced(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := &fixedIDAgent{}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel))
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Prompt(context.Background(), "first"))
		agent.fail = true
		require.Error(t, s.Prompt(context.Background(), "second"))
		ids := messageIDs(s.Messages())
		require.Len(t, ids, 4, "both prompts, both answers: %v", ids)
		assert.Equal(t, "same", ids[1])
		assert.NotEqual(t, "same", ids[3])
		assertUniqueIDs(t, readAll(t, s.History()))
	})
}

// fixedIDAgent gives every message the ID "same"; once fail is set, its
// answers are fatal errors.
type fixedIDAgent struct{ fail bool }

func (a *fixedIDAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	m := transcript.Message{ID: "same", Role: transcript.RoleAssistant, StopReason: "stop", Content: transcript.TextContent("answer"),
		Provider: req.Model.Provider, Model: req.Model.ID}
	if a.fail {
		m.StopReason, m.ErrorMessage = "error", "401 invalid x-api-key"
	}
	emit(events.AgentStart{})
	emit(events.MessageStart{Message: m})
	emit(events.MessageEnd{Message: m})
	emit(events.AgentEnd{})
	return nil
}

// A history with an entry no session could have written is refused by
// New, naming the entry.
func TestNewRefusesInvalidHistory(t *testing.T) {
	h := &badHistory{entries: []transcript.Entry{msgEntry("a", "x"), {Type: transcript.EntryMessage, ID: "b"}}}
	_, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
	require.ErrorIs(t, err, transcript.ErrInvalidEntry)
	assert.Contains(t, err.Error(), "entry 2")
}

type badHistory struct{ entries []transcript.Entry }

func (h *badHistory) Append(es ...transcript.Entry) error {
	h.entries = append(h.entries, es...)
	return nil
}

func (h *badHistory) Entries() iter.Seq2[transcript.Entry, error] {
	return func(yield func(transcript.Entry, error) bool) {
		for _, e := range h.entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// outcomes are the answers a model call of the property below can have.
var outcomes = []scripted.Call{
	ok("done"),
	toolUse("read a file"),
	fail(service503),
	fail("429 Too Many Requests"),
	fail("401 invalid x-api-key"),
	fail(tooLong),
	{StopReason: "stop", Text: "silent overflow", Usage: &transcript.Usage{Input: 250000}},
	{StopReason: "stop", Text: "big", Usage: &transcript.Usage{Input: 180000, TotalTokens: 180000}},
	slow(ok("slow answer"), 3000),
	{Refuse: "the agent refused to start"},
}

// For random sessions, each ended and a new one started on its history
// (a MemoryHistory, or a FileHistory closed and reopened), the new
// session's runtime context is the one the old session had at its close,
// and no ID of the runtime context repeats (issue items 5 and 6).
func TestReopenReproducesRuntimeContext(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			var h history.History = &history.MemoryHistory{}
			reopen := func() history.History { return h }
			if rapid.Bool().Draw(t, "file") {
				dir, err := os.MkdirTemp("", "reopen")
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(dir)
				path := filepath.Join(dir, "h.jsonl")
				fh, err := history.OpenFileHistory(path)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { fh.Close() }()
				h = fh
				reopen = func() history.History {
					if err := fh.Close(); err != nil {
						t.Fatal(err)
					}
					if fh, err = history.OpenFileHistory(path); err != nil {
						t.Fatal(err)
					}
					return fh
				}
			}
			cfg := policy.DefaultConfig()
			cfg.Retry.MaxRetries = rapid.IntRange(0, 3).Draw(t, "maxRetries")
			cfg.Compaction.KeepRecentTokens = rapid.IntRange(1, 40).Draw(t, "keepRecentTokens")
			var want []transcript.Message
			for cycle := range rapid.IntRange(1, 4).Draw(t, "cycles") {
				cfg.Compaction.Enabled = rapid.Bool().Draw(t, "compaction")
				agent := scripted.New(scripted.Script{Model: scripted.DefaultModel})
				s, err := session.New(agent, session.WithModel(scripted.DefaultModel), session.WithConfig(cfg), session.WithHistory(h))
				if err != nil {
					t.Fatal(err)
				}
				if got := s.Messages(); cycle > 0 && !assert.ObjectsAreEqual(want, got) {
					s.Close()
					t.Fatalf("reopened context differs:\nwant %v\ngot  %v", messageIDs(want), messageIDs(got))
				}
				for range rapid.IntRange(1, 5).Draw(t, "turns") {
					for range rapid.IntRange(1, 3).Draw(t, "calls") {
						agent.Append(rapid.SampledFrom(outcomes).Draw(t, "call"))
					}
					switch rapid.IntRange(0, 3).Draw(t, "action") {
					case 0: // abort at some point of the turn
						done := promptAsync(s, "a question long enough to be worth compacting")
						time.Sleep(time.Duration(rapid.IntRange(0, 5000).Draw(t, "abortAfterMs")) * time.Millisecond)
						s.Abort()
						<-done
					case 1:
						_, _ = s.Compact(context.Background(), "")
					default:
						_ = s.Prompt(context.Background(), "a question long enough to be worth compacting")
					}
				}
				want = s.Messages()
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				h = reopen()
			}
			s, err := session.New(scripted.New(scripted.Script{}), session.WithModel(scripted.DefaultModel), session.WithConfig(cfg), session.WithHistory(h))
			if err != nil {
				t.Fatal(err)
			}
			got := s.Messages()
			s.Close()
			if !assert.ObjectsAreEqual(want, got) {
				t.Fatalf("reopened context differs:\nwant %v\ngot  %v", messageIDs(want), messageIDs(got))
			}
			assertUniqueIDs(t, readAll(t, h))
		})
	})
}
