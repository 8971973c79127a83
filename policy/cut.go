package policy

import (
	"encoding/base64"
	"image"
	_ "image/gif"  // an image's dimensions, for its token cost
	_ "image/jpeg" // an image's dimensions, for its token cost
	_ "image/png"  // an image's dimensions, for its token cost
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/agentfsm/agentfsm/transcript"
)

// An image counts at what the provider charges for it, not at the length
// of its base64 data. Anthropic's figure is (width × height) / 750 tokens,
// the image first scaled down to fit 1,568 pixels on its long edge, and at
// most about 1,600 tokens (an image is scaled down to about 1.15
// megapixels); OpenAI's (85 + 170 a 512-pixel tile, high detail) is no
// higher. So an image whose dimensions its data gives (PNG, GIF or JPEG)
// counts as ceil(width × height / 750) tokens after that scaling, at most
// maxImageTokens, and one whose dimensions are unknown (no data, or another
// format) counts maxImageTokens: the provider's most, so an estimate never
// falls short for an image. The estimate counts an image as 4 characters a
// token, so the session's calibration ratio applies to it as to the rest.
const (
	maxImageTokens = 1600
	maxImageEdge   = 1568
)

// imageTokens is what an image block counts, in tokens (see
// maxImageTokens).
func imageTokens(b transcript.Block) int {
	if b.Data == "" {
		return maxImageTokens
	}
	// DecodeConfig reads only the header it needs of the decoded data.
	cfg, _, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(b.Data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return maxImageTokens
	}
	w, h := float64(cfg.Width), float64(cfg.Height)
	if long := max(w, h); long > maxImageEdge {
		w, h = w*maxImageEdge/long, h*maxImageEdge/long
	}
	return min(int(math.Ceil(w*h/750)), maxImageTokens)
}

// EstimateTokens is the size of msgs in tokens as compaction estimates it:
// ceil(chars/4) a message, counting every block (see estimateTokens),
// saturating instead of overflowing.
func EstimateTokens(msgs ...transcript.Message) int {
	n := 0
	for _, m := range msgs {
		n += min(estimateTokens(m), math.MaxInt-n)
	}
	return n
}

// estimateTokens is a message's size estimate: ceil(chars/4), counting the
// characters (bytes of UTF-8) of its text, its thinking, each tool call's
// name and arguments, its error message, and 4 characters a token of an
// image's cost (see imageTokens). Signatures are not counted, nor is an
// image's base64 data.
func estimateTokens(m transcript.Message) int {
	chars := len(m.ErrorMessage)
	add := func(n int) { chars += min(n, math.MaxInt-chars) }
	for _, b := range m.Content {
		switch b.Type {
		case transcript.BlockText:
			add(len(b.Text))
		case transcript.BlockThinking:
			add(len(b.Thinking))
		case transcript.BlockToolCall:
			add(len(b.Name))
			add(len(b.Arguments))
		case transcript.BlockImage:
			add(4 * imageTokens(b))
		}
	}
	return chars/4 + min(chars%4, 1)
}

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
		total += min(c.tokens(estimateTokens(msgs[i])), math.MaxInt-total)
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
	kept := EstimateTokens(msgs[at:]...)
	for c.tokens(kept) > limit {
		next, ok := nextValid(valid, at+1)
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
	total := EstimateTokens(msgs...)
	if c.tokens(total) <= limit {
		return msgs, nil
	}
	var results []int
	for i, m := range msgs {
		if m.Role == transcript.RoleToolResult {
			results = append(results, i)
		}
	}
	sort.SliceStable(results, func(a, b int) bool { return estimateTokens(msgs[results[a]]) > estimateTokens(msgs[results[b]]) })
	var out []transcript.Message
	var cuts []transcript.Truncation
	for _, i := range results {
		if c.tokens(total) <= limit {
			break
		}
		m := msgs[i]
		others := total - estimateTokens(m)
		fits := func(keep int) bool {
			return c.tokens(others+estimateTokens(transcript.TruncateToolResult(m, keep))) <= limit
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
		if estimateTokens(t) >= estimateTokens(m) {
			continue // the marker takes as much room as what it cuts
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i] = t
		total = others + estimateTokens(t)
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
