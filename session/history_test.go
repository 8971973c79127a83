package session_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

func msgEntry(id, text string) transcript.Entry {
	return transcript.Entry{Type: transcript.EntryMessage, ID: id, Timestamp: 1, Message: &transcript.Message{ID: id, Role: transcript.RoleUser, Content: transcript.TextContent(text), Timestamp: 1}}
}

// A session on a file history writes every message, and a new session on
// the same file continues from it.
func TestSessionOnFileHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session.jsonl")
	bubble(t, func(t *testing.T) {
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h.Close()
		s, _, _ := newSession(t, []scripted.Call{fail(service503), ok("done")}, session.WithHistory(h))
		require.NoError(t, s.Prompt(context.Background(), "hi"))
		s.Close()
	})
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	assert.Len(t, readAll(t, h), 4, "the prompt, the error (kept in history), its removal and the answer")
	s, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, 2, s.Status().MessageCount, "the runtime context is rebuilt without the removed error")
}

// TestSessionRefusesDetailsJSONCannotEncode: a compaction whose
// summarizer's details JSON cannot encode fails with an error that says
// so, and leaves the file and the runtime context as they were. Issue
// item 5. (The file history refuses such details on its own too: history's
// TestFileHistoryRefusesDetailsJSONCannotEncode.)
func TestSessionRefusesDetailsJSONCannotEncode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	sum := summarizerFunc(func(context.Context, policy.SummaryRequest) (policy.Summary, error) {
		return policy.Summary{Text: "s", Details: make(chan int)}, nil
	})
	s, _, _ := newSession(t, []scripted.Call{ok("first answer"), ok("second answer")}, smallKeep(), session.WithSummarizer(sum), session.WithHistory(h))
	warmUp(t, s)
	require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	msgs := s.Messages()
	_, err = s.Compact(context.Background(), "")
	require.ErrorContains(t, err, "the summary's details cannot be written as JSON")
	require.ErrorContains(t, err, "chan int")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
	assert.Equal(t, msgs, s.Messages())
}

// A damaged line before the tail that opening reads is not seen by a
// session starting on the tail (issue item 2); history's
// TestFileHistoryDamageBeforeTheTail reads the stream to it.
func TestSessionStartsPastDamageBeforeTheTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	content := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","timestamp":1}}` + "\n" +
		`{"type":"message","id":"b",` + "\n" +
		`{"type":"message","id":"c","timestamp":1,"message":{"id":"c","role":"user","timestamp":1}}` + "\n"
	content += fmt.Sprintf(`{"type":"compaction","id":"k","timestamp":2,"compaction":{"reason":"manual","summary":"s","firstKeptEntryId":"c","tokensBefore":0},"index":3,"offset":%d}`, len(content)) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err, "the damaged line is before the tail")
	defer h.Close()
	s, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
	require.NoError(t, err)
	assert.Equal(t, []string{"k", "c"}, messageIDs(s.Messages()))
	snap, err := s.Snapshot()
	require.NoError(t, err)
	assert.Equal(t, 4, snap.History, "the count the compaction's index gives")
	require.NoError(t, s.Close())
}
