package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// runtimeContext is the runtime context (the messages the next model call
// sees) and what the engine knows of history: every entry's position, for
// the stale rule and ErrAlreadyCompacted, and the IDs taken.
type runtimeContext struct {
	msgs []Message
	// seq maps each message and compaction ID of history to its position.
	seq           map[string]int
	nextSeq       int
	compactionSeq int
	// ids numbers new IDs.
	ids int
	// appended are the IDs of the last Append's entries and appendedN
	// their number, forgotten again when the driver reports the append
	// failed.
	appended  []string
	appendedN int
}

// replay rebuilds the runtime context from history by doing, entry by
// entry, what the session that wrote it did: a message entry appends the
// message; a removal entry removes the message it names (the last with that
// ID); a compaction entry puts its summary in place of everything before
// its first kept entry (the first message with that ID). The session
// records each change as it makes it, in order, so the rebuilt context is
// the one it had when it last wrote, a settled error included.
//
// A history written before removal entries existed has none: the messages
// its sessions removed for a retry or an overflow come back as if never
// removed.
//
// The ID counter starts after the highest number ending an ID of the
// history (see newID). An invalid entry is an error.
func (c *runtimeContext) replay(entries []Entry) error {
	c.seq = map[string]int{}
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%w %d: %v", ErrInvalidEntry, i+1, err)
		}
		c.nextSeq++
		c.ids = max(c.ids, idNumber(e.ID))
		switch e.Type {
		case EntryMessage:
			c.seq[e.ID] = c.nextSeq
			c.msgs = append(c.msgs, *e.Message)
		case EntryRemoval:
			c.msgs, _ = withoutMessage(c.msgs, e.ID)
		case EntryCompaction:
			c.seq[e.ID] = c.nextSeq
			c.compactionSeq = c.nextSeq
			c.msgs = afterCompaction(c.msgs, e)
		}
	}
	return nil
}

// withoutMessage removes from msgs, in place, the last message with this
// ID, and reports whether there was one. The message removed is usually
// the last, so this costs nothing like the context's size.
func withoutMessage(msgs []Message, id string) ([]Message, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].ID == id {
			return slices.Delete(msgs, i, i+1), true
		}
	}
	return msgs, false
}

// afterCompaction is msgs after the compaction e: its summary, then the messages
// from the first with its first kept entry's ID on (none when no message
// has that ID).
func afterCompaction(msgs []Message, e Entry) []Message {
	out := []Message{summaryMessage(e)}
	for i, m := range msgs {
		if m.ID == e.Compaction.FirstKeptEntryID {
			return append(out, msgs[i:]...)
		}
	}
	return out
}

func summaryMessage(e Entry) Message {
	return Message{ID: e.ID, Role: RoleSummary, Content: TextContent(e.Compaction.Summary), Timestamp: e.Timestamp}
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
func (c *runtimeContext) taken(id string) bool {
	_, ok := c.seq[id]
	return ok
}

// newID returns a new ID, kind-N, that no entry of the history has. N
// counts on from the highest number ending an ID of the history the engine
// started on, skipping any ID already taken, so IDs are unique across
// every session that wrote the history and read in the order they were
// made. A counter rather than random IDs: a history has one writer at a
// time, so the history read at the start holds every ID used before, and a
// counter keeps IDs short, ordered and the same from one run to the next.
func (c *runtimeContext) newID(kind string) string {
	for {
		c.ids++
		if id := kind + "-" + strconv.Itoa(c.ids); !c.taken(id) {
			return id
		}
	}
}

// identify gives m, a message an agent just ended, an ID no entry of the
// history has, so that finding a message by ID (to remove it, or to cut a
// compaction at it) finds this one only. An empty ID gets a new one, and
// so does one already taken (an agent that numbers its messages from 1
// again in each process, or reuses an ID). Content is never changed: a
// tool result's ToolCallID names a tool call block, not a message.
func (c *runtimeContext) identify(m *Message) {
	// An ID that is not valid UTF-8 would be written to history as
	// another one (invalid bytes become U+FFFD), which may be taken.
	if m.ID != "" && utf8.ValidString(m.ID) && !c.taken(m.ID) {
		return
	}
	m.ID = c.newID("msg")
}

// record notes the position of an entry to append to history. The entries
// an input records go to the driver in one Append, its last effect, so that
// a history writes (and syncs) them at once.
func (e *Engine) record(en Entry) {
	c := &e.ctx
	c.nextSeq++
	c.appendedN++
	switch en.Type {
	case EntryCompaction:
		c.compactionSeq = c.nextSeq
		fallthrough
	case EntryMessage:
		c.seq[en.ID] = c.nextSeq
		c.appended = append(c.appended, en.ID)
	}
	e.entries = append(e.entries, en)
}

// recordMessage adds m to the runtime context and to history.
func (e *Engine) recordMessage(m Message) {
	e.ctx.msgs = append(e.ctx.msgs, m)
	e.record(Entry{Type: EntryMessage, ID: m.ID, Timestamp: m.Timestamp, Message: &m})
}

// removeMessage removes the message with this ID from the runtime context,
// and nothing else. History keeps the message, and records the removal so
// that a session reopened on it rebuilds the same context.
func (e *Engine) removeMessage(at time.Time, id string) {
	if rest, ok := withoutMessage(e.ctx.msgs, id); ok {
		e.ctx.msgs = rest
		e.record(Entry{Type: EntryRemoval, ID: id, Timestamp: at.UnixMilli()})
	}
}

// lastAssistant is the last assistant message of the runtime context.
func (e *Engine) lastAssistant() *Message {
	msgs := e.ctx.msgs
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleAssistant {
			m := msgs[i]
			return &m
		}
	}
	return nil
}

// Appended is the driver's report of an Append: err is why it failed (then
// nothing of it was added), nil that it succeeded, which the driver reports
// only for an Append that awaits it. A failed append fails the turn in
// flight; the entries stay in the runtime context (the history is then
// behind it, and a session reopened on it does not see them). A compaction
// whose entry failed to append fails, and changes nothing.
func (e *Engine) Appended(at time.Time, err error) []Effect {
	e.begin()
	if err != nil {
		c := &e.ctx
		for _, id := range c.appended {
			delete(c.seq, id)
		}
		c.nextSeq -= c.appendedN
		c.appended, c.appendedN = c.appended[:0], 0
		if cp := e.comp; cp != nil && cp.committing {
			c.compactionSeq = cp.previousSeq
		}
	}
	if cp := e.comp; cp != nil && cp.committing {
		e.committed(at, err)
	} else if err != nil {
		e.failTurn(fmt.Errorf("%w: %w", ErrHistory, err))
	}
	return e.end(at)
}
