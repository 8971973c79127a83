package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/internal/wiretext"
	"github.com/agentfsm/agentfsm/transcript"
)

// runtimeContext is the runtime context (the messages the next model call
// sees) with what the engine knows of history: the position of each of
// those messages in it, for the stale rule, the position of the latest
// compaction and the count of entries, for ErrAlreadyCompacted and
// snapshots, and the ID counter.
//
// What it holds is bounded by the runtime context, never by the length of
// the history: after a compaction it holds only what was kept.
//
// Runs and compactions are handed the context itself, not a copy (see
// share): the messages handed out are frozen, and a change that would
// write over one of them (a removal before the end of what was handed out)
// first moves the context to a new array. Adding a message, removing the
// last one and applying a compaction never copy what they do not change.
type runtimeContext struct {
	msgs []transcript.Message
	// outgrown is the array a run's message outgrew (see keepOutgrown),
	// holding msgs but its last message, unchanged; nil once anything
	// else changed the context, and once the run has returned.
	outgrown []transcript.Message
	// frozen is how many messages at the start of msgs were handed out:
	// they must never change in place.
	frozen int32
	// appendedN is the number of entries of the last Append, undone when
	// the driver reports that the append failed (the entries themselves
	// are the Engine's entries, kept for it while they hold a message).
	// Both counts are int32, side by side, to keep the Engine in its size
	// class (a context of 2^31 messages would not fit in memory).
	appendedN int32
	// seq maps the ID of each message of msgs to its position in history
	// (0 for one whose entry failed to append). It is nil while the
	// context is short (shortContext messages or fewer) and no compaction
	// was recorded: until the first compaction a message's position
	// decides nothing (Stale compares it with the latest compaction's,
	// which every message before it precedes), and finding an ID among
	// a few messages costs less than a map, which a session that waits
	// out a backoff would keep. Once made it holds 0 for the messages
	// that were in the context then, as old as they must be.
	seq map[string]int
	// lastSeq is the position of the last message of msgs while the map
	// does not hold it, else -1 (or anything, while there is no map): a
	// push enters the message before it into the map, so that removing
	// the last message (a failed answer, before its retry) leaves the map
	// as it is. IDs are unique in the context (identify), so the last
	// message's ID is in the map only for it.
	lastSeq       int
	nextSeq       int
	compactionSeq int
	// ids numbers new IDs: it is at least the number ending any ID of
	// history the engine saw (see newID).
	ids int
	// last is the size of the latest compaction applied to the context,
	// nil before any.
	last *compactionSize
	// est is sizes.Tokens(msgs...), kept as msgs change, so that a
	// calibration costs nothing like the context's size.
	est int
}

// compactionSize is what a compaction did to the context's size.
type compactionSize struct {
	reason        transcript.CompactionReason
	before, after int
	truncated     []transcript.Truncation
}

// replay rebuilds the runtime context from history by doing, entry by
// entry, what the session that wrote it did: a message entry appends the
// message; a removal entry removes the message it names (the last with that
// ID); a compaction entry puts its summary in place of everything before
// its first kept entry (the first message with that ID). The session
// records each change as it makes it, in order, so the rebuilt context is
// the one it had when it last wrote, a settled error included.
//
// before is how many entries of history precede entries: 0 when entries
// are the whole history, else entries start at the latest compaction's
// first kept entry (see Setup.Before). The entries before cannot change
// the context the latest compaction left; and a compaction among entries
// whose first kept entry is not among them (it came before) keeps every
// message replayed so far.
//
// A history written before removal entries existed has none: the messages
// its sessions removed for a retry or an overflow come back as if never
// removed.
//
// The ID counter starts after the highest number ending an ID of entries
// (see newID). An invalid entry is an error.
func (c *runtimeContext) replay(before int, entries []transcript.Entry) error {
	c.nextSeq = before
	var seen map[string]bool // the IDs of the messages replayed, for a tail
	if before > 0 {
		seen = map[string]bool{}
	}
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("%w %d: %v", transcript.ErrInvalidEntry, before+i+1, err)
		}
		c.nextSeq++
		c.ids = max(c.ids, idNumber(e.ID))
		switch e.Type {
		case transcript.EntryMessage:
			c.push(*e.Message, c.nextSeq)
			if seen != nil {
				seen[e.ID] = true
			}
		case transcript.EntryRemoval:
			c.remove(e.ID)
		case transcript.EntryRecovery:
			// What the session did to recover changes no context.
		case transcript.EntryCompaction:
			c.compactionSeq = c.nextSeq
			if seen != nil && !seen[e.Compaction.FirstKeptEntryID] {
				// Its first kept entry precedes the tail: it keeps all of it.
				c.compact(e, 0)
				continue
			}
			c.compact(e, -1)
		}
	}
	return nil
}

