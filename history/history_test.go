package history_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/transcript"
)

// readAll collects h's entries, failing the test on an error.
func readAll(t require.TestingT, h history.History) []transcript.Entry {
	var out []transcript.Entry
	for e, err := range h.Entries() {
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

func msgEntry(id, text string) transcript.Entry {
	return transcript.Entry{Type: transcript.EntryMessage, ID: id, Timestamp: 1, Message: &transcript.Message{ID: id, Role: transcript.RoleUser, Content: transcript.TextContent(text), Timestamp: 1}}
}

// idsOf is the IDs of entries, in order.
func idsOf(entries []transcript.Entry) []string {
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	return ids
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}

func appendTo(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

func TestMemoryHistory(t *testing.T) {
	var h history.MemoryHistory
	require.NoError(t, h.Append(msgEntry("a", "x")))
	require.NoError(t, h.Append(msgEntry("b", "y")))
	got := readAll(t, &h)
	require.Len(t, got, 2)
	got[0].ID = "changed"
	assert.Equal(t, "a", readAll(t, &h)[0].ID, "Entries yields copies")
	before, tail, err := h.Tail()
	require.NoError(t, err)
	assert.Equal(t, 0, before)
	assert.Len(t, tail, 2, "without a compaction the tail is everything")
	require.NoError(t, h.Append(msgEntry("c", "z"), transcript.Entry{Type: transcript.EntryCompaction, ID: "k", Timestamp: 2,
		Compaction: &transcript.Compaction{Reason: transcript.ReasonManual, Summary: "s", FirstKeptEntryID: "b"}}))
	before, tail, err = h.Tail()
	require.NoError(t, err)
	assert.Equal(t, 1, before, "the tail starts at the first kept entry")
	assert.Equal(t, []string{"b", "c", "k"}, []string{tail[0].ID, tail[1].ID, tail[2].ID})
	tail[0].ID = "changed"
	assert.Equal(t, "b", readAll(t, &h)[1].ID, "Tail returns a copy")
}

func TestFileHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first")))
	require.NoError(t, h.Append(transcript.Entry{Type: transcript.EntryCompaction, ID: "c", Timestamp: 2,
		Compaction: &transcript.Compaction{Reason: transcript.ReasonThreshold, Summary: "s", FirstKeptEntryID: "a", TokensBefore: 7}}))
	require.NoError(t, h.Close())
	require.Error(t, h.Append(msgEntry("late", "x")), "append after close fails")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, 2, countLines(data), "one JSON object per line")

	h2, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h2.Close()
	got := readAll(t, h2)
	require.Len(t, got, 2)
	assert.Equal(t, "first", got[0].Message.Text())
	assert.Equal(t, "s", got[1].Compaction.Summary)
}

// TestFileHistoryCrash cuts the file at every byte offset of its last line,
// as a crash in the middle of an append would: every complete line is kept,
// the cut line is dropped (or kept when only its newline is missing), and
// the next append lands on a line of its own.
func TestFileHistoryCrash(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "full.jsonl")
	h, err := history.OpenFileHistory(full)
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, h.Append(msgEntry(fmt.Sprintf("m%d", i), fmt.Sprintf("message %d", i))))
	}
	require.NoError(t, h.Close())
	data, err := os.ReadFile(full)
	require.NoError(t, err)
	lastStart := len(data) - 1
	for lastStart > 0 && data[lastStart-1] != '\n' {
		lastStart--
	}
	for cut := lastStart; cut < len(data); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut%d.jsonl", cut))
		require.NoError(t, os.WriteFile(path, data[:cut], 0o644))
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err, "cut at %d", cut)
		want := 2
		if cut == len(data)-1 {
			want = 3 // the whole entry, only its newline lost
		}
		require.Len(t, readAll(t, h), want, "cut at %d", cut)
		require.NoError(t, h.Append(msgEntry("after", "after the crash")))
		require.NoError(t, h.Close())
		h, err = history.OpenFileHistory(path)
		require.NoError(t, err, "cut at %d, reopened", cut)
		got := readAll(t, h)
		require.Len(t, got, want+1, "cut at %d, reopened", cut)
		assert.Equal(t, "after", got[want].ID)
		require.NoError(t, h.Close())
	}
}

func TestFileHistoryCorruptLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	content := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","timestamp":1}}` + "\n" +
		`{"type":"message","id":"b",` + "\n" +
		`{"type":"message","id":"c","timestamp":1,"message":{"id":"c","role":"user","timestamp":1}}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	_, err := history.OpenFileHistory(path)
	require.ErrorIs(t, err, history.ErrCorruptHistory)
	assert.Contains(t, err.Error(), "line 2")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, content, string(after), "a corrupt file is left as it was")

	require.NoError(t, os.WriteFile(path, []byte(`{"type":"bogus","id":"x"}`+"\n"+`{}`+"\n"), 0o644))
	_, err = history.OpenFileHistory(path)
	require.ErrorIs(t, err, history.ErrCorruptHistory)
	assert.Contains(t, err.Error(), "line 1")
}

// TestFileHistoryCompactionFormat: a compaction entry is written as before
// (reason, summary, firstKeptEntryId, tokensBefore), with the summarizer's
// details when there are some, and its line ends with its index; a file
// written before details or indexes were kept opens, and details come back
// as JSON decodes them. Issue item 5.
func TestFileHistoryCompactionFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	old := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","text":"first","timestamp":1}}` + "\n" +
		`{"type":"compaction","id":"c1","timestamp":2,"compaction":{"reason":"threshold","summary":"s","firstKeptEntryId":"a","tokensBefore":7}}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(old), 0o600))
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	got := readAll(t, h)
	require.Len(t, got, 2)
	assert.Equal(t, transcript.Compaction{Reason: transcript.ReasonThreshold, Summary: "s", FirstKeptEntryID: "a", TokensBefore: 7}, *got[1].Compaction)

	require.NoError(t, h.Append(transcript.Entry{Type: transcript.EntryCompaction, ID: "c2", Timestamp: 3,
		Compaction: &transcript.Compaction{Reason: transcript.ReasonManual, Summary: "t", FirstKeptEntryID: "a", TokensBefore: 9,
			Details: map[string]any{"files": []string{"a.go"}}}}))
	require.NoError(t, h.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, old+fmt.Sprintf(`{"type":"compaction","id":"c2","timestamp":3,"compaction":{"reason":"manual","summary":"t","firstKeptEntryId":"a","tokensBefore":9,"details":{"files":["a.go"]}},"index":2,"offset":%d}`, len(old))+"\n", string(data),
		"written as before, details last, then the line's index and offset")

	h, err = history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	got = readAll(t, h)
	require.Len(t, got, 3)
	assert.Equal(t, map[string]any{"files": []any{"a.go"}}, got[2].Compaction.Details)
	assert.Equal(t, *got[1].Compaction, transcript.Compaction{Reason: transcript.ReasonThreshold, Summary: "s", FirstKeptEntryID: "a", TokensBefore: 7}, "no details: none read")
}

// TestFileHistoryRefusesDetailsJSONCannotEncode: a compaction whose
// summarizer's details JSON cannot encode is refused with an error that
// says so, and leaves the file as it was. Issue item 5. (A session refuses
// such details as the summary comes in, whatever its history; the file
// history refuses them on its own too.)
func TestFileHistoryRefusesDetailsJSONCannotEncode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	require.NoError(t, h.Append(msgEntry("a", "first")))
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	err = h.Append(msgEntry("b", "second"), transcript.Entry{Type: transcript.EntryCompaction, ID: "k", Compaction: &transcript.Compaction{Summary: "s", Details: make(chan int)}})
	require.ErrorContains(t, err, "encoding history entry")
	require.ErrorContains(t, err, "chan int")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "nothing of the refused append is written")
	assert.Equal(t, []string{"a"}, idsOf(readAll(t, h)))
}

// A damaged line before the tail that opening reads is not seen by
// opening nor by Tail: Entries reports it, naming its line, when it gets
// there (issue item 2).
func TestFileHistoryDamageBeforeTheTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	content := `{"type":"message","id":"a","timestamp":1,"message":{"id":"a","role":"user","timestamp":1}}` + "\n" +
		`{"type":"message","id":"b",` + "\n" +
		`{"type":"message","id":"c","timestamp":1,"message":{"id":"c","role":"user","timestamp":1}}` + "\n"
	content += fmt.Sprintf(`{"type":"compaction","id":"k","timestamp":2,"compaction":{"reason":"manual","summary":"s","firstKeptEntryId":"c","tokensBefore":0},"index":3,"offset":%d}`, len(content)) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err, "the damaged line is before the tail")
	defer h.Close()
	before, tail, err := h.Tail()
	require.NoError(t, err)
	assert.Equal(t, 2, before, "the count the compaction's index gives")
	assert.Equal(t, []string{"c", "k"}, idsOf(tail))
	var ids []string
	var readErr error
	for e, err := range h.Entries() {
		if err != nil {
			readErr = err
			continue
		}
		ids = append(ids, e.ID)
	}
	assert.Equal(t, []string{"a"}, ids, "the stream ends at the damaged line")
	require.ErrorIs(t, readErr, history.ErrCorruptHistory)
	assert.Contains(t, readErr.Error(), "line 2")
}

// Reading a closed FileHistory yields an error naming the file, and so
// does a Tail; neither panics (issue item 2).
func TestFileHistoryReadAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first"), msgEntry("b", "second")))
	require.NoError(t, h.Close())
	yielded := 0
	for _, err := range h.Entries() {
		yielded++
		require.ErrorIs(t, err, os.ErrClosed)
		assert.Contains(t, err.Error(), path)
	}
	assert.Equal(t, 1, yielded, "one error, then the stream ends")
	_, _, err = h.Tail()
	require.ErrorIs(t, err, os.ErrClosed)
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
				h, err := history.OpenFileHistory(path)
				if err == nil {
					h.Close()
				}
				require.ErrorIs(t, err, history.ErrCorruptHistory)
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
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err, "%.40q", torn)
		assert.Equal(t, []string{"a"}, idsOf(readAll(t, h)))
		require.NoError(t, h.Close())
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, first, string(after), "%.40q is dropped", torn)
	}
}

// A writer that ignores the lock and leaves the file in a state an append
// cannot follow (a last line without its newline, a line that is not an
// entry, a file cut shorter): the append is refused with an error naming
// the file, and writes nothing.
func TestFileHistoryRefusesAppendAfterAnotherWritersDamage(t *testing.T) {
	for name, damage := range map[string]func(path string) error{
		"a line without its newline": func(path string) error {
			return appendTo(path, `{"type":"message","id":"x","timestamp":1,"message":{"id":"x","role":"user","timestamp":1}}`)
		},
		"a line cut short":    func(path string) error { return appendTo(path, `{"type":"mess`) },
		"a line not an entry": func(path string) error { return appendTo(path, "[1,2]\n") },
		"the file cut shorter": func(path string) error {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, fi.Size()-10)
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.jsonl")
			h, err := history.OpenFileHistory(path)
			require.NoError(t, err)
			defer h.Close()
			require.NoError(t, h.Append(msgEntry("a", "first"), msgEntry("b", "second")))
			require.NoError(t, damage(path))
			damaged, err := os.ReadFile(path)
			require.NoError(t, err)
			err = h.Append(msgEntry("c", "third"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(damaged), string(after), "the refused append wrote nothing")
		})
	}
}

