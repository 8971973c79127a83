package transcript

import (
	"errors"
	"fmt"
)

// EntryType says what a history entry holds.
type EntryType string

// The entry types.
const (
	// EntryMessage: a message added to the runtime context.
	EntryMessage EntryType = "message"
	// EntryCompaction: a compaction that replaced the messages before
	// its FirstKeptEntryID in the runtime context with its summary.
	EntryCompaction EntryType = "compaction"
	// EntryRemoval: the message whose ID is the entry's left the runtime
	// context (removed for a retry, or before an overflow's compaction);
	// history keeps the message itself.
	EntryRemoval EntryType = "removal"
	// EntryRecovery: something the session did to recover from a failed
	// call (its Recovery says what); it changes nothing in the runtime
	// context, and a session replaying history passes over it.
	EntryRecovery EntryType = "recovery"
)

// Entry is one record of a session's history: a message, a compaction, a
// removal, or a recovery. Replayed in order, a session's entries give its
// runtime context (see session.WithHistory); recoveries tell why.
//
// A valid entry has a non-empty ID and the content of its type, and only
// that: a message entry its Message (whose ID is the entry's, and whose
// blocks are of known types, a tool call's arguments a JSON object), a
// compaction entry its Compaction, a removal entry nothing (its ID is the
// removed message's), a recovery entry its Recovery with a Kind (its ID is
// the message it is about). The session gives every message an ID that no
// message of the runtime context has, so that a removal or a first kept
// entry names one message; the IDs it makes itself (user-N, msg-N,
// compaction-N) no other entry of the history has.
type Entry struct {
	Type EntryType `json:"type"`
	ID   string    `json:"id"`
	// Timestamp is when the entry was made, in milliseconds since the
	// Unix epoch.
	Timestamp  int64       `json:"timestamp"`
	Message    *Message    `json:"message,omitempty"`
	Compaction *Compaction `json:"compaction,omitempty"`
	Recovery   *Recovery   `json:"recovery,omitempty"`
}

// Validate checks that e is an entry of a known type with its content, and
// only its content.
func (e Entry) Validate() error {
	if e.ID == "" {
		return fmt.Errorf("a %s entry without an id", e.Type)
	}
	switch e.Type {
	case EntryMessage:
		switch {
		case e.Message == nil || e.Compaction != nil || e.Recovery != nil:
			return errors.New("a message entry needs a message and nothing else")
		case e.Message.ID != e.ID:
			return fmt.Errorf("message entry %q holds message %q", e.ID, e.Message.ID)
		}
		if err := e.Message.checkContent(); err != nil {
			return fmt.Errorf("message entry %q: %v", e.ID, err)
		}
	case EntryCompaction:
		if e.Compaction == nil || e.Message != nil || e.Recovery != nil {
			return errors.New("a compaction entry needs a compaction and nothing else")
		}
		for i, t := range e.Compaction.Truncated {
			if t.EntryID == "" || t.KeptChars < 0 {
				return fmt.Errorf("compaction entry %q: truncated[%d] needs an entry ID and a count of bytes kept of 0 or more (got %q, %d)", e.ID, i, t.EntryID, t.KeptChars)
			}
		}
	case EntryRemoval:
		if e.Message != nil || e.Compaction != nil || e.Recovery != nil {
			return errors.New("a removal entry holds nothing but the removed message's id")
		}
	case EntryRecovery:
		switch {
		case e.Recovery == nil || e.Message != nil || e.Compaction != nil:
			return errors.New("a recovery entry needs a recovery and nothing else")
		case e.Recovery.Kind == "":
			return fmt.Errorf("recovery entry %q has no kind", e.ID)
		}
	default:
		return fmt.Errorf("not a history entry (type %q)", e.Type)
	}
	return nil
}

// ErrInvalidEntry matches the error of a history entry that is not valid
// (see Entry): Append refuses it, and a session refuses a history that
// holds one.
var ErrInvalidEntry = errors.New("transcript: invalid history entry")