// shortContext is the longest context the engine keeps no position map
// for before a compaction (see runtimeContext.seq).
const shortContext = 8

// push adds m, recorded at position pos, at the end of the context.
func (c *runtimeContext) push(m transcript.Message, pos int) {
	if c.seq != nil && c.lastSeq >= 0 {
		c.seq[c.msgs[len(c.msgs)-1].ID] = c.lastSeq
	}
	c.msgs, c.outgrown = append(c.msgs, m), nil
	c.est += sizes.Message(m)
	if c.seq != nil {
		c.lastSeq = pos
	} else if len(c.msgs) > shortContext {
		c.index()
	}
}

// position returns the position in history of the message of the context
// with this ID, 0 for none.
func (c *runtimeContext) position(id string) int {
	if c.lastSeq >= 0 && c.seq != nil && c.msgs[len(c.msgs)-1].ID == id {
		return c.lastSeq
	}
	return c.seq[id]
}

// setPosition sets the position of the message of the context with this
// ID, which the map holds or is the last.
func (c *runtimeContext) setPosition(id string, pos int) {
	if c.lastSeq >= 0 && c.msgs[len(c.msgs)-1].ID == id {
		c.lastSeq = pos
		return
	}
	c.seq[id] = pos
}

// index makes the position map, every message of the context at 0: the
// context has seen no compaction (else the map would be made), so
// each precedes any compaction to come, as 0 does.
func (c *runtimeContext) index() {
	c.seq = make(map[string]int, len(c.msgs))
	c.lastSeq = -1
	for _, m := range c.msgs {
		c.seq[m.ID] = 0
	}
}

// keepOutgrown notes that the push of a run's message moved the context
// from the array prev, all of which was handed out (to the run: it stays
// in memory while the run lasts, and the engine lets go of it when the
// run returns): a removal of that message while nothing else
// changed goes back to prev instead of keeping a larger array's empty
// room (a session that waits out a backoff after its run's only answer
// failed keeps the prompt's array, not one grown for the answer).
func (c *runtimeContext) keepOutgrown(prev []transcript.Message) {
	if len(prev) > 0 && int(c.frozen) == len(prev) && len(prev) == cap(prev) && len(prev) == len(c.msgs)-1 {
		c.outgrown = prev
	}
}

// remove removes the last message with this ID from the context, and
// reports whether there was one. The message removed is usually the last,
// which costs nothing like the context's size; one among the messages
// handed out moves the context to a new array first.
func (c *runtimeContext) remove(id string) bool {
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if c.msgs[i].ID != id {
			continue
		}
		c.est -= sizes.Message(c.msgs[i])
		if c.seq != nil {
			if i == len(c.msgs)-1 && c.lastSeq >= 0 {
				// The last was not in the map; the one before it is.
				c.lastSeq = -1
			} else {
				delete(c.seq, id)
			}
		}
		if prev := c.outgrown; prev != nil && i == len(prev) && i == len(c.msgs)-1 {
			// The push this removal undoes outgrew prev, which holds the
			// rest unchanged; what of it was handed out stays frozen.
			c.msgs, c.outgrown, c.frozen = prev, nil, min(c.frozen, int32(i))
			return true
		}
		c.outgrown = nil
		if i < int(c.frozen) {
			c.msgs, c.frozen = slices.Clone(c.msgs), 0
		}
		c.msgs = slices.Delete(c.msgs, i, i+1)
		return true
	}
	return false
}

