package transcript

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
}

// RoleSummary is the role of the message a compaction puts first in the
// runtime context: the summary of what it cut. An Agent sends it to the
// model as it sees fit (typically as a user message).
const RoleSummary Role = "compactionSummary"
