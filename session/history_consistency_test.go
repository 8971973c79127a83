package session_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// historyCount is the count of entries a session started on the history
// at path gives its snapshots, and the count Entries reads.
func historyCount(t *testing.T, path string) (snapshot, entries int) {
	t.Helper()
	bubble(t, func(t *testing.T) {
		h, err := session.OpenFileHistory(path)
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

// A last line without its newline that is a complete JSON value but not
// an entry this version reads (an entry or a block of a newer version, or
// JSON of another shape) is not a write cut short: the file is refused,
// naming the line, and left byte for byte as it was, as it is when the
// newline is there. Only a line that is not a complete JSON value is
// dropped as cut short (issue "round two", item 6).
func TestFileHistoryRefusesCompleteUnknownLastLine(t *testing.T) {
	first := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","content":"hi","timestamp":1}}` + "\n"
	for name, last := range map[string]string{
		"newer entry type": `{"type":"branch","id":"b","timestamp":2,"branch":{"from":"a"}}`,
		"newer block type": `{"type":"message","id":"b","timestamp":2,"message":{"id":"b","role":"user","content":[{"type":"audio","data":"AAA="}],"timestamp":2}}`,
		"a number":         `5`,
		"an array":         `[1,2,3]`,
		"null":             `null`,
		"true":             `true`,
		"an empty object":  `{}`,
		"a string":         `"a"`,
		"a huge string":    `"` + strings.Repeat("x", 1<<20) + `"`,
		"padded":           " \t{\"type\":\"branch\",\"id\":\"b\"} ",
	} {
		for _, newline := range []string{"", "\n"} {
			t.Run(fmt.Sprintf("%s, newline %q", name, newline), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "h.jsonl")
				content := []byte(first + last + newline)
				require.NoError(t, os.WriteFile(path, content, 0o600))
				h, err := session.OpenFileHistory(path)
				if err == nil {
					h.Close()
				}
				require.ErrorIs(t, err, session.ErrCorruptHistory)
				assert.Contains(t, err.Error(), path)
				assert.Contains(t, err.Error(), "line 2")
				after, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(content, after), "the file is left byte for byte as it was")
			})
		}
	}
	// The same lines cut short are a crash's: dropped.
	for _, torn := range []string{`{"type":"branch","id":"b","timestamp":2,"bra`, `[1,2,`, `nul`, `"` + strings.Repeat("x", 1<<20), `{`} {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(first+torn), 0o600))
		h, err := session.OpenFileHistory(path)
		require.NoError(t, err, "%.40q", torn)
		assert.Equal(t, []string{"a"}, idsOf(readAll(t, h)))
		require.NoError(t, h.Close())
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, first, string(after), "%.40q is dropped", torn)
	}
}

// writeHistory writes, through a FileHistory at path, 14 entries: ten
// messages, a compaction that keeps the last four, and three more
// messages. It returns the file's lines.
func writeHistory(t *testing.T, path string) []string {
	t.Helper()
	h, err := session.OpenFileHistory(path)
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, h.Append(msgEntry(fmt.Sprintf("m%d", i), fmt.Sprintf("message %d", i))))
	}
	require.NoError(t, h.Append(session.Entry{Type: session.EntryCompaction, ID: "c", Timestamp: 2,
		Compaction: &session.Compaction{Reason: session.ReasonManual, Summary: "s", FirstKeptEntryID: "m6"}}))
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
func idsOf(entries []session.Entry) []string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	return ids
}