// A FileHistory closed is done with: Close again is harmless, an append
// fails with os.ErrClosed naming the file and writes nothing, and the file
// reopens (in a new FileHistory) with every entry.
func TestFileHistoryAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	require.NoError(t, h.Append(msgEntry("a", "first")))
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "closing twice")
	err = h.Append(msgEntry("b", "second"))
	require.ErrorIs(t, err, os.ErrClosed)
	assert.Contains(t, err.Error(), path)

	h2, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h2.Close()
	require.ErrorIs(t, h.Append(msgEntry("b", "second")), os.ErrClosed, "the old one stays closed")
	require.NoError(t, h2.Append(msgEntry("c", "third")))
	assert.Equal(t, []string{"a", "c"}, idsOf(readAll(t, h2)))
}

// An append of several entries (one step of a session: a message and its
// removal, a compaction and what it records) cut short at any byte, as a
// crash or a full disk whose undo failed leaves it, is dropped whole on
// reopening: none of its entries is kept, even those whose lines are
// complete, unless only the final newline is missing. The entries before
// it are all kept, and the next append lands on a line of its own.
func TestFileHistoryAppendCutShortIsDroppedWhole(t *testing.T) {
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
		require.Equal(t, want, idsOf(readAll(t, h)), "cut at %d", cut)
		require.NoError(t, h.Append(msgEntry("e", "after the crash")))
		require.NoError(t, h.Close())
		h, err = history.OpenFileHistory(path)
		require.NoError(t, err, "cut at %d, reopened", cut)
		require.Equal(t, append(want, "e"), idsOf(readAll(t, h)), "cut at %d, reopened", cut)
		require.NoError(t, h.Close())
	}
}

// A nil *FileHistory (a failed OpenFileHistory's result used anyway) is
// refused with an error that says so, never a panic: Append writes
// nothing, Entries yields the error once, Tail returns it, Close is a
// no-op as on a closed history.
func TestNilFileHistory(t *testing.T) {
	var h *history.FileHistory
	assert.ErrorIs(t, h.Append(transcript.Entry{Type: transcript.EntryRemoval, ID: "m"}), history.ErrNilHistory)
	n := 0
	for _, err := range h.Entries() {
		n++
		assert.ErrorIs(t, err, history.ErrNilHistory)
	}
	assert.Equal(t, 1, n)
	before, entries, err := h.Tail()
	assert.ErrorIs(t, err, history.ErrNilHistory)
	assert.Zero(t, before)
	assert.Nil(t, entries)
	assert.NoError(t, h.Close())
	assert.EqualError(t, history.ErrNilHistory, "history: nil history (open a FileHistory with OpenFileHistory, or use a new MemoryHistory)")
}

// So is a nil *MemoryHistory, and a nil History given to Load.
func TestNilMemoryHistoryAndLoad(t *testing.T) {
	var m *history.MemoryHistory
	assert.ErrorIs(t, m.Append(transcript.Entry{Type: transcript.EntryRemoval, ID: "m"}), history.ErrNilHistory)
	n := 0
	for _, err := range m.Entries() {
		n++
		assert.ErrorIs(t, err, history.ErrNilHistory)
	}
	assert.Equal(t, 1, n)
	_, _, err := m.Tail()
	assert.ErrorIs(t, err, history.ErrNilHistory)
	for _, h := range []history.History{nil, m, (*history.FileHistory)(nil)} {
		before, entries, err := history.Load(h)
		assert.ErrorIs(t, err, history.ErrNilHistory)
		assert.Zero(t, before)
		assert.Nil(t, entries)
	}
}
