package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// historyCount is the count of entries a session started on the history
// at path gives its snapshots, and the count Entries reads.
func historyCount(t *testing.T, path string) (snapshot, entries int) {
	t.Helper()
	bubble(t, func(t *testing.T) {
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h.Close()
		s, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
		require.NoError(t, err)
		defer s.Close()
		snap, err := s.Snapshot()
		require.NoError(t, err)
		snapshot, entries = snap.History, len(readAll(t, h))
	})
	return snapshot, entries
}

// writeHistory writes, through a FileHistory at path, 14 entries: ten
// messages, a compaction that keeps the last four, and three more
// messages. It returns the file's lines.
func writeHistory(t *testing.T, path string) []string {
	t.Helper()
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, h.Append(msgEntry(fmt.Sprintf("m%d", i), fmt.Sprintf("message %d", i))))
	}
	require.NoError(t, h.Append(transcript.Entry{Type: transcript.EntryCompaction, ID: "c", Timestamp: 2,
		Compaction: &transcript.Compaction{Reason: transcript.ReasonManual, Summary: "s", FirstKeptEntryID: "m6"}}))
	for i := range 3 {
		require.NoError(t, h.Append(msgEntry(fmt.Sprintf("n%d", i), "after")))
	}
	require.NoError(t, h.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.SplitAfter(string(data), "\n")
}

// A history file edited by hand before its latest compaction's first kept
// entry (a line deleted, added, or made longer) no longer matches the
// index the compaction recorded: the count of entries a session starts
// with, and its snapshots give, is still the file's, not the index's
// (issue "round two", item 8).
func TestFileHistoryCountTrueAfterEditBeforeCompaction(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	lines := writeHistory(t, path)
	snapshot, entries := historyCount(t, path)
	require.Equal(t, 14, entries)
	require.Equal(t, 14, snapshot, "unedited")

	for name, edit := range map[string]func([]string) []string{
		"a line deleted": func(l []string) []string { return append(l[:2:2], l[3:]...) },
		"a line added": func(l []string) []string {
			return append([]string{strings.ReplaceAll(l[0], `"m0"`, `"x0"`)}, l...)
		},
		"a blank line added": func(l []string) []string { return append([]string{"\n"}, l...) },
		"a line made longer": func(l []string) []string {
			l = append([]string(nil), l...)
			l[1] = strings.Replace(l[1], "message 1", "message one", 1)
			return l
		},
		"the first kept entry deleted": func(l []string) []string { return append(l[:6:6], l[7:]...) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(edit(lines), "")), 0o600))
			snapshot, entries := historyCount(t, path)
			assert.Equal(t, entries, snapshot, "the snapshot counts the file's entries")
		})
	}
}

// idsOf is the IDs of entries, in order.
func idsOf(entries []transcript.Entry) []string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	return ids
}

// An append of several entries (one step of a session) cut short at any
// byte is dropped whole on reopening (history's
// TestFileHistoryAppendCutShortIsDroppedWhole): a session started on the
// file after the next append counts the file's entries in its snapshots.
func TestSessionCountAfterAnAppendCutShort(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.jsonl")
	h, err := history.OpenFileHistory(full)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first")))
	before, err := os.ReadFile(full)
	require.NoError(t, err)
	step := []transcript.Entry{msgEntry("b", "failed"), {Type: transcript.EntryRemoval, ID: "b", Timestamp: 1},
		{Type: transcript.EntryCompaction, ID: "c", Timestamp: 2, Compaction: &transcript.Compaction{Reason: transcript.ReasonManual, Summary: "s", FirstKeptEntryID: "a"}},
		msgEntry("d", "after")}
	require.NoError(t, h.Append(step...))
	require.NoError(t, h.Close())
	data, err := os.ReadFile(full)
	require.NoError(t, err)

	for cut := len(before); cut < len(data); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut%d.jsonl", cut))
		require.NoError(t, os.WriteFile(path, data[:cut], 0o600))
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err, "cut at %d", cut)
		want := []string{"a"}
		if cut == len(data)-1 {
			want = []string{"a", "b", "b", "c", "d"} // only the newline lost
		}
		require.NoError(t, h.Append(msgEntry("e", "after the crash")))
		require.NoError(t, h.Close())
		snapshot, entries := historyCount(t, path)
		require.Equal(t, len(want)+1, entries, "cut at %d, reopened", cut)
		require.Equal(t, entries, snapshot, "cut at %d, reopened", cut)
	}
}

// A writer that ignores the lock and appends whole lines meanwhile: the
// FileHistory counts them, so that the index of its next compaction, and
// the count a reopened session gives its snapshots, stay the file's.
func TestFileHistoryCountsAnotherWritersLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first"), msgEntry("b", "second")))
	other, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = other.WriteString(`{"type":"message","id":"x","timestamp":1,"message":{"id":"x","role":"user","timestamp":1}}` + "\n\n")
	require.NoError(t, err)
	require.NoError(t, other.Close())
	require.NoError(t, h.Append(transcript.Entry{Type: transcript.EntryCompaction, ID: "c", Timestamp: 2,
		Compaction: &transcript.Compaction{Reason: transcript.ReasonManual, Summary: "s", FirstKeptEntryID: "b"}}, msgEntry("d", "after")))
	assert.Equal(t, []string{"a", "b", "x", "c", "d"}, idsOf(readAll(t, h)))
	require.NoError(t, h.Close())
	snapshot, entries := historyCount(t, path)
	assert.Equal(t, 5, entries)
	assert.Equal(t, 5, snapshot)
}
