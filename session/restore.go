package session

import (
	"fmt"
	"strconv"
	"strings"
)

// restore rebuilds the runtime context from history by replaying, entry
// by entry, what the session that wrote it did to its runtime context: a
// message entry appends the message; a removal entry removes the message
// it names (the last with that ID, as removeMessage does); a compaction
// entry puts its summary in place of everything before its first kept
// entry (the first message with that ID, as applyCompaction finds it). The
// session records each of these changes as it makes it, in order, so the
// rebuilt context is the one the session had when it last wrote to the
// history, a settled error included.
//
// A history written before removal entries existed has none: the messages
// its sessions removed for a retry or an overflow come back as if never
// removed.
//
// restore also notes every entry's position (for the stale rule and
// ErrAlreadyCompacted) and sets the ID counter after the highest number
// ending an ID of the history (see newID). It fails on an invalid entry.
func (s *Session) restore() error {
	l := &s.loop
	l.seq = map[string]int{}
	var msgs []Message
	for i, e := range s.history.Entries() {
		if err := validEntry(e); err != nil {
			return fmt.Errorf("%w %d: %v", ErrInvalidEntry, i+1, err)
		}
		l.nextSeq++
		l.ids = max(l.ids, idNumber(e.ID))
		switch e.Type {
		case EntryMessage:
			l.seq[e.ID] = l.nextSeq
			msgs = append(msgs, *e.Message)
		case EntryRemoval:
			msgs, _ = withoutMessage(msgs, e.ID)
		case EntryCompaction:
			l.seq[e.ID] = l.nextSeq
			l.compactionSeq = l.nextSeq
			msgs = compacted(msgs, e)
		}
	}
	l.runtime = msgs
	return nil
}

// withoutMessage returns msgs without the last message with this ID, in a
// new array (msgs is left as it was), and whether there was one.
func withoutMessage(msgs []Message, id string) ([]Message, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].ID == id {
			return append(msgs[:i:i], msgs[i+1:]...), true
		}
	}
	return msgs, false
}

// compacted is msgs after the compaction e: its summary, then the messages
// from the first with its first kept entry's ID on (none when no message
// has that ID).
func compacted(msgs []Message, e Entry) []Message {
	out := []Message{summaryMessage(e)}
	for i, m := range msgs {
		if m.ID == e.Compaction.FirstKeptEntryID {
			return append(out, msgs[i:]...)
		}
	}
	return out
}

// maxIDNumber bounds the numbers idNumber reads: the ID counter starts
// below it, so it never wraps.
const maxIDNumber = 1 << 53

// idNumber is the number that ends id after a dash ("user-12": 12), or 0
// when it has none (or one above maxIDNumber).
func idNumber(id string) int {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 || n > maxIDNumber {
		return 0
	}
	return n
}

// taken reports whether an entry of the history has this ID.
func (s *Session) taken(id string) bool {
	_, ok := s.loop.seq[id]
	return ok
}

// identify gives m, a message an agent just ended, an ID no entry of the
// history has, so that finding a message by ID (to remove it, or to cut a
// compaction at it) finds this one only. An empty ID gets a new one, and
// so does one already taken (an agent that numbers its messages from 1
// again in each process, or reuses an ID); a tool result whose ToolCallID
// names a replaced ID points at the replacement.
func (s *Session) identify(m *Message) {
	l := &s.loop
	if to, ok := l.renamed[m.ToolCallID]; ok {
		m.ToolCallID = to
	}
	if m.ID != "" && !s.taken(m.ID) {
		return
	}
	id := s.newID("msg")
	if m.ID != "" {
		if l.renamed == nil {
			l.renamed = map[string]string{}
		}
		l.renamed[m.ID] = id
	}
	m.ID = id
}

// recordRemoval adds to history that the message with this ID left the
// runtime context. A failure is logged and fails the turn in flight.
func (s *Session) recordRemoval(id string) {
	if err := s.record(Entry{Type: EntryRemoval, ID: id, Timestamp: nowMs()}); err != nil {
		s.logger.Error("session: history append failed", "error", err)
		s.failTurn(err)
	}
}
