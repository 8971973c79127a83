package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultyFile is a history file whose next write, sync or truncate fails
// once. A failed write has written half its bytes first, as a disk that
// fills up in the middle of a line does.
type faultyFile struct {
	*os.File
	failWrite, failSync, failTruncate error
}

func (f *faultyFile) Write(p []byte) (int, error) {
	if err := f.failWrite; err != nil {
		f.failWrite = nil
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

func (f *faultyFile) Sync() error {
	if err := f.failSync; err != nil {
		f.failSync = nil
		return err
	}
	return f.File.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.failTruncate; err != nil {
		f.failTruncate = nil
		return err
	}
	return f.File.Truncate(size)
}

func testEntry(id string) transcript.Entry {
	return transcript.Entry{Type: transcript.EntryMessage, ID: id, Timestamp: 1, Message: &transcript.Message{ID: id, Role: transcript.RoleUser, Content: transcript.TextContent("text of " + id), Timestamp: 1}}
}

// openFaulty opens a history at a new path with one entry, "a", and puts
// a faultyFile under it.
func openFaulty(t *testing.T) (*FileHistory, *faultyFile, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := OpenFileHistory(path)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	require.NoError(t, h.Append(testEntry("a")))
	ff := &faultyFile{File: h.f.(*os.File)}
	h.f = ff
	return h, ff, path
}

// readAll collects h's entries, failing the test on an error.
func readAll(t require.TestingT, h History) []transcript.Entry {
	var out []transcript.Entry
	for e, err := range h.Entries() {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

func entryIDs(es []transcript.Entry) []string {
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// A failed append, at its write (a full disk) or at its sync, leaves the
// file exactly as it was; the next append works and the file reopens with
// every entry that was added (issue item 20).
func TestFileHistoryFailedAppendLeavesFileUnchanged(t *testing.T) {
	for _, fault := range []string{"write", "sync"} {
		t.Run(fault, func(t *testing.T) {
			h, ff, path := openFaulty(t)
			before, err := os.ReadFile(path)
			require.NoError(t, err)
			if fault == "write" {
				ff.failWrite = syscall.ENOSPC
			} else {
				ff.failSync = syscall.EIO
			}
			err = h.Append(testEntry("b"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "the failed append left nothing")
			assert.Equal(t, []string{"a"}, entryIDs(readAll(t, h)))

			require.NoError(t, h.Append(testEntry("c")))
			require.NoError(t, h.Close())
			h2, err := OpenFileHistory(path)
			require.NoError(t, err)
			defer h2.Close()
			assert.Equal(t, []string{"a", "c"}, entryIDs(readAll(t, h2)))
		})
	}
}

// When a failed append cannot be undone either, the history refuses every
// later append (each would land after the partial line), and the file
// reopens with the entries before it (issue item 20).
func TestFileHistoryUndoFailureRefusesLaterAppends(t *testing.T) {
	h, ff, path := openFaulty(t)
	ff.failWrite = syscall.ENOSPC
	ff.failTruncate = syscall.EIO
	err := h.Append(testEntry("b"))
	require.ErrorIs(t, err, syscall.ENOSPC)
	err = h.Append(testEntry("c"))
	require.Error(t, err, "an append after an append that could not be undone")
	assert.ErrorIs(t, err, syscall.EIO)
	assert.Contains(t, err.Error(), path)
	assert.Equal(t, []string{"a"}, entryIDs(readAll(t, h)))
	require.NoError(t, h.Close())

	h2, err := OpenFileHistory(path)
	require.NoError(t, err, "the half-written line is the cut-short tail reopening drops")
	defer h2.Close()
	assert.Equal(t, []string{"a"}, entryIDs(readAll(t, h2)))
}

// An entry a FileHistory would not read back is refused before anything
// is written.
func TestFileHistoryAppendRefusesInvalidEntry(t *testing.T) {
	h, _, path := openFaulty(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, e := range []transcript.Entry{
		{Type: transcript.EntryMessage, ID: "x"},
		{Type: transcript.EntryCompaction, ID: "x"},
		{Type: "bogus", ID: "x"},
		{Type: transcript.EntryMessage, ID: "x", Message: &transcript.Message{ID: "y"}},
	} {
		err := h.Append(e)
		require.Error(t, err, "%+v", e)
		assert.True(t, errors.Is(err, transcript.ErrInvalidEntry), "%v", err)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}

// bigHistory writes, through a FileHistory at path, batches of 100 turns
// (a user message and an answer of 1 KB each: 200 KB a batch), a
// compaction that keeps the last two turns, then two more turns and a
// removal. It returns the ID of the first entry kept; the entries are
// numbered 1 on, the first kept one 200*batches+1.
func bigHistory(t *testing.T, path string, batches int) (firstKept string) {
	t.Helper()
	h, err := OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	text := strings.Repeat("x", 1000)
	n := 0
	message := func(role transcript.Role) transcript.Entry {
		n++
		kind := "user"
		if role == transcript.RoleAssistant {
			kind = "msg"
		}
		id := fmt.Sprintf("%s-%d", kind, n)
		return transcript.Entry{Type: transcript.EntryMessage, ID: id, Timestamp: int64(n), Message: &transcript.Message{ID: id, Role: role, Content: transcript.TextContent(text),
			StopReason: map[transcript.Role]transcript.StopReason{transcript.RoleAssistant: "stop"}[role], Timestamp: int64(n)}}
	}
	for range batches {
		var batch []transcript.Entry
		for range 100 {
			batch = append(batch, message(transcript.RoleUser), message(transcript.RoleAssistant))
		}
		require.NoError(t, h.Append(batch...))
	}
	var last []transcript.Entry
	for range 2 {
		last = append(last, message(transcript.RoleUser), message(transcript.RoleAssistant))
	}
	require.NoError(t, h.Append(last...))
	n++
	compaction := transcript.Entry{Type: transcript.EntryCompaction, ID: fmt.Sprintf("compaction-%d", n), Timestamp: int64(n),
		Compaction: &transcript.Compaction{Reason: transcript.ReasonThreshold, Summary: "the story so far", FirstKeptEntryID: last[0].ID}}
	failed := message(transcript.RoleAssistant) // msg-(200*batches+6), removed below
	failed.Message.StopReason = "error"
	after := []transcript.Entry{message(transcript.RoleUser), message(transcript.RoleAssistant), message(transcript.RoleUser)}
	require.NoError(t, h.Append(compaction, failed, transcript.Entry{Type: transcript.EntryRemoval, ID: failed.ID, Timestamp: int64(n)}, after[0], after[1], after[2]))
	return last[0].ID
}

// Reopening a long history reads it from the latest compaction's first
// kept entry on, not the whole file, and a session started on it has the
// runtime context, the entry count and the ID counter that reading all of
// it gives (issue item 2). A file whose compaction does not record its
// index, as written before, or that was edited before the compaction, is
// read whole and gives the same, its count of entries the file's. The
// file is bigHistoryBatches of 200 KB (race_on/race_off_internal_test.go):
// the tail read stays under 100 KB whatever the size.
func TestFileHistoryReopenReadsOnlyTheTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	firstKept := bigHistory(t, path, bigHistoryBatches)
	n := 200 * bigHistoryBatches // messages before the last two turns
	id := func(kind string, i int) string { return fmt.Sprintf("%s-%d", kind, n+i) }
	require.Equal(t, id("user", 1), firstKept)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(data), 1000*n, "a KB a message")
	tail := len(data) - bytes.Index(data, []byte(`{"type":"message","id":"`+firstKept+`"`))
	require.Less(t, tail, 16<<10)

	for _, file := range []string{"as written", "without index", "edited before the compaction"} {
		index := file == "as written"
		count := n + 10
		switch file {
		case "without index":
			require.NoError(t, os.WriteFile(path, regexp.MustCompile(`,"index":\d+`).ReplaceAll(data, nil), 0o600))
		case "edited before the compaction":
			// The first line deleted: the compaction is no longer at its
			// offset, nor is its index the count of entries before it.
			require.NoError(t, os.WriteFile(path, data[bytes.IndexByte(data, '\n')+1:], 0o600))
			count--
		}
		h, err := OpenFileHistory(path)
		require.NoError(t, err)
		// What a session does as it starts on h (session.New): Load, then
		// the engine replays what Load returned.
		before, entries, err := Load(h)
		require.NoError(t, err)
		e, err := policy.New(policy.Setup{SessionID: "s", Model: policy.Model{ID: "m"}, Config: policy.DefaultConfig(), History: entries, Before: before})
		require.NoError(t, err)
		read := h.read.Load()
		if index {
			assert.LessOrEqual(t, read, int64(2*tail+64<<10), "read from the first kept entry on (twice at most: opening, then the session's start)")
			t.Logf("%d bytes, %d from the first kept entry on: %d bytes read", len(data), tail, read)
		} else {
			assert.GreaterOrEqual(t, read, int64(len(data)-len(data)/20), "%s: read whole", file)
		}
		assert.Equal(t, []string{id("compaction", 5), firstKept, id("msg", 2), id("user", 3), id("msg", 4), id("user", 7), id("msg", 8), id("user", 9)},
			messageIDsOf(e.Messages()), "the runtime context replaying the whole history gives")
		snap := e.Snapshot()
		assert.Equal(t, count, snap.History, "%s: the entry count", file)
		_, err = e.Prompt(time.Unix(0, 0), "next")
		require.NoError(t, err)
		msgs := e.Messages()
		assert.Equal(t, id("user", 10), msgs[len(msgs)-1].ID, "numbered after every ID of the history")
		require.NoError(t, h.Close())
	}
}

func messageIDsOf(msgs []transcript.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

// Opening a file whose last entry lost its newline writes the newline
// back; when that cannot be synced, the newline is taken back out, and the
// refused file is left as it was.
func TestFileHistoryRepairThatFailsIsUndone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	content := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","timestamp":1}}`
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	f, err := openHistoryFile(path)
	require.NoError(t, err)
	h := &FileHistory{path: path, f: &faultyFile{File: f, failSync: syscall.EIO}}
	err = h.load()
	require.ErrorIs(t, err, syscall.EIO)
	assert.Contains(t, err.Error(), path)
	require.NoError(t, h.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, content, string(after), "the refused file is left as it was")
}

// Opening a file whose last line was cut short drops it; when that
// truncation cannot be synced, the open fails naming the file, and the
// file holds its whole lines, nothing added in place of the dropped one.
func TestFileHistoryDropThatCannotSyncAddsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	whole := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","timestamp":1}}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(whole+`{"type":"mess`), 0o600))
	f, err := openHistoryFile(path)
	require.NoError(t, err)
	h := &FileHistory{path: path, f: &faultyFile{File: f, failSync: syscall.EIO}}
	err = h.load()
	require.ErrorIs(t, err, syscall.EIO)
	assert.Contains(t, err.Error(), path)
	require.NoError(t, h.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, whole, string(after))
}
