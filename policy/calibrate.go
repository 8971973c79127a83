package policy

import (
	"fmt"
	"math"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/transcript"
)

// The bounds of a session's token ratio (see calibration): a count that
// says a message's characters are more than maxTokenRatio tokens for every
// estimated one, or fewer than minTokenRatio, is taken as the bound, so
// that one garbage count can neither shrink every estimate to nothing nor
// blow it up past any window. docs/session.md states them.
const (
	minTokenRatio = 0.25
	maxTokenRatio = 16.0
	// minCalibrationTokens is the smallest estimate a count calibrates:
	// the provider counts the system prompt and the tool definitions too,
	// which outweigh a short context's messages, so a count of one says
	// little about how the messages themselves count.
	minCalibrationTokens = 1024
)

// calibration is a session's token ratio: how many tokens the provider
// counts for each token the chars/4 estimate (EstimateTokens) gives. 0 is
// no count yet, which reads as 1. Every count the provider gives sets it,
// the latest winning: the usage of each call against the estimate of the
// messages it covered, and the size an overflow's error text gives against
// the estimate of the request that overflowed.
type calibration float64

// ratio is the ratio as a number: 1 before any count.
func (c calibration) ratio() float64 {
	if c == 0 {
		return 1
	}
	return float64(c)
}

// tokens is the calibrated size of messages estimated at est tokens:
// ceil(est × ratio), saturating at math.MaxInt.
func (c calibration) tokens(est int) int {
	if est <= 0 {
		return 0
	}
	t := math.Ceil(float64(est) * c.ratio())
	if t >= math.MaxInt/2 {
		return math.MaxInt / 2 // an estimate is never that large; no sum of two wraps
	}
	return int(t)
}

// estimateRoom is the largest estimate whose calibrated size is at most
// budget tokens, 0 when there is none.
func (c calibration) estimateRoom(budget int) int {
	if budget <= 0 {
		return 0
	}
	est := int(float64(budget) / c.ratio())
	for est > 0 && c.tokens(est) > budget {
		est--
	}
	return est
}

// chars is the longest text, in characters as estimated (bytes), whose
// calibrated size is at most budget tokens: 4 × floor(budget / ratio).
func (c calibration) chars(budget int) int {
	if budget <= 0 {
		return 0
	}
	return 4 * int(float64(budget)/c.ratio())
}

// sample returns the calibration a count of tokens for messages estimated
// at est tokens gives: tokens / est within the bounds, or c unchanged when
// tokens is no count (0 or less) or est is under minCalibrationTokens.
func (c calibration) sample(tokens, est int) calibration {
	if tokens <= 0 || est < minCalibrationTokens {
		return c
	}
	return calibration(min(max(float64(tokens)/float64(est), minTokenRatio), maxTokenRatio))
}

// validRatio reports whether r is a ratio a calibration may hold: 0 (no
// count yet) or a number within the bounds.
func validRatio(r float64) bool {
	return r == 0 || (r >= minTokenRatio && r <= maxTokenRatio)
}

// calibrateUsage takes the usage of assistant message m, the last of the
// runtime context, as a count of the whole context: the call read
// everything before m (input, cache read and cache write) and wrote m
// (output).
func (e *Engine) calibrateUsage(m *transcript.Message) {
	if m.IsError() {
		return
	}
	e.calib = e.calib.sample(contextTokens(m.Usage), e.ctx.est)
}

// calibrateOverflow takes the size an overflow's error text gives as a
// count of the request that overflowed: the runtime context before m, the
// overflow's message.
func (e *Engine) calibrateOverflow(m *transcript.Message, v classify.Result) {
	if v.Class != classify.Overflow || v.PromptTokens <= 0 {
		return
	}
	est := e.ctx.est
	if len(e.contextWithout(m)) < len(e.ctx.msgs) {
		est -= estimateTokens(*m)
	}
	e.calib = e.calib.sample(v.PromptTokens, est)
}

// contextWithout is the runtime context without its last message when that
// is m: the request that m answered.
func (e *Engine) contextWithout(m *transcript.Message) []transcript.Message {
	msgs := e.ctx.msgs
	if n := len(msgs); n > 0 && msgs[n-1].ID == m.ID {
		return msgs[:n-1]
	}
	return msgs
}

// calibrateReplay sets the calibration from a replayed context: the usage
// of its last assistant message that has one, against the estimate of the
// context up to it.
func (c *runtimeContext) calibrated() calibration {
	for i := len(c.msgs) - 1; i >= 0; i-- {
		if m := c.msgs[i]; m.Role == transcript.RoleAssistant && !m.IsError() && contextTokens(m.Usage) > 0 {
			return calibration(0).sample(contextTokens(m.Usage), EstimateTokens(c.msgs[:i+1]...))
		}
	}
	return 0
}

// tooLargeError is why an overflow is not compacted: the messages a
// compaction must keep whatever it cuts (the last user message and the
// tool results it needs) are Tokens tokens by the session's calibrated
// count, which leaves no room under the model's Window less its Reserve
// (reserveTokens) for a summary. No continuation could fit. The turn
// fails with ErrOverflow and this reason: "the last message alone is N
// tokens, over the model's window of W" (and "less its reserve of R" when
// reserveTokens is not 0).
type tooLargeError struct {
	Tokens, Window, Reserve int
}

func (e *tooLargeError) Error() string {
	if e.Reserve > 0 {
		return fmt.Sprintf("the last message alone is %d tokens, over the model's window of %d less its reserve of %d", e.Tokens, e.Window, e.Reserve)
	}
	return fmt.Sprintf("the last message alone is %d tokens, over the model's window of %d", e.Tokens, e.Window)
}

// window is the model's context window: the model's own, or when that is
// unknown the limit the overflow's error text named (limit, 0 when none).
func (e *Engine) window(limit int) int {
	if e.model.ContextWindow > 0 {
		return e.model.ContextWindow
	}
	return max(limit, 0)
}

// tooLarge returns why msgs cannot be compacted to fit a window of window
// tokens: the messages from the last point a compaction may cut at on
// (what any compaction keeps), their tool results truncated as far as
// they may be (see truncateToFit), leave, calibrated, no room under the
// window less reserveTokens for a summary of one estimated token. nil when
// they do, or when the window is unknown.
func (e *Engine) tooLarge(msgs []transcript.Message, window int) *tooLargeError {
	usable := window - max(e.cfg.Compaction.ReserveTokens, 0)
	if window <= 0 || usable <= 0 || len(msgs) == 0 {
		return nil
	}
	at := lastCutPoint(msgs)
	// Its tool results may be truncated to make room.
	tail, _ := e.truncateToFit(msgs[at:], usable-e.calib.tokens(1))
	n := e.calib.tokens(EstimateTokens(tail...))
	if n+e.calib.tokens(1) <= usable {
		return nil // room for a summary of one token at least
	}
	return &tooLargeError{Tokens: n, Window: window, Reserve: max(e.cfg.Compaction.ReserveTokens, 0)}
}

// lastCutPoint is the last index of msgs a compaction may cut at (see
// cutPoints), 0 when there is none: what follows it is what every
// compaction keeps.
func lastCutPoint(msgs []transcript.Message) int {
	valid := cutPoints(msgs)
	for i := len(valid) - 1; i > 0; i-- {
		if valid[i] {
			return i
		}
	}
	return 0
}
