package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// EntryType says what a history entry holds.
type EntryType string

// The entry types.
const (
	EntryMessage    EntryType = "message"
	EntryCompaction EntryType = "compaction"
)

// Entry is one record of a session's history: a message, or a compaction
// that replaced the messages before FirstKeptEntryID in the runtime context.
type Entry struct {
	Type EntryType `json:"type"`
	ID   string    `json:"id"`
	// Timestamp is when the entry was made, in milliseconds since the
	// Unix epoch.
	Timestamp  int64       `json:"timestamp"`
	Message    *Message    `json:"message,omitempty"`
	Compaction *Compaction `json:"compaction,omitempty"`
}

// Compaction is a compaction entry's content.
type Compaction struct {
	Reason CompactionReason `json:"reason"`
	// Summary stands for the messages before FirstKeptEntryID.
	Summary string `json:"summary"`
	// FirstKeptEntryID is the ID of the first message kept as it was.
	FirstKeptEntryID string `json:"firstKeptEntryId"`
	TokensBefore     int    `json:"tokensBefore"`
}

// History is a session's persisted, append-only log. Nothing is ever
// removed from it: a message removed from the runtime context stays here.
// Implementations must be safe for concurrent use.
type History interface {
	// Append adds e at the end. It returns only when e is stored; on an
	// error nothing was added.
	Append(e Entry) error
	// Entries returns a copy of every entry, oldest first.
	Entries() []Entry
}

// MemoryHistory is a History held in memory. The zero value is empty and
// ready to use.
type MemoryHistory struct {
	mu      sync.Mutex
	entries []Entry
}

// Append implements History; it never fails.
func (h *MemoryHistory) Append(e Entry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, e)
	return nil
}

// Entries implements History.
func (h *MemoryHistory) Entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.entries...)
}

// FileHistory is a History stored as JSON lines: one entry per line,
// appended and synced to disk before Append returns. Close it when done.
type FileHistory struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	entries []Entry
}

// ErrCorruptHistory matches the error OpenFileHistory returns for a file
// with a damaged line before its last.
var ErrCorruptHistory = errors.New("session: corrupt history file")

// OpenFileHistory opens (or creates) the history file at path and reads its
// entries. A last line cut short by a crash (no newline at its end, and not
// a whole entry) is dropped, and the file truncated to the lines before it;
// every complete line is kept. A line before the last that is not a valid
// entry is an error naming its line number, and the file is left as it was.
func OpenFileHistory(path string) (*FileHistory, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("session: reading history: %w", err)
	}
	entries, keep, err := parseHistory(path, data)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("session: opening history: %w", err)
	}
	if keep != len(data) {
		if err := repairTail(f, len(data), keep); err != nil {
			f.Close()
			return nil, fmt.Errorf("session: repairing history %s: %w", path, err)
		}
	}
	if _, err := f.Seek(0, 2); err != nil {
		f.Close()
		return nil, fmt.Errorf("session: opening history: %w", err)
	}
	return &FileHistory{path: path, f: f, entries: entries}, nil
}

// parseHistory decodes the lines of data. keep is how many bytes of data
// make whole lines: everything but a cut-short last line (a whole entry
// without its newline is kept, and keep counts a newline for it beyond
// len(data)).
func parseHistory(path string, data []byte) (entries []Entry, keep int, err error) {
	for n, rest := 1, data; len(rest) > 0; n++ {
		line, after, complete := bytes.Cut(rest, []byte("\n"))
		rest = after
		if len(bytes.TrimSpace(line)) == 0 {
			keep += len(line) + 1
			continue
		}
		e, err := decodeEntry(line)
		if !complete {
			if err != nil {
				return entries, keep, nil // cut short by a crash: dropped
			}
			return append(entries, e), keep + len(line) + 1, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w %s: line %d: %v", ErrCorruptHistory, path, n, err)
		}
		entries = append(entries, e)
		keep += len(line) + 1
	}
	return entries, keep, nil
}

// repairTail makes a file of size bytes hold exactly keep bytes of whole
// lines: it drops a cut-short last line, or adds the newline a whole last
// entry lacked (keep = size+1).
func repairTail(f *os.File, size, keep int) error {
	var err error
	if keep > size {
		_, err = f.WriteAt([]byte("\n"), int64(size))
	} else {
		err = f.Truncate(int64(keep))
	}
	if err != nil {
		return err
	}
	return f.Sync()
}

func decodeEntry(line []byte) (Entry, error) {
	var e Entry
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&e); err != nil {
		return Entry{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return Entry{}, errors.New("text after the entry")
	}
	switch {
	case e.Type == EntryMessage && e.Message != nil:
	case e.Type == EntryCompaction && e.Compaction != nil:
	default:
		return Entry{}, fmt.Errorf("not a history entry (type %q)", e.Type)
	}
	return e, nil
}

// Append implements History: the entry is written as one line and synced
// before Append returns.
func (h *FileHistory) Append(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("session: encoding history entry: %w", err)
	}
	line = append(line, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return fmt.Errorf("session: history %s: %w", h.path, os.ErrClosed)
	}
	if _, err := h.f.Write(line); err != nil {
		return fmt.Errorf("session: appending to history %s: %w", h.path, err)
	}
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("session: syncing history %s: %w", h.path, err)
	}
	h.entries = append(h.entries, e)
	return nil
}

// Entries implements History.
func (h *FileHistory) Entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.entries...)
}

// Close closes the file. Appends after Close fail.
func (h *FileHistory) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
