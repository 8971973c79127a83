package session

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

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

func testEntry(id string) Entry {
	return Entry{Type: EntryMessage, ID: id, Timestamp: 1, Message: &Message{ID: id, Role: RoleUser, Content: TextContent("text of " + id), Timestamp: 1}}
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

func entryIDs(es []Entry) []string {
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
			assert.Equal(t, []string{"a"}, entryIDs(h.Entries()))

			require.NoError(t, h.Append(testEntry("c")))
			require.NoError(t, h.Close())
			h2, err := OpenFileHistory(path)
			require.NoError(t, err)
			defer h2.Close()
			assert.Equal(t, []string{"a", "c"}, entryIDs(h2.Entries()))
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
	assert.Equal(t, []string{"a"}, entryIDs(h.Entries()))
	require.NoError(t, h.Close())

	h2, err := OpenFileHistory(path)
	require.NoError(t, err, "the half-written line is the cut-short tail reopening drops")
	defer h2.Close()
	assert.Equal(t, []string{"a"}, entryIDs(h2.Entries()))
}

// An entry a FileHistory would not read back is refused before anything
// is written.
func TestFileHistoryAppendRefusesInvalidEntry(t *testing.T) {
	h, _, path := openFaulty(t)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, e := range []Entry{
		{Type: EntryMessage, ID: "x"},
		{Type: EntryCompaction, ID: "x"},
		{Type: "bogus", ID: "x"},
		{Type: EntryMessage, ID: "x", Message: &Message{ID: "y"}},
	} {
		err := h.Append(e)
		require.Error(t, err, "%+v", e)
		assert.True(t, errors.Is(err, ErrInvalidEntry), "%v", err)
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after))
}
