package transcript

import (
	"strconv"
	"unicode/utf8"
)

// CompactionReason says why a compaction ran.
type CompactionReason string

// The reasons.
const (
	// ReasonOverflow: the context overflowed; a continuation follows.
	ReasonOverflow CompactionReason = "overflow"
	// ReasonThreshold: the context passed the compaction threshold.
	ReasonThreshold CompactionReason = "threshold"
	// ReasonManual: a compaction was asked for (session.Session.Compact).
	ReasonManual CompactionReason = "manual"
)

// Compaction is what a compaction produced: a summary that stands for the
// messages before FirstKeptEntryID in the runtime context. It is what
// a compaction returns (policy.Engine, session.Session.Compact), the Result
// of an events.AutoCompactionEnd event, and the content of the compaction's
// history entry, all one value.
type Compaction struct {
	Reason CompactionReason `json:"reason"`
	// Summary stands for the messages that were cut.
	Summary string `json:"summary"`
	// FirstKeptEntryID is the ID of the first message kept as it was.
	FirstKeptEntryID string `json:"firstKeptEntryId"`
	// TokensBefore is the size of the runtime context before the
	// compaction, in tokens by the session's calibrated count: its chars/4
	// estimate times the ratio the provider's latest count gave, at least
	// the count an overflow's error text gave for the context it
	// compacts, and at least the usage the last non-error assistant
	// message reported, which is all a history written before calibration
	// holds.
	TokensBefore int `json:"tokensBefore"`
	// TokensAfter is the size of the runtime context the compaction left
	// (its summary and the messages kept), counted as TokensBefore is. 0
	// in a history written before it was recorded.
	TokensAfter int `json:"tokensAfter,omitempty"`
	// Details is what the summarizer chose to add (Summary.Details); it may
	// be nil. A history that stores entries as JSON stores it as JSON: it
	// reads back as encoding/json decodes into an any, and a compaction
	// whose Details JSON cannot encode fails when its entry is written.
	Details any `json:"details,omitempty"`
	// Truncated are the tool results kept truncated: when the messages
	// kept, cut as deep as a compaction may, still took more than the
	// room left for them, their largest tool results were cut down (see
	// TruncateToolResult), each with the number of its text's bytes kept.
	// The history keeps them whole; the runtime context holds them
	// truncated from this compaction on. Empty in most compactions, and in
	// a history written before it was recorded.
	Truncated []Truncation `json:"truncated,omitempty"`
}

// Truncation is a tool result a compaction kept truncated: its entry's ID
// and how many bytes of its text it keeps (see TruncateToolResult).
type Truncation struct {
	EntryID   string `json:"entryId"`
	KeptChars int    `json:"keptChars"`
}

// TruncateToolResult is the tool result m as a compaction keeps it when it
// alone takes more room than there is: one text block, the start of its
// text (at most keep bytes, on a rune boundary, keep less than 0 counting
// as 0), then a marker on a line of its own saying how much was cut:
//
//	[... 48213 more characters of this tool result truncated by compaction: it was too large to keep whole]
//
// counting characters (runes), with ", and 2 images" (", and 1 image")
// before " of" when it had images, which are dropped. Every other field of m stays. A text
// no longer than keep, without images, is returned as it is.
func TruncateToolResult(m Message, keep int) Message {
	text := m.Text()
	images := 0
	for _, b := range m.Content {
		if b.Type == BlockImage {
			images++
		}
	}
	keep = max(keep, 0)
	if len(text) <= keep && images == 0 {
		return m
	}
	cut := min(keep, len(text))
	for cut > 0 && cut < len(text) && !utf8.RuneStart(text[cut]) {
		cut--
	}
	what := strconv.Itoa(utf8.RuneCountInString(text[cut:])) + " more characters"
	if images > 0 {
		what += ", and " + strconv.Itoa(images) + " image"
		if images > 1 {
			what += "s"
		}
	}
	m.Content = TextContent(text[:cut] + "\n\n[... " + what + " of this tool result truncated by compaction: it was too large to keep whole]")
	return m
}

// RoleSummary is the role of the message a compaction puts first in the
// runtime context: the summary of what it cut. An Agent sends it to the
// model as it sees fit (typically as a user message).
const RoleSummary Role = "compactionSummary"
