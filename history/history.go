package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentfsm/agentfsm/transcript"
)

// History is a session's persisted, append-only log. Nothing is ever
// removed from it: a message removed from the runtime context stays here.
// Implementations must be safe for concurrent use.
type History interface {
	// Append adds entries at the end, in order. It returns only when they
	// are stored; on an error none of them was added. The session passes
	// every entry one step of it makes in one call. It must not keep the
	// slice once it returns (the session, and other sessions, reuse its
	// array for the entries of later steps); it may keep the entries.
	Append(entries ...transcript.Entry) error
	// Entries returns every entry, oldest first, as a stream read while
	// it is iterated (those appended before the call). A read that fails
	// is yielded as an error, after which the stream ends.
	Entries() iter.Seq2[transcript.Entry, error]
}

// Tailer is a History that can hand a session the part of it that its
// runtime context is made of, without reading the rest: a session started
// on a Tailer replays only Tail's entries.
type Tailer interface {
	History
	// Tail returns the entries from the latest compaction's first kept
	// entry on (all of them when there is no compaction) and how many
	// entries come before them: see policy.Setup.Before.
	Tail() (before int, entries []transcript.Entry, err error)
}

// Load reads h as a session starts on it: its tail when it is a
// Tailer, else every entry. A nil h is ErrNilHistory.
func Load(h History) (before int, entries []transcript.Entry, err error) {
	if h == nil {
		return 0, nil, ErrNilHistory
	}
	if t, ok := h.(Tailer); ok {
		return t.Tail()
	}
	for e, err := range h.Entries() {
		if err != nil {
			return 0, nil, err
		}
		entries = append(entries, e)
	}
	return 0, entries, nil
}

// tailStart is where the tail of entries starts: at the latest
// compaction's first kept entry (the last message entry with that ID
// before it), or at 0 when there is no compaction, or it keeps nothing
// found before it or an earlier compaction's summary.
func tailStart(entries []transcript.Entry) int {
	for c := len(entries) - 1; c >= 0; c-- {
		if entries[c].Type != transcript.EntryCompaction {
			continue
		}
		kept := entries[c].Compaction.FirstKeptEntryID
		for i := c - 1; i >= 0; i-- {
			if entries[i].ID == kept {
				if entries[i].Type == transcript.EntryMessage {
					return i
				}
				if entries[i].Type == transcript.EntryCompaction {
					return 0
				}
			}
		}
		return 0
	}
	return 0
}

// MemoryHistory is a History held in memory. The zero value is empty and
// ready to use; a nil *MemoryHistory fails every Append, Entries and Tail
// with ErrNilHistory.
type MemoryHistory struct {
	mu      sync.Mutex
	entries []transcript.Entry
}

// Append implements History; it fails only for an invalid entry, and then
// adds none.
func (h *MemoryHistory) Append(entries ...transcript.Entry) error {
	if h == nil {
		return ErrNilHistory
	}
	if err := checkEntries(entries); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.entries = append(h.entries, entries...)
	return nil
}

