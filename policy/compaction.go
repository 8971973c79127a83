package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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
	// MaxChars is the longest summary the session keeps, in characters as
	// its token estimate counts them (bytes of UTF-8): a quarter of the
	// compaction threshold, or less when Kept leaves less room under it.
	// The session cuts a longer summary to its last MaxChars characters.
	// 0 means no limit: the model's context window is unknown.
	MaxChars int
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
// a line. The lines of an earlier summary among the cut messages are
// carried over before them, as they were. The same messages always give
// the same summary.
//
// A digest is at most MaxChars characters long. To fit, it drops its
// oldest lines first (those carried over come before its own), and says
// after its first line how many lines it and the digests before it have
// dropped: "[12 earlier lines dropped]". Only when even its first lines
// do not fit is it cut short.
type DigestSummarizer struct {
	// MaxLineChars bounds one line of the digest; 0 means 200.
	MaxLineChars int
	// MaxChars bounds the whole digest, in characters as the token
	// estimate counts them (bytes of UTF-8); 0 means DefaultDigestChars.
	// A request's smaller MaxChars wins.
	MaxChars int
}

// DefaultDigestChars is the default bound of a digest: 20,000 characters,
// about 5,000 tokens.
const DefaultDigestChars = 20_000

// Summarize implements Summarizer.
func (d DigestSummarizer) Summarize(ctx context.Context, req SummaryRequest) (Summary, error) {
	if err := ctx.Err(); err != nil {
		return Summary{}, context.Cause(ctx)
	}
	limit := d.MaxLineChars
	if limit <= 0 {
		limit = 200
	}
	maxChars := d.MaxChars
	if maxChars <= 0 {
		maxChars = DefaultDigestChars
	}
	if req.MaxChars > 0 {
		maxChars = min(maxChars, req.MaxChars)
	}
	counts := map[Role]int{}
	for _, m := range req.Messages {
		counts[m.Role]++
	}
	head := []string{fmt.Sprintf("Summary of %d earlier messages (%d from the user, %d from the assistant, %d tool results).",
		len(req.Messages), counts[RoleUser], counts[RoleAssistant], counts[RoleToolResult])}
	if req.Instructions != "" {
		head = append(head, "Focus: "+clip(req.Instructions, limit))
	}
	var body []string
	dropped := 0
	for _, m := range req.Messages {
		switch {
		case m.Role == RoleSummary:
			lines, n := carriedLines(m.Text)
			body = append(body, lines...)
			dropped += n
		case m.Role == RoleUser:
			body = append(body, "- user: "+clip(m.Text, limit))
		case m.Role == RoleToolResult:
			body = append(body, "- tool result: "+clip(m.Text, limit))
		case m.IsError():
			body = append(body, "- error: "+clip(m.ErrorMessage, limit))
		default:
			body = append(body, fmt.Sprintf("- assistant (%s): %s", m.StopReason, clip(m.Text, limit)))
		}
	}
	return Summary{Text: fitDigest(head, body, dropped, maxChars)}, nil
}

// carriedLines returns the lines of an earlier summary to carry over, and
// how many lines the digests before it dropped. A digest's own first lines
// (its counts, its focus, its note of dropped lines) are not carried over.
func carriedLines(summary string) (lines []string, dropped int) {
	digest := false
	for i, line := range strings.Split(strings.TrimSpace(summary), "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			continue
		}
		if i == 0 && strings.HasPrefix(line, "Summary of ") {
			digest = true
			continue
		}
		if digest && len(lines) == 0 {
			if strings.HasPrefix(line, "Focus: ") {
				continue
			}
			if n, ok := droppedNote(line); ok {
				dropped += n
				continue
			}
		}
		lines = append(lines, line)
	}
	return lines, dropped
}

// droppedNote reads a digest's note of dropped lines.
func droppedNote(line string) (int, bool) {
	rest, ok := strings.CutPrefix(line, "[")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, " earlier lines dropped]")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

// fitDigest joins head, a note of the dropped lines when there are any,
// and body, dropping the oldest lines of body until it fits in maxChars;
// when even head does not fit, it cuts the text short.
func fitDigest(head, body []string, dropped, maxChars int) string {
	size := len(strings.Join(head, "\n"))
	for _, line := range body {
		size += 1 + len(line)
	}
	note := func() string { return "[" + strconv.Itoa(dropped) + " earlier lines dropped]" }
	first := 0
	for first < len(body) {
		total := size
		if dropped > 0 {
			total += 1 + len(note())
		}
		if total <= maxChars {
			break
		}
		size -= 1 + len(body[first])
		first++
		dropped++
	}
	lines := head
	if dropped > 0 {
		lines = append(lines, note())
	}
	return cutChars(strings.Join(append(lines, body[first:]...), "\n"), maxChars)
}

// cutChars cuts s to at most n bytes, on a rune boundary.
func cutChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// capSummary cuts a summary longer than maxChars bytes to its end, after a
// first line that says so; the end of a summary is usually its most recent
// part.
func capSummary(summary string, maxChars int) string {
	if len(summary) <= maxChars {
		return summary
	}
	const note = "[the start of this summary was cut]\n"
	keep := maxChars - len(note)
	if keep <= 0 {
		return cutChars(summary, maxChars)
	}
	tail := summary[len(summary)-keep:]
	for tail != "" && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return note + tail
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

// EstimateTokens is the size of msgs in tokens as compaction estimates it:
// ceil(chars/4) a message, an image counting 4,800 characters, saturating
// instead of overflowing.
func EstimateTokens(msgs ...Message) int {
	n := 0
	for _, m := range msgs {
		n += min(estimateTokens(m), math.MaxInt-n)
	}
	return n
}

// estimateTokens is a message's size estimate: ceil(chars/4), an image
// counting imageChars characters.
func estimateTokens(m Message) int {
	chars := len(m.Text) + len(m.ErrorMessage)
	if m.Images > 0 {
		chars += min(m.Images, (math.MaxInt-chars)/imageChars) * imageChars
	}
	return chars/4 + min(chars%4, 1)
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
		total += min(estimateTokens(msgs[i]), math.MaxInt-total)
		if total >= keepRecent {
			start = i
			break
		}
	}
	if start < 0 {
		return 0, false
	}
	i, ok := nextCutPoint(msgs, start)
	if !ok || i == 0 || (i == 1 && msgs[0].Role == RoleSummary) {
		return 0, false
	}
	return i, true
}

// nextCutPoint returns the first valid cut point of msgs at or after from.
func nextCutPoint(msgs []Message, from int) (int, bool) {
	for i := from; i < len(msgs); i++ {
		if msgs[i].Role == RoleUser || msgs[i].Role == RoleAssistant {
			return i, true
		}
	}
	return 0, false
}

// deeperCut moves the cut at forward, from one valid cut point to the
// next, until the messages kept are estimated at limit tokens or fewer, or
// no later cut point is left.
func deeperCut(msgs []Message, at, limit int) int {
	kept := 0
	for _, m := range msgs[at:] {
		kept += estimateTokens(m)
	}
	for kept > limit {
		next, ok := nextCutPoint(msgs, at+1)
		if !ok {
			break
		}
		for _, m := range msgs[at:next] {
			kept -= estimateTokens(m)
		}
		at = next
	}
	return at
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