// compact applies the compaction e: its summary, then the messages from
// the first with its first kept entry's ID on (none when no message has
// that ID), or from index from when from is not negative, the tool results
// it truncated truncated. The context moves to a new array holding only
// those.
func (c *runtimeContext) compact(e transcript.Entry, from int) {
	if from < 0 {
		from = len(c.msgs)
		for i, m := range c.msgs {
			if m.ID == e.Compaction.FirstKeptEntryID {
				from = i
				break
			}
		}
	}
	if c.seq == nil {
		c.index()
	}
	if c.lastSeq >= 0 {
		// Every message in the map, so that the ones dropped leave it.
		c.seq[c.msgs[len(c.msgs)-1].ID] = c.lastSeq
		c.lastSeq = -1
	}
	for _, m := range c.msgs[:from] {
		delete(c.seq, m.ID)
	}
	out := make([]transcript.Message, 0, 1+len(c.msgs)-from+8)
	out = append(append(out, summaryMessage(e)), c.msgs[from:]...)
	applyTruncations(out[1:], e.Compaction.Truncated)
	c.msgs, c.frozen, c.outgrown = out, 0, nil
	c.est = sizes.Tokens(out...)
	c.seq[e.ID] = c.compactionSeq
	cp := e.Compaction
	// Its own copy of the list: the entry goes to history and its result
	// to the caller and the subscribers, who may change theirs.
	c.last = &compactionSize{reason: cp.Reason, before: cp.TokensBefore, after: cp.TokensAfter, truncated: slices.Clone(cp.Truncated)}
}

// share returns msgs[from:to] to hand to a run or a summarizer: the
// context's own array, capped at to so that appending to it copies, and
// frozen, so the engine never changes it in place.
func (c *runtimeContext) share(from, to int) []transcript.Message {
	c.frozen = max(c.frozen, int32(to))
	return c.msgs[from:to:to]
}

func summaryMessage(e transcript.Entry) transcript.Message {
	return transcript.Message{ID: e.ID, Role: transcript.RoleSummary, Content: transcript.TextContent(e.Compaction.Summary), Timestamp: e.Timestamp}
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
	// What follows the last dash holds no dash: Atoi reads no sign but
	// '+', and no negative number.
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n > maxIDNumber {
		return 0
	}
	return n
}

// taken reports whether a message of the runtime context has this ID.
func (c *runtimeContext) taken(id string) bool {
	if c.seq == nil {
		for i := range c.msgs {
			if c.msgs[i].ID == id {
				return true
			}
		}
		return false
	}
	if c.lastSeq >= 0 && c.msgs[len(c.msgs)-1].ID == id {
		return true
	}
	_, ok := c.seq[id]
	return ok
}

// sessionKinds are the kinds of the IDs newID makes.
var sessionKinds = [...]string{"user", "msg", "compaction"}

// counted reports whether id has the form of an ID newID made or may have
// made: one of its kinds, a dash and a number the counter has passed.
func (c *runtimeContext) counted(id string) bool {
	n := idNumber(id)
	if n == 0 || n > c.ids {
		return false
	}
	kind := id[:strings.LastIndexByte(id, '-')]
	return slices.Contains(sessionKinds[:], kind)
}