// Entries implements History. It never yields an error, but on a nil
// *MemoryHistory ErrNilHistory.
func (h *MemoryHistory) Entries() iter.Seq2[transcript.Entry, error] {
	if h == nil {
		return func(yield func(transcript.Entry, error) bool) { yield(transcript.Entry{}, ErrNilHistory) }
	}
	h.mu.Lock()
	entries := h.entries // append-only: what it holds now never changes
	h.mu.Unlock()
	return func(yield func(transcript.Entry, error) bool) {
		for _, e := range entries {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// Tail implements Tailer.
func (h *MemoryHistory) Tail() (before int, entries []transcript.Entry, err error) {
	if h == nil {
		return 0, nil, ErrNilHistory
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := tailStart(h.entries)
	return i, slices.Clone(h.entries[i:]), nil
}

// FileHistory is a History stored as JSON lines: one entry per line,
// appended and synced to disk before Append returns. Close it when done.
// A nil *FileHistory fails every Append, Entries and Tail with
// ErrNilHistory, rather than panicking.
//
// It keeps no entry in memory, only where its lines are: the size of the
// file, the number of entries, and where its tail starts (see Tail).
// Entries and Tail read the file as they go.
//
// The file has one writer at a time: OpenFileHistory takes an advisory lock
// on it (flock(2), where the platform has it) that Close releases. Lines are
// appended with O_APPEND, the entries of one Append in one write and one
// sync, every line of it but the last marked "more". An Append that fails,
// at its write or at its sync, truncates the file back to its size before
// the append, so the file is exactly as it was; when even that fails, the
// FileHistory refuses every later Append (each would land after the partial
// line), and reopening the file drops the partial append as a crash's.
//
// A writer that ignores the lock is not stopped, but an Append notices
// what it did: it counts the whole entries that writer added, and refuses
// (with an error naming the file, writing nothing) to land after a line
// left without its newline or that is not an entry, or on a file that
// shrank. Nor does Append write to a file its path no longer names (an
// editor saved the path by renaming a new file over it, or it was
// deleted): what it wrote would be lost.
type FileHistory struct {
	mu   sync.Mutex
	path string
	// abs is path made absolute when the file was opened: what Append
	// checks still names the file.
	abs string
	f   historyFile
	// broken is why the file can no longer be appended to: a failed
	// append that could not be undone.
	broken error
	// size is the size of the file, all whole lines; count the number
	// of entries in it.
	size  int64
	count int
	// tailAt is the offset of the line that Tail starts at, and
	// tailBefore the number of entries before it.
	tailAt     int64
	tailBefore int
	// read counts the bytes read from the file.
	read atomic.Int64
}

// historyFile is what a FileHistory reads and writes: an *os.File, or in
// tests one that fails on demand.
type historyFile interface {
	io.ReaderAt
	Write(p []byte) (int, error)
	Sync() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	Close() error
}

// Errors of OpenFileHistory.
var (
	// ErrCorruptHistory: a line of the file is not a valid entry, and is
	// not what a write cut short leaves (see OpenFileHistory).
	ErrCorruptHistory = errors.New("history: corrupt history file")
	// ErrHistoryLocked: another FileHistory, in this process or another,
	// has the file open.
	ErrHistoryLocked = errors.New("history: history file in use by another writer")
	// ErrNilHistory: a method was called on a nil *FileHistory (such as
	// the result of an OpenFileHistory that failed) or *MemoryHistory, or
	// Load was given a nil History: it appends and reads nothing.
	ErrNilHistory = errors.New("history: nil history (open a FileHistory with OpenFileHistory, or use a new MemoryHistory)")
)

// OpenFileHistory opens (or creates, readable and writable by its owner
// only) the history file at path. Anything but a regular file (a
// directory, a FIFO, a device) is refused without reading it, and so is a
// file another FileHistory has open (ErrHistoryLocked). On Unix, so is a
// file another user owns, whatever its mode: another user of the machine
// could have created it where the session's file was to be (in a shared
// directory such as /tmp) to read the conversation appended to it. A file
// the process's user owns keeps the mode it has.
//
// It reads the file backwards from its end to the latest compaction's
// first kept entry, and no further: what a session started on it replays
// (see Tail). It counts the entries before that from the index the
// compaction's line records, when the line is at the offset it records
// too; a file edited before the line (which moves it), or whose latest
// compaction does not record both (a file without a compaction, one
// written by hand or by an earlier version), is read whole.
//
// Only what a write cut short by a crash leaves is dropped: a last line
// without its newline that is not a complete JSON value, and before it the
// lines of the same append (each marked "more"), down to the last line of
// a whole append; the file is truncated to match. A last line that lost
// only its newline (a whole entry that ends its append, or blank) gets it
// back. Every other line is kept. A line among those read that is not a
// valid entry is an error naming it (ErrCorruptHistory), and the file is
// left as it was: so is a last line without its newline that is a
// complete JSON value but no entry (one of a newer version, or JSON of
// another shape), which a crash cannot leave. A damaged line among those
// not read is reported by Entries when it gets there.
func OpenFileHistory(path string) (*FileHistory, error) {
	f, err := openHistoryFile(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("history: opening history: %w", err)
	}
	h := &FileHistory{path: path, abs: abs, f: f}
	if err := h.load(); err != nil {
		f.Close()
		return nil, err
	}
	return h, nil
}

// openHistoryFile opens path for reading and appending, creating it with
// mode 0600, and checks that it is a regular file of this process's user
// (where files have owners), which it then locks.
func openHistoryFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|openFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("history: opening history: %w", err)
	}
	// The opened file is checked, not the path: the path may name another
	// file by now.
	fi, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("history: opening history: %w", err)
	case !fi.Mode().IsRegular():
		err = fmt.Errorf("history: history %s is not a regular file but %s", path, fileKind(fi.Mode()))
	case foreignOwner(fi) >= 0:
		err = fmt.Errorf("history: history %s belongs to user %d, not to this process's user %d: "+
			"its owner could read the conversation written to it", path, foreignOwner(fi), processUID())
	default:
		err = lockFile(f)
		if errors.Is(err, ErrHistoryLocked) {
			err = fmt.Errorf("%w: %s", ErrHistoryLocked, path)
		} else if err != nil {
			err = fmt.Errorf("history: locking history: %w", err)
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

// load reads the open file backwards, from its last line to its tail's
// first, checking each, then repairs its end: it drops a last line cut
// short and the lines of an append cut short before it, or gives a last
// line that lost only its newline its newline back.
func (h *FileHistory) load() error {
	fi, err := h.f.Stat()
	if err != nil {
		return fmt.Errorf("history: reading history %s: %w", h.path, err)
	}
	size := fi.Size()
	lines := &backLines{r: h.reader(), off: size}
	// The last line, when it has no newline: kept whole, or dropped.
	last, lastAt, err := lines.partial()
	if err != nil {
		return fmt.Errorf("history: reading history %s: %w", h.path, err)
	}
	st := scanState{cut: size, phase: phaseStepEnd}
	if last != nil {
		l, err := decodeLine(last)
		switch {
		case len(bytes.TrimSpace(last)) == 0:
			st.newline = true // unless an append cut short ends before it
		case err == nil && !l.More:
			st.newline, st.phase = true, phaseCompaction
			st.seen++ // counted here; the scan below starts before it
			st.compaction(l, lastAt)
		case err == nil:
			// A whole entry whose append goes on past the end of the
			// file: the append was cut short.
			st.cut = lastAt
		case json.Valid(last):
			// A complete JSON value, not an entry this version knows: not
			// a write cut short, which never ends a value. Refused, as it
			// is when its newline is there.
			return h.corrupt(lastAt, len(last), err)
		default:
			st.cut = lastAt // cut short by a crash
		}
	}
	if err := h.scan(lines, &st); err != nil {
		return err
	}
	switch {
	case st.cut < size:
		h.size = st.cut
		err = repairTail(h.f, func(f historyFile) error { return f.Truncate(st.cut) }, nil)
	case st.newline:
		h.size = size + 1
		err = repairTail(h.f, func(f historyFile) error { _, err := f.Write([]byte("\n")); return err },
			func(f historyFile) error { return f.Truncate(size) })
	default:
		h.size = size
	}
	if err != nil {
		return fmt.Errorf("history: repairing history %s: %w", h.path, err)
	}
	return nil
}

// The phases of reading a file backwards.
const (
	// phaseStepEnd: dropping the lines at the end of the file of an append
	// cut short (each marked More), up to the last line of a whole one.
	phaseStepEnd = iota
	// phaseCompaction: counting entries back to the latest compaction.
	phaseCompaction
	// phaseKept: counting entries back to the latest compaction's first
	// kept entry.
	phaseKept
	// phaseAll: counting every entry, to the start of the file.
	phaseAll
)

// scanState is where reading a file backwards has got to.
type scanState struct {
	phase int
	// cut is where the file is to end: the lines from there on are
	// dropped. newline: its last line gets its newline back instead.
	cut     int64
	newline bool
	// seen counts the entries kept, read from the end.
	seen int
	// kept is the ID of the latest compaction's first kept entry, and
	// atCompaction and compactionIndex the entries seen up to that
	// compaction and the index it records.
	kept                          string
	atCompaction, compactionIndex int
}

// compaction takes note of line l, at offset at, as the latest compaction
// when it is a compaction and none was found yet. Its index is used only
// when the offset recorded with it is where the line is: an edit of the
// file before it (a line deleted, added, or of another length) moves the
// line, and the file is then read whole, so that the count of entries is
// the file's, never the index's alone. A line without both (written by
// hand, or by a version that did not record them) is read whole too.
func (st *scanState) compaction(l fileLine, at int64) {
	if st.phase != phaseCompaction || l.Type != transcript.EntryCompaction {
		return
	}
	st.phase = phaseAll
	if l.Index != nil && l.Offset != nil && *l.Offset == at {
		st.phase, st.kept, st.atCompaction, st.compactionIndex = phaseKept, l.Compaction.FirstKeptEntryID, st.seen, *l.Index
	}
}

// scan reads the complete lines backwards: past those of an append cut
// short at the end, then to the latest compaction's first kept entry, or
// to the start when it cannot tell where that is, and sets the tail and
// the count of entries.
func (h *FileHistory) scan(lines *backLines, st *scanState) error {
	for {
		line, at, err := lines.prev()
		if err != nil {
			return fmt.Errorf("history: reading history %s: %w", h.path, err)
		}
		if line == nil {
			h.tailAt, h.tailBefore, h.count = 0, 0, st.seen
			return nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		l, err := decodeLine(line)
		if err != nil {
			return h.corrupt(at, len(line), err)
		}
		if st.phase == phaseStepEnd {
			if l.More {
				st.cut = at
				continue
			}
			st.phase = phaseCompaction
		}
		st.seen++
		switch {
		case st.phase == phaseCompaction:
			st.compaction(l, at)
		case st.phase == phaseKept && l.ID == st.kept && l.Type == transcript.EntryCompaction:
			st.phase = phaseAll // it keeps an earlier summary: read it all
		case st.phase == phaseKept && l.ID == st.kept && l.Type == transcript.EntryMessage:
			if before := st.compactionIndex - (st.seen - st.atCompaction); before >= 0 {
				h.tailAt, h.tailBefore, h.count = at, before, before+st.seen
				return nil
			}
			st.phase = phaseAll // the position recorded does not add up
		}
	}
}

// corrupt is the error of a file whose line at offset at, n bytes long,
// is not a valid entry (err): it names the first line of the file up to
// that one that is not, counting the lines before it.
func (h *FileHistory) corrupt(at int64, n int, err error) error {
	i := 0
	for line, rerr := range h.lines(0, at+int64(n)) {
		i++
		if rerr != nil {
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if _, lerr := decodeLine(line); lerr != nil {
			return fmt.Errorf("%w %s: line %d: %v", ErrCorruptHistory, h.path, i, lerr)
		}
	}
	return fmt.Errorf("%w %s: the line at byte %d: %v", ErrCorruptHistory, h.path, at, err)
}

// repairTail applies fix to the end of the file and syncs it. When either
// fails and undo is not nil, it undoes the fix, so that a refused file is
// left as it was. (A truncation needs no undo: it changed nothing when it
// failed, and when only its sync failed it dropped what a crash left.)
func repairTail(f historyFile, fix, undo func(historyFile) error) error {
	err := fix(f)
	if err == nil {
		if err = f.Sync(); err == nil {
			return nil
		}
	}
	if undo != nil {
		if uerr := undo(f); uerr != nil {
			return fmt.Errorf("%w; undoing it failed: %w", err, uerr)
		}
	}
	return err
}

// fileLine is an entry as a line of the file. A compaction's line also
// holds its index (the number of entries before it) and its offset (where
// the line starts in the file), so that opening the file can count the
// entries before it without reading them, and tell when the file before it
// was edited. Every line of an append but its last is marked More, so that
// opening the file can drop an append cut short whole.
type fileLine struct {
	transcript.Entry
	Index  *int   `json:"index,omitempty"`
	Offset *int64 `json:"offset,omitempty"`
	More   bool   `json:"more,omitempty"`
}

// decodeLine decodes and checks one line.
func decodeLine(line []byte) (fileLine, error) {
	var l fileLine
	if err := json.Unmarshal(line, &l); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || !json.Valid(line) {
			return fileLine{}, fmt.Errorf("invalid JSON: %v", err)
		}
		return fileLine{}, fmt.Errorf("not an entry: %v", err)
	}
	if err := l.Entry.Validate(); err != nil {
		return fileLine{}, err
	}
	return l, nil
}

// checkEntries is Entry.Validate of each entry, for Append: its error matches
// transcript.ErrInvalidEntry.
func checkEntries(entries []transcript.Entry) error {
	for _, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%w: %v", transcript.ErrInvalidEntry, err)
		}
	}
	return nil
}

// Append implements History: the entries are written as one line each, in
// one write, and synced before Append returns. On an error the file is as
// it was (see FileHistory); an invalid entry (see Entry) is refused with
// transcript.ErrInvalidEntry before anything is written.
func (h *FileHistory) Append(entries ...transcript.Entry) error {
	if h == nil {
		return ErrNilHistory
	}
	if err := checkEntries(entries); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.f == nil:
		return fmt.Errorf("history: history %s: %w", h.path, os.ErrClosed)
	case h.broken != nil:
		return fmt.Errorf("history: history %s refuses appends since one could not be undone (reopen it): %w", h.path, h.broken)
	}
	// The size to go back to is the file's, which is the one kept unless
	// a writer that ignores the lock changed the file.
	fi, err := h.f.Stat()
	if err != nil {
		return fmt.Errorf("history: appending to history %s: %w", h.path, err)
	}
	if err := h.samePath(fi); err != nil {
		return err
	}
	if fi.Size() != h.size {
		if err := h.adopt(fi.Size()); err != nil {
			return err
		}
	}
	lines, err := h.encode(entries)
	if err != nil {
		return err
	}
	if err := h.write(lines); err != nil {
		if undo := h.undo(fi.Size()); undo != nil {
			h.broken = undo
			return fmt.Errorf("history: appending to history %s: %w; undoing the partial append failed: %w", h.path, err, undo)
		}
		return fmt.Errorf("history: appending to history %s: %w", h.path, err)
	}
	h.size += int64(len(lines))
	h.count += len(entries)
	return nil
}

// samePath checks that the file's path still names the open file, whose
// FileInfo is fi: an editor that saved the file by renaming a new one over
// it, or a user who deleted it, left the open file without a name, and
// what was appended to it would be lost.
func (h *FileHistory) samePath(fi os.FileInfo) error {
	pi, err := os.Stat(h.abs)
	switch {
	case err != nil:
		return fmt.Errorf("history: history %s is gone from its path (deleted or moved?): %w", h.path, err)
	case !os.SameFile(fi, pi):
		return fmt.Errorf("history: history %s was replaced by another file under it (another writer?): reopen it", h.path)
	}
	return nil
}

// adopt takes in the lines another writer, one that ignores the lock,
// added since the file was last read or written, so that the count of
// entries (and the index of the next compaction) stays the file's: size
// is the file's size now. It refuses, changing nothing, a file that
// shrank, or whose new bytes are not whole entries, each on a line of its
// own: the next append would land on a line cut short.
func (h *FileHistory) adopt(size int64) error {
	if size < h.size {
		return fmt.Errorf("history: history %s shrank from %d to %d bytes under it (another writer?): reopen it", h.path, h.size, size)
	}
	n := 0
	for line, err := range linesOf(h.f, h.path, h.size, size) {
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if _, err := decodeLine(line); err != nil {
			return fmt.Errorf("%w %s: a line another writer added: %v", ErrCorruptHistory, h.path, err)
		}
		n++
	}
	last := make([]byte, 1)
	if _, err := h.f.ReadAt(last, size-1); err != nil {
		return fmt.Errorf("history: reading history %s: %w", h.path, err)
	}
	if last[0] != '\n' {
		return fmt.Errorf("%w %s: another writer left its last line without a newline", ErrCorruptHistory, h.path)
	}
	h.size, h.count = size, h.count+n
	return nil
}

// encode writes entries as lines, at the end of the file, of h.size bytes:
// each compaction's line with its index and its offset, and every line but
// the last marked More.
func (h *FileHistory) encode(entries []transcript.Entry) ([]byte, error) {
	var buf bytes.Buffer
	// Without HTML escaping: a tool call's arguments are written as they
	// are. The encoder ends each line.
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, e := range entries {
		l := fileLine{Entry: e, More: i < len(entries)-1}
		if e.Type == transcript.EntryCompaction {
			index, offset := h.count+i, h.size+int64(buf.Len())
			l.Index, l.Offset = &index, &offset
		}
		if err := enc.Encode(l); err != nil {
			return nil, fmt.Errorf("history: encoding history entry %q: %w", e.ID, err)
		}
	}
	return buf.Bytes(), nil
}

// write writes lines at the end of the file and syncs them.
func (h *FileHistory) write(lines []byte) error {
	if _, err := h.f.Write(lines); err != nil {
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

// Entries implements History: it reads the file from its start as it is
// iterated, up to its end when called. A line that is not a valid entry
// is yielded as an error naming it (ErrCorruptHistory), and so is a read
// that fails (the history was closed meanwhile).
func (h *FileHistory) Entries() iter.Seq2[transcript.Entry, error] {
	if h == nil {
		return func(yield func(transcript.Entry, error) bool) { yield(transcript.Entry{}, ErrNilHistory) }
	}
	h.mu.Lock()
	end := h.size
	h.mu.Unlock()
	return func(yield func(transcript.Entry, error) bool) {
		n := 0
		for line, err := range h.lines(0, end) {
			n++
			var e transcript.Entry
			if err == nil {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				var l fileLine
				if l, err = decodeLine(line); err != nil {
					err = fmt.Errorf("%w %s: line %d: %v", ErrCorruptHistory, h.path, n, err)
				}
				e = l.Entry
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// Tail implements Tailer: it reads the entries from the latest
// compaction's first kept entry on, as found when the file was opened
// (later compactions leave it where it was: the tail is then longer than
// it need be, and replays the same), and the count of entries before it.
func (h *FileHistory) Tail() (before int, entries []transcript.Entry, err error) {
	if h == nil {
		return 0, nil, ErrNilHistory
	}
	h.mu.Lock()
	at, before, end := h.tailAt, h.tailBefore, h.size
	h.mu.Unlock()
	for line, err := range h.lines(at, end) {
		if err == nil && len(bytes.TrimSpace(line)) > 0 {
			var l fileLine
			if l, err = decodeLine(line); err != nil {
				err = h.corrupt(at, len(line), err)
			}
			entries = append(entries, l.Entry)
		}
		if err != nil {
			return 0, nil, err
		}
		at += int64(len(line)) + 1
	}
	return before, entries, nil
}

// lines yields the lines of the file from offset from to end, without
// their newlines.
func (h *FileHistory) lines(from, end int64) iter.Seq2[[]byte, error] {
	return linesOf(h.reader(), h.path, from, end)
}

// linesOf yields the lines of f, the file at path, from offset from to
// end, without their newlines.
func linesOf(f io.ReaderAt, path string, from, end int64) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		r := bufio.NewReaderSize(io.NewSectionReader(f, from, end-from), 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// A long line: gather the rest of it.
				long := bytes.Clone(line)
				for errors.Is(err, bufio.ErrBufferFull) {
					line, err = r.ReadSlice('\n')
					long = append(long, line...)
				}
				line = long
			}
			switch {
			case err == io.EOF && len(line) == 0:
				return
			case err == io.EOF:
				err = nil // the last line, read up to end
			case err != nil:
				yield(nil, fmt.Errorf("history: reading history %s: %w", path, err))
				return
			}
			if !yield(bytes.TrimSuffix(line, []byte("\n")), nil) {
				return
			}
		}
	}
}

// reader reads the file, counting the bytes read.
func (h *FileHistory) reader() io.ReaderAt { return countingReader{h} }

type countingReader struct{ h *FileHistory }

func (c countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.h.mu.Lock()
	f := c.h.f
	c.h.mu.Unlock()
	if f == nil {
		return 0, os.ErrClosed
	}
	n, err := f.ReadAt(p, off)
	c.h.read.Add(int64(n))
	return n, err
}

// backLines reads the lines of a file backwards, from its end.
type backLines struct {
	r io.ReaderAt
	// off is how many bytes of the file before buf are still to be read;
	// buf holds the bytes from off on not yet returned.
	off int64
	buf []byte
}

// partial returns what follows the file's last newline, and its offset:
// the last line when it has no newline, else nil. It is called first.
func (b *backLines) partial() ([]byte, int64, error) {
	for {
		i := bytes.LastIndexByte(b.buf, '\n')
		if i < 0 && b.off > 0 {
			if err := b.more(); err != nil {
				return nil, 0, err
			}
			continue
		}
		line, at := b.buf[i+1:], b.off+int64(i+1)
		b.buf = b.buf[:i+1]
		if len(line) == 0 {
			return nil, at, nil
		}
		return line, at, nil
	}
}

// prev returns the line before those already returned, without its
// newline, and its offset; nil at the start of the file.
func (b *backLines) prev() ([]byte, int64, error) {
	for {
		if len(b.buf) == 0 {
			if b.off == 0 {
				return nil, 0, nil
			}
			if err := b.more(); err != nil {
				return nil, 0, err
			}
			continue
		}
		end := len(b.buf) - 1 // the newline that ends the line
		i := bytes.LastIndexByte(b.buf[:end], '\n')
		if i < 0 && b.off > 0 {
			if err := b.more(); err != nil {
				return nil, 0, err
			}
			continue
		}
		line, at := b.buf[i+1:end], b.off+int64(i+1)
		b.buf = b.buf[:i+1]
		return line, at, nil
	}
}

// more reads the chunk before buf: as long as buf, and at least 64 KiB.
func (b *backLines) more() error {
	n := min(b.off, int64(max(len(b.buf), 64<<10)))
	chunk := make([]byte, int(n)+len(b.buf))
	if _, err := b.r.ReadAt(chunk[:n], b.off-n); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	copy(chunk[n:], b.buf)
	b.off -= n
	b.buf = chunk
	return nil
}

// Close closes the file and releases it to the next opener. Appends after
// Close fail, and so do reads. Closing a closed or nil FileHistory does
// nothing.
func (h *FileHistory) Close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}
