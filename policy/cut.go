package policy

import "math"

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

// cutPoint chooses where a compaction cuts msgs (docs/policy.md §4.4): walking back
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