// newID returns a new ID, kind-N, that no entry of the history has. N
// counts on from the highest number ending an ID the engine has seen (in
// the history it started on, and in every entry it recorded since), so
// IDs are unique across every session that wrote the history and read in
// the order they were made. A counter rather than random IDs: a history
// has one writer at a time, and a counter keeps IDs short, ordered and the
// same from one run to the next.
//
// An engine started on the tail of a history (Setup.Before) has not seen
// the IDs before it; the latest compaction's ID, which is in the tail, is
// numbered after them when the session that wrote it counted this way.
func (c *runtimeContext) newID(kind string) string {
	var buf [32]byte // kind, a dash and the number: one allocation, the ID's
	for {
		c.ids++
		b := strconv.AppendInt(append(append(buf[:0], kind...), '-'), int64(c.ids), 10)
		if !c.taken(string(b)) { // the lookup does not copy b
			return string(b)
		}
	}
}

// identify gives m, a message an agent just ended, an ID that no message
// of the runtime context has, so that finding a message by ID (to remove
// it, or to cut a compaction at it) finds this one only, now and when a
// history is replayed. An empty ID gets a new one, and so does one already
// taken (an agent that numbers its messages from 1 again in each process,
// or reuses an ID) and one of the form of the session's own IDs that the
// counter has passed, so that those stay unique across the whole history.
// Content is never changed: a tool result's ToolCallID names a tool call
// block, not a message.
func (c *runtimeContext) identify(m *transcript.Message) {
	// An ID that is not valid UTF-8 would be written to history as
	// another one (invalid bytes become U+FFFD), which may be taken.
	if m.ID != "" && utf8.ValidString(m.ID) && !c.taken(m.ID) && !c.counted(m.ID) {
		return
	}
	m.ID = c.newID("msg")
}

// record notes the position of an entry to append to history. The entries
// an input records go to the driver in one Append, its last effect, so that
// a history writes (and syncs) them at once.
func (e *Engine) record(en transcript.Entry) int {
	c := &e.ctx
	c.nextSeq++
	c.appendedN++
	c.ids = max(c.ids, idNumber(en.ID))
	switch en.Type {
	case transcript.EntryCompaction:
		c.compactionSeq = c.nextSeq
		if c.seq == nil {
			// From now on positions decide Stale.
			c.index()
		}
	}
	sc := e.work()
	sc.entries = append(sc.entries, en)
	return c.nextSeq
}

// recordMessage adds m to the runtime context and to history. The entry
// holds m itself: m must not change afterwards.
func (e *Engine) recordMessage(m *transcript.Message) {
	e.ctx.push(*m, e.record(transcript.Entry{Type: transcript.EntryMessage, ID: m.ID, Timestamp: m.Timestamp, Message: m}))
}

// removeMessage removes the message with this ID from the runtime context,
// and nothing else. History keeps the message, and records the removal so
// that a session reopened on it rebuilds the same context.
func (e *Engine) removeMessage(at time.Time, id string) {
	if e.ctx.remove(id) {
		e.record(transcript.Entry{Type: transcript.EntryRemoval, ID: id, Timestamp: at.UnixMilli()})
	}
}

// lastAssistant is the last assistant message of the runtime context, in
// place: the context is frozen through it (share), so that no change to
// the context writes over what the decision reads.
func (e *Engine) lastAssistant() *transcript.Message {
	msgs := e.ctx.msgs
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == transcript.RoleAssistant {
			e.ctx.share(i, i+1)
			return &msgs[i]
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
	err = wiretext.Error(err) // a history's error may name a file
	if err != nil {
		// What the last input appended, which begin clears: the
		// entries the driver has not released yet.
		c := &e.ctx
		var appended []transcript.Entry
		if e.sc != nil {
			appended = e.sc.entries
		}
		for _, en := range appended {
			if en.Type == transcript.EntryMessage && c.seq != nil && c.taken(en.ID) {
				c.setPosition(en.ID, 0) // in no history: as old as can be
			}
		}
		c.nextSeq -= int(c.appendedN)
		if cp := e.comp; cp != nil && cp.committing {
			c.compactionSeq = cp.previousSeq
		}
	}
	e.begin()
	if cp := e.comp; cp != nil && cp.committing {
		e.committed(at, err)
	} else if err != nil {
		e.failTurn(fmt.Errorf("%w: %w", ErrHistory, err))
	}
	return e.end(at)
}
