package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
)

// CompactionReason says why a compaction ran.
type CompactionReason string

// The reasons.
const (
	// ReasonOverflow: the context overflowed; a continuation follows.
	ReasonOverflow CompactionReason = "overflow"
	// ReasonThreshold: the context passed the compaction threshold.
	ReasonThreshold CompactionReason = "threshold"
	// ReasonManual: Compact was called.
	ReasonManual CompactionReason = "manual"
)

// CompactionResult is what a successful compaction produced.
type CompactionResult struct {
	// Summary stands for the messages that were cut.
	Summary string `json:"summary"`
	// FirstKeptEntryID is the ID of the first message kept as it was.
	FirstKeptEntryID string `json:"firstKeptEntryId"`
	// TokensBefore is the context size the last non-error assistant
	// message reported before the compaction.
	TokensBefore int `json:"tokensBefore"`
	// Details is what the summarizer chose to add; it may be nil.
	Details any `json:"details,omitempty"`
}

// RoleSummary is the role of the message a compaction puts first in the
// runtime context: the summary of what it cut. An Agent sends it to the
// model as it sees fit (typically as a user message).
const RoleSummary Role = "compactionSummary"

// Summarizer condenses the messages a compaction cuts. It must honour ctx:
// AbortCompaction and Abort cancel it.
type Summarizer interface {
	Summarize(ctx context.Context, req SummaryRequest) (Summary, error)
}

// SummaryRequest is what a Summarizer is given.
type SummaryRequest struct {
	// Messages are the messages being cut, oldest first. When an earlier
	// compaction's summary is among them it comes first, with RoleSummary.
	Messages []Message
	// Kept are the messages that stay as they are after the summary.
	Kept []Message
	// Reason is why the compaction runs.
	Reason CompactionReason
	// Instructions are the caller's, for a manual compaction.
	Instructions string
}

// Summary is a Summarizer's answer.
type Summary struct {
	Text    string
	Details any
}

// Compaction errors.
var (
	// ErrNothingToCompact: everything fits in the recent messages kept.
	ErrNothingToCompact = errors.New("session: nothing to compact")
	// ErrAlreadyCompacted: nothing was added since the last compaction.
	ErrAlreadyCompacted = errors.New("session: already compacted")
	// ErrCompactionCancelled: AbortCompaction or Abort stopped it.
	ErrCompactionCancelled = errors.New("session: compaction cancelled")
)

// DigestSummarizer is the summarizer the library ships: deterministic, with
// no model. It lists what the cut messages did, one line each, keeping the
// start of every user message, the start of every assistant reply, each
// tool call's result in brief and each error, up to MaxLineChars characters
// a line; an earlier summary is carried over at the top. The same messages
// always give the same summary.
type DigestSummarizer struct {
	// MaxLineChars bounds one line of the digest; 0 means 200.
	MaxLineChars int
}

// Summarize implements Summarizer.
func (d DigestSummarizer) Summarize(ctx context.Context, req SummaryRequest) (Summary, error) {
	if err := ctx.Err(); err != nil {
		return Summary{}, context.Cause(ctx)
	}
	limit := d.MaxLineChars
	if limit <= 0 {
		limit = 200
	}
	var b strings.Builder
	counts := map[Role]int{}
	for _, m := range req.Messages {
		counts[m.Role]++
	}
	fmt.Fprintf(&b, "Summary of %d earlier messages (%d from the user, %d from the assistant, %d tool results).\n",
		len(req.Messages), counts[RoleUser], counts[RoleAssistant], counts[RoleToolResult])
	if req.Instructions != "" {
		fmt.Fprintf(&b, "Focus: %s\n", clip(req.Instructions, limit))
	}
	for _, m := range req.Messages {
		switch {
		case m.Role == RoleSummary:
			fmt.Fprintf(&b, "Earlier: %s\n", strings.ReplaceAll(strings.TrimSpace(m.Text), "\n", "\n  "))
		case m.Role == RoleUser:
			fmt.Fprintf(&b, "- user: %s\n", clip(m.Text, limit))
		case m.Role == RoleToolResult:
			fmt.Fprintf(&b, "- tool result: %s\n", clip(m.Text, limit))
		case m.IsError():
			fmt.Fprintf(&b, "- error: %s\n", clip(m.ErrorMessage, limit))
		default:
			fmt.Fprintf(&b, "- assistant (%s): %s\n", m.StopReason, clip(m.Text, limit))
		}
	}
	return Summary{Text: strings.TrimRight(b.String(), "\n")}, nil
}

// clip returns s on one line, cut to at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// imageChars is how many characters an image counts as when estimating
// tokens.
const imageChars = 4800

// estimateTokens is a message's size estimate: ceil(chars/4), an image
// counting imageChars characters.
func estimateTokens(m Message) int {
	chars := len(m.Text) + len(m.ErrorMessage) + m.Images*imageChars
	return (chars + 3) / 4
}

// cutPoint chooses where a compaction cuts msgs (policy §4.4): walking back
// from the newest message, adding estimates until keepRecent tokens are
// reached, then forward to the first valid cut point (a user or assistant
// message, never a tool result, which stays with the call that asked for
// it). It returns the index of the first kept message, and ok = false when
// there is nothing to compact: everything fits, or no cut point leaves
// anything before it.
func cutPoint(msgs []Message, keepRecent int) (int, bool) {
	total := 0
	start := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		total += estimateTokens(msgs[i])
		if total >= keepRecent {
			start = i
			break
		}
	}
	if start < 0 {
		return 0, false
	}
	for i := start; i < len(msgs); i++ {
		if msgs[i].Role == RoleUser || msgs[i].Role == RoleAssistant {
			if i == 0 || (i == 1 && msgs[0].Role == RoleSummary) {
				return 0, false
			}
			return i, true
		}
	}
	return 0, false
}

// contextTokens is the context size an assistant message's usage reports:
// totalTokens, or when that is 0 the sum of its parts. A negative count
// counts as 0, and the sum saturates at math.MaxInt instead of wrapping.
func contextTokens(u *Usage) int {
	if u == nil {
		return 0
	}
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	sum := 0
	for _, n := range [...]int{u.Input, u.Output, u.CacheRead, u.CacheWrite} {
		sum += min(max(n, 0), math.MaxInt-sum)
	}
	return sum
}

// tokensBefore is the context size of the last non-error assistant
// message's usage in msgs.
func tokensBefore(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.Role == RoleAssistant && !m.IsError() && m.Usage != nil {
			return contextTokens(m.Usage)
		}
	}
	return 0
}
