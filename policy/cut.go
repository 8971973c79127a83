package policy

import (
	_ "image/gif"  // an image's dimensions, for its token cost
	_ "image/jpeg" // an image's dimensions, for its token cost
	_ "image/png"  // an image's dimensions, for its token cost
	"math"
	"slices"
	"sort"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
)

// cutPoint chooses where a compaction cuts msgs (docs/policy.md §4.4): walking back
// from the newest message, adding calibrated estimates until keepRecent tokens are
// reached, then forward to the first valid cut point (see cutPoints). It
// returns the index of the first kept message, and ok = false when there
// is nothing to compact: everything fits, or no cut point leaves anything
// before it. It knows no window: with the model's window unknown (0) it is
// the whole cut, as there is no threshold, no budget, no fit to test and
// no too_large (see Engine.window), only the keepRecentTokens target.
func cutPoint(msgs []transcript.Message, keepRecent int, c calibration) (int, bool) {
	total := 0
	start := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		total += min(c.tokens(sizes.Message(msgs[i])), math.MaxInt-total)
		if total >= keepRecent {
			start = i
			break
		}
	}
	if start < 0 {
		return 0, false
	}
	i, ok := nextCutPoint(msgs, start)
	if !ok || i == 0 || (i == 1 && msgs[0].Role == transcript.RoleSummary) {
		return 0, false
	}
	return i, true
}

// cutPoints reports, for each index of msgs, whether a compaction may cut
// there: the message is a user or assistant message (never a tool
// result), and no tool result at or after it answers a tool call before
// it, so a tool call and its result are kept or summarized together. A
// tool result answers the last tool call block before it with its
// ToolCallID; failing that, as in histories written before content
// blocks, the last assistant message before it with that ID.
func cutPoints(msgs []transcript.Message) []bool {
	ok := make([]bool, len(msgs))
	// blocked[i] > 0: a call before i is answered at or after i.
	blocked := make([]int, len(msgs)+1)
	calls, senders := map[string]int{}, map[string]int{}
	for i, m := range msgs {
		ok[i] = m.Role == transcript.RoleUser || m.Role == transcript.RoleAssistant
		switch m.Role {
		case transcript.RoleAssistant:
			senders[m.ID] = i
			for _, b := range m.Content {
				if b.Type == transcript.BlockToolCall {
					calls[b.ID] = i
				}
			}
		case transcript.RoleToolResult:
			at, found := calls[m.ToolCallID]
			if !found {
				at, found = senders[m.ToolCallID]
			}
			if found {
				blocked[at+1]++
				blocked[i+1]--
			}
		}
	}
	open := 0
	for i := range msgs {
		open += blocked[i]
		ok[i] = ok[i] && open == 0
	}
	return ok
}

// nextCutPoint returns the first valid cut point of msgs at or after from.
func nextCutPoint(msgs []transcript.Message, from int) (int, bool) {
	return nextValid(cutPoints(msgs), from)
}

// nextValid returns the first index at or after from that valid marks.
func nextValid(valid []bool, from int) (int, bool) {
	for i := max(from, 0); i < len(valid); i++ {
		if valid[i] {
			return i, true
		}
	}
	return 0, false
}

// deeperCut moves the cut at forward, from one valid cut point to the
// next, until the messages kept are, calibrated by c, limit tokens or
// fewer, or no later cut point is left.
func deeperCut(msgs []transcript.Message, at, limit int, c calibration) int {
	valid := cutPoints(msgs)
	kept := sizes.Tokens(msgs[at:]...)
	for c.tokens(kept) > limit {
		next, ok := nextValid(valid, at+1)
		if !ok {
			break
		}
		for _, m := range msgs[at:next] {
			kept -= sizes.Message(m)
		}
		at = next
	}
	return at
}

// contextTokens is the context size an assistant message's usage reports:
// totalTokens, or when that is 0 the sum of its parts. A negative count
// counts as 0, and the sum saturates at math.MaxInt instead of wrapping.
func contextTokens(u *transcript.Usage) int {
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
// message's usage in msgs: a compaction's TokensBefore is at least that.
func tokensBefore(msgs []transcript.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.Role == transcript.RoleAssistant && !m.IsError() && m.Usage != nil {
			return contextTokens(m.Usage)
		}
	}
	return 0
}

// truncateToFit returns msgs with their tool results truncated
// (transcript.TruncateToolResult), the largest first, each keeping as much
// of its text as lets msgs take, sized by c, limit tokens or fewer (less
// up to maxMarkerChars, the room a marker may take), until they do or
// every tool result is down to its marker; and the truncations
// made, in that order. msgs itself is not changed; with nothing to
// truncate it is returned as it is.
func (e *Engine) truncateToFit(msgs []transcript.Message, limit int, c calibration) ([]transcript.Message, []transcript.Truncation) {
	total := sizes.Tokens(msgs...)
	if c.tokens(total) <= limit {
		return msgs, nil
	}
	var results []int
	for i, m := range msgs {
		if m.Role == transcript.RoleToolResult {
			results = append(results, i)
		}
	}
	sort.SliceStable(results, func(a, b int) bool { return sizes.Message(msgs[results[a]]) > sizes.Message(msgs[results[b]]) })
	var out []transcript.Message
	var cuts []transcript.Truncation
	for _, i := range results {
		if c.tokens(total) <= limit {
			break
		}
		m := msgs[i]
		others := total - sizes.Message(m)
		fits := func(keep int) bool {
			return c.tokens(others+sizes.Message(transcript.TruncateToolResult(m, keep))) <= limit
		}
		// The most bytes kept that fit: 0 when even the marker alone does
		// not (the next result is cut too). First a guess made in one
		// pass, from the room left and the longest marker; a binary
		// search only when it does not fit.
		keep := c.estimateRoom(limit) - others
		keep = 4*keep - maxMarkerChars - len(m.ErrorMessage)
		if keep < 0 || !fits(keep) {
			keep = sort.Search(len(m.Text())+1, func(k int) bool { return !fits(k) }) - 1
		}
		if keep < 0 || !fits(keep) {
			keep = 0
		}
		t := transcript.TruncateToolResult(m, keep)
		if sizes.Message(t) >= sizes.Message(m) {
			continue // the marker takes as much room as what it cuts
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i] = t
		total = others + sizes.Message(t)
		cuts = append(cuts, transcript.Truncation{EntryID: m.ID, KeptChars: keep})
	}
	if out == nil {
		return msgs, nil
	}
	return out, cuts
}

// maxMarkerChars is room enough for the marker of
// transcript.TruncateToolResult, whatever the counts it gives.
const maxMarkerChars = 160

// applyTruncations truncates, in msgs, the tool results cuts name, as the
// compaction that made them did.
func applyTruncations(msgs []transcript.Message, cuts []transcript.Truncation) {
	if len(cuts) == 0 {
		return
	}
	keep := make(map[string]int, len(cuts))
	for _, t := range cuts {
		keep[t.EntryID] = t.KeptChars
	}
	for i, m := range msgs {
		if k, ok := keep[m.ID]; ok && m.Role == transcript.RoleToolResult {
			msgs[i] = transcript.TruncateToolResult(m, k)
		}
	}
}
