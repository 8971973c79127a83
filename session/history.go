package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

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

// Append implements History; it fails only for an invalid entry.
func (h *MemoryHistory) Append(e Entry) error {
	if err := checkEntry(e); err != nil {
		return err
	}
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
//
// The file has one writer at a time: OpenFileHistory takes an advisory lock
// on it (flock(2), where the platform has it) that Close releases. Lines are
// appended with O_APPEND. An Append that fails, at its write or at its sync,
// truncates the file back to its size before the append, so the file is
// exactly as it was; when even that fails, the FileHistory refuses every
// later Append (each would land after the partial line), and reopening the
// file drops the partial line as a crash's.
type FileHistory struct {
	mu   sync.Mutex
	path string
	f    historyFile
	// broken is why the file can no longer be appended to: a failed
	// append that could not be undone.
	broken  error
	entries []Entry
}

// historyFile is what a FileHistory writes to: an *os.File, or in tests
// one that fails on demand.
type historyFile interface {
	Write(p []byte) (int, error)
	Sync() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	Close() error
}

// Errors of OpenFileHistory.
var (
	// ErrCorruptHistory: a line before the file's last is not a valid
	// entry.
	ErrCorruptHistory = errors.New("session: corrupt history file")
	// ErrHistoryLocked: another FileHistory, in this process or another,
	// has the file open.
	ErrHistoryLocked = errors.New("session: history file in use by another writer")
)

// OpenFileHistory opens (or creates, readable and writable by its owner
// only) the history file at path and reads its entries. Anything but a
// regular file (a directory, a FIFO, a device) is refused without reading
// it, and so is a file another FileHistory has open (ErrHistoryLocked).
//
// A last line cut short by a crash (no newline at its end, and not a whole
// entry) is dropped, and the file truncated to the lines before it; a last
// line that lost only its newline (a whole entry, or blank) gets it back.
// Every complete line is kept. A line before the last that is not a valid entry is an error
// naming its line number (ErrCorruptHistory), and the file is left as it
// was.
func OpenFileHistory(path string) (*FileHistory, error) {
	f, err := openHistoryFile(path)
	if err != nil {
		return nil, err
	}
	entries, err := readHistory(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &FileHistory{path: path, f: f, entries: entries}, nil
}

// openHistoryFile opens path for reading and appending, creating it with
// mode 0600, and checks that it is a regular file, which it then locks.
func openHistoryFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|openFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session: opening history: %w", err)
	}
	// The opened file is checked, not the path: the path may name another
	// file by now.
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("session: opening history: %w", err)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("session: history %s is not a regular file but %s", path, fileKind(fi.Mode()))
	default:
		err = lockFile(f)
		if errors.Is(err, ErrHistoryLocked) {
			err = fmt.Errorf("%w: %s", ErrHistoryLocked, path)
		} else if err != nil {
			err = fmt.Errorf("session: locking history: %w", err)
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fileKind describes what a file that is not a regular file is.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return fmt.Sprintf("of type %v", m.Type())
}

// readHistory reads and parses the open file f, and repairs its tail.
func readHistory(path string, f *os.File) ([]Entry, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("session: reading history %s: %w", path, err)
	}
	entries, keep, err := parseHistory(path, data)
	if err != nil {
		return nil, err
	}
	if keep != len(data) {
		if err := repairTail(f, len(data), keep); err != nil {
			return nil, fmt.Errorf("session: repairing history %s: %w", path, err)
		}
	}
	return entries, nil
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
// entry lacked (keep = size+1; the file is opened for appending).
func repairTail(f *os.File, size, keep int) error {
	var err error
	if keep > size {
		_, err = f.Write([]byte("\n"))
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
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if err := e.Validate(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// checkEntry is Entry.Validate for Append: its error matches ErrInvalidEntry.
func checkEntry(e Entry) error {
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEntry, err)
	}
	return nil
}

// Append implements History: the entry is written as one line and synced
// before Append returns. On an error the file is as it was (see
// FileHistory); an invalid entry (see Entry) is refused with
// ErrInvalidEntry before anything is written.
func (h *FileHistory) Append(e Entry) error {
	if err := checkEntry(e); err != nil {
		return err
	}
	// Without HTML escaping: a tool call's arguments are written as they
	// are. The encoder ends the line.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return fmt.Errorf("session: encoding history entry: %w", err)
	}
	line := buf.Bytes()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.f == nil:
		return fmt.Errorf("session: history %s: %w", h.path, os.ErrClosed)
	case h.broken != nil:
		return fmt.Errorf("session: history %s refuses appends since one could not be undone (reopen it): %w", h.path, h.broken)
	}
	fi, err := h.f.Stat()
	if err != nil {
		return fmt.Errorf("session: appending to history %s: %w", h.path, err)
	}
	if err := h.write(line); err != nil {
		if undo := h.undo(fi.Size()); undo != nil {
			h.broken = undo
			return fmt.Errorf("session: appending to history %s: %w; undoing the partial append failed: %w", h.path, err, undo)
		}
		return fmt.Errorf("session: appending to history %s: %w", h.path, err)
	}
	h.entries = append(h.entries, e)
	return nil
}

// write writes line at the end of the file and syncs it.
func (h *FileHistory) write(line []byte) error {
	if _, err := h.f.Write(line); err != nil {
		return err
	}
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("syncing: %w", err)
	}
	return nil
}

// undo truncates the file back to size, its size before a failed append.
func (h *FileHistory) undo(size int64) error {
	if err := h.f.Truncate(size); err != nil {
		return err
	}
	return h.f.Sync()
}

// Entries implements History.
func (h *FileHistory) Entries() []Entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Entry(nil), h.entries...)
}

// Close closes the file and releases it to the next opener. Appends after
// Close fail.
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
