package policy

import (
	"fmt"
	"math"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/internal/sizes"
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
// counts for each token the chars/4 estimate (sizes.Tokens) gives. 0 is
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
// (output). A count of the context as it is now supersedes an earlier
// overflow's (see overflowCount).
func (e *Engine) calibrateUsage(m *transcript.Message) {
	if m.IsError() {
		return
	}
	if n := contextTokens(m.Usage); n > 0 {
		e.calib = e.calib.sample(n, e.ctx.est)
		e.setOverflow(overflowCount{})
	}
}

// calibrateOverflow takes the size an overflow's error text gives as a
// count of the request that overflowed: the runtime context before m, the
// overflow's message.
//
// It also keeps the overflow's count (see overflowCount): the size the
// text gives, or when it gives none, one token over the model's window,
// which is what an overflow says at least.
func (e *Engine) calibrateOverflow(m *transcript.Message, v classify.Result) {
	if v.Class != classify.Overflow {
		return
	}
	window := e.window()
	o := overflowCount{tokens: max(v.PromptTokens, 0), window: window, counted: v.PromptTokens > 0}
	if o.tokens == 0 && window > 0 && window < math.MaxInt {
		o.tokens = window + 1
	}
	if o.tokens > 0 {
		e.setOverflow(o)
	}
	if v.PromptTokens <= 0 {
		return
	}
	est := e.ctx.est
	if len(e.contextWithout(m)) < len(e.ctx.msgs) {
		est -= sizes.Message(*m)
	}
	e.calib = e.calib.sample(v.PromptTokens, est)
}

// overflowCount is the provider's count of a request that overflowed:
// tokens (0 when unknown) over a window of window tokens (0 when unknown);
// counted says the error text gave tokens (else it is the window + 1).
//
// The session keeps the latest overflow's count, with its calibration,
// until a compaction changes the context or a call's usage counts the
// context again: the compaction that recovers from the overflow sizes the
// context by it (overflowCut), and so, when the turn failed without one
// (the recovery failed, compaction was off, the overflow was too large),
// do the check before the next prompt and the compactions after it. It
// is part of the snapshot.
type overflowCount struct {
	tokens, window int
	counted        bool
}

// overflow is the count of the latest overflow that stands, tokens 0 when
// none.
func (e *Engine) overflow() overflowCount {
	n := e.overflowTokens
	return overflowCount{tokens: int(max(n, -n)), window: e.window(), counted: n > 0}
}

// setOverflow keeps o as the count of the latest overflow (its window is
// the model's), its tokens held at math.MaxInt32: negated when its text
// gave no count, so that one int32 holds both.
func (e *Engine) setOverflow(o overflowCount) {
	n := int32(min(max(o.tokens, 0), math.MaxInt32))
	if !o.counted {
		n = -n
	}
	e.overflowTokens = n
}

// overflowCut is the cut of a compaction while the provider's count of an
// overflow stands (see overflowCount), given the cut at (and ok, whether
// there is one) that the calibrated sizes chose, and extra, the
// calibrated size of the prompt waiting to be sent after it (0 when
// none): the provider said the context does not fit, so what is kept must
// fit by the overflow's own count, whatever the calibration says. The
// calibration may not say it: a context estimated under 1,024 tokens sets
// no ratio, and a ratio is held at 16 at most, so a short context the
// provider counts as over the window (a scripted overflow after a few
// short turns, a system prompt or tools far larger than the messages) is,
// calibrated, under keepRecentTokens: "nothing to compact", and the turn
// failed.
//
// When the overflow's count is larger than the calibrated size of msgs,
// msgs are sized by the ratio that count gives (tokens ÷ the estimate of
// msgs, unbounded), and returned as sizing (else sizing is the session's
// calibration). With a threshold, the cut moves forward, cut point by cut
// point from at (from the first cut point when there was none), until
// what is kept leaves room for a summary of the budget and the prompt
// under the threshold, or until the last cut point: so something is
// always cut when there is a cut point after the first message, the whole
// did not fit. Without one (the model's window is unknown) there is no
// fit to test: the cut is the keepRecentTokens walk by that sizing.
// counted is the overflow's count of msgs when the text gave one (the
// compaction's TokensBefore is at least that), else 0.
func (e *Engine) overflowCut(msgs []transcript.Message, at int, ok bool, extra int) (_ int, _ bool, counted int, sizing calibration) {
	o := e.overflow()
	if o.counted {
		counted = o.tokens
	}
	est := sizes.Tokens(msgs...)
	if o.tokens <= 0 || est <= 0 || e.calib.tokens(est) >= o.tokens {
		return at, ok, counted, e.calib // the calibrated size says what the provider said
	}
	sizing = calibration(float64(o.tokens) / float64(est))
	threshold, budget, bounded := e.summaryBudget()
	if !bounded {
		if at2, ok2 := cutPoint(msgs, e.cfg.Compaction.KeepRecentTokens, sizing); ok2 {
			return at2, true, counted, sizing
		}
		return at, ok, counted, sizing
	}
	from := at
	if !ok {
		first, found := nextCutPoint(msgs, 1)
		if !found {
			return at, ok, counted, sizing
		}
		from = first
	}
	return deeperCut(msgs, from, threshold-budget-extra, sizing), true, counted, sizing
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
			return calibration(0).sample(contextTokens(m.Usage), sizes.Tokens(c.msgs[:i+1]...))
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

// window is the model's context window, 0 when unknown. A limit an
// overflow's error text names does not stand in for an unknown window:
// without a window there is no fit to test (no too_large, no deeper cut
// for the room, no truncation), only the keepRecentTokens target.
func (e *Engine) window() int { return max(e.model.ContextWindow, 0) }

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
	tail, _ := e.truncateToFit(msgs[at:], usable-e.calib.tokens(1), e.calib)
	n := e.calib.tokens(sizes.Tokens(tail...))
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
