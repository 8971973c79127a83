package session_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/transcript"
)

// TestHostileInvalidUTF8IDsCollideOnReopen: docs/session.md: "IDs are
// unique across the whole history, whichever process wrote it", and a
// session reopened on a history has "exactly the runtime context the
// session that wrote them had". A FileHistory writes text that is not
// valid UTF-8 as U+FFFD; the session checks an agent's message ID for
// uniqueness as bytes, so two IDs that differ only in invalid bytes
// ("a\xff", "a\xfe") are both kept live and become one ID in the file.
// Reopened, the history has a duplicate ID: a removal or a compaction's
// first kept entry naming it no longer names one message, so replaying
// them can remove or cut at the other one.
func TestHostileInvalidUTF8IDsCollideOnReopen(t *testing.T) {
	bubble(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "chat.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		first := assistant("stop", "first answer")
		first.ID = "a\xff"
		second := assistant("stop", "second answer")
		second.ID = "a\xfe"
		agent := playing(answer(first), answer(second))
		s, err := session.New(agent, session.WithModel(policy.Model{Provider: "scripted", ID: "scripted-1", ContextWindow: 200000}),
			session.WithHistory(h), smallKeep())
		require.NoError(t, err)
		require.NoError(t, s.Prompt(context.Background(), "first question, long enough to matter"))
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough to matter"))
		_, err = s.Compact(context.Background(), "")
		require.NoError(t, err)
		live := s.Messages()
		require.NoError(t, s.Close())
		require.NoError(t, h.Close())

		h2, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h2.Close()
		seen := map[string]bool{}
		for _, e := range readAll(t, h2) {
			if e.Type != transcript.EntryMessage {
				continue
			}
			assert.False(t, seen[e.ID], "message ID %q is in the history twice", e.ID)
			seen[e.ID] = true
		}
		s2, err := session.New(playing(), session.WithHistory(h2))
		require.NoError(t, err)
		defer s2.Close()
		reopened := s2.Messages()
		assert.Equal(t, len(live), len(reopened), "the reopened context has the live one's messages")
	})
}
