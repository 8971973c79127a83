package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/agentfsm/agentfsm/classify"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCalibrationAtItsBounds: the calibration's arithmetic at the edges of
// each of its conditions, where an off-by-one shows: the saturation of a
// calibrated size, an estimate that fits a budget exactly or overshoots it
// by the float's rounding, a count of no tokens, an estimate of exactly
// minCalibrationTokens, and ratios at the bounds.
func TestCalibrationAtItsBounds(t *testing.T) {
	// tokens saturates at MaxInt/2, from the first size that reaches it.
	assert.Equal(t, math.MaxInt/2, calibration(0).tokens(1<<62), "2^62 reaches the saturation: MaxInt/2, not 2^62")
	assert.Equal(t, math.MaxInt/2, calibration(2).tokens(math.MaxInt/3), "a size past it saturates")
	assert.Equal(t, 0, calibration(2).tokens(0))
	assert.Equal(t, 3, calibration(1.5).tokens(2))

	// estimateRoom: the largest estimate whose calibrated size fits.
	assert.Equal(t, 100, calibration(0).estimateRoom(100), "an exact fit is room")
	assert.Equal(t, 200, calibration(0.5).estimateRoom(100), "a ratio under 1 makes more room than the budget")
	assert.Equal(t, 169, calibration(1.1).estimateRoom(187), "187/1.1 gives 170, whose size the float rounds to 188: one less")
	assert.Equal(t, 0, calibration(2).estimateRoom(0))
	assert.Equal(t, 0, calibration(2).estimateRoom(-5))

	// chars: four characters a token, by the ratio.
	assert.Equal(t, 200, calibration(2).chars(100))
	assert.Equal(t, 0, calibration(2).chars(0))

	// sample: a count of no tokens, or of a short estimate, changes nothing.
	assert.Equal(t, calibration(0), calibration(0).sample(0, 2048), "no count")
	assert.Equal(t, calibration(3), calibration(3).sample(-1, 2048), "no count")
	assert.Equal(t, calibration(2), calibration(0).sample(2*minCalibrationTokens, minCalibrationTokens), "an estimate of exactly the least that calibrates")
	assert.Equal(t, calibration(0), calibration(0).sample(2*minCalibrationTokens, minCalibrationTokens-1), "one under it")
	assert.Equal(t, calibration(minTokenRatio), calibration(0).sample(1, 4096), "a ratio under the bounds is the lower bound")
	assert.Equal(t, calibration(maxTokenRatio), calibration(0).sample(1<<30, 4096), "and over them the upper")

	// validRatio: 0 and the bounds themselves are valid.
	for _, r := range []float64{0, minTokenRatio, 1, maxTokenRatio} {
		assert.True(t, validRatio(r), "%v", r)
	}
	for _, r := range []float64{-1, minTokenRatio / 2, maxTokenRatio * 2, math.NaN(), math.Inf(1)} {
		assert.False(t, validRatio(r), "%v", r)
	}
}

// calibrationEngine is an engine on a model with this context window, its
// compaction reserving reserve tokens.
func calibrationEngine(t *testing.T, window, reserve int) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Compaction.ReserveTokens = reserve
	e, err := New(Setup{SessionID: "s", Model: Model{Provider: "p", ID: "m", ContextWindow: window}, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOverflowCountAtItsEdges: what an overflow's count keeps, and what a
// snapshot says of it, at the edges: no overflow yet, an overflow whose
// text gives no count (the window + 1, marked uncounted), one on a model
// of unknown window (no count to keep), a later overflow with no count
// after a counted one, and a call whose usage counts nothing.
func TestOverflowCountAtItsEdges(t *testing.T) {
	overflow := func(tokens int) classify.Result {
		return classify.Result{Class: classify.Overflow, PromptTokens: tokens}
	}
	m := &transcript.Message{ID: "x", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "prompt is too long"}

	e := calibrationEngine(t, 1000, 0)
	assert.Equal(t, overflowCount{window: 1000}, e.overflow(), "no overflow yet: no tokens, not counted")
	snap := e.Snapshot()
	assert.Equal(t, 0, snap.OverflowTokens)
	assert.False(t, snap.OverflowCounted, "an engine that saw no overflow writes no counted one")

	e.calibrateOverflow(m, overflow(0))
	assert.Equal(t, overflowCount{tokens: 1001, window: 1000}, e.overflow(), "no count in the text: the window + 1, uncounted")
	snap = e.Snapshot()
	assert.Equal(t, 1001, snap.OverflowTokens)
	assert.False(t, snap.OverflowCounted)

	unknown := calibrationEngine(t, 0, 0)
	unknown.calibrateOverflow(m, overflow(0))
	assert.Equal(t, overflowCount{}, unknown.overflow(), "no count and no window: nothing to keep")
	unknown.calibrateOverflow(m, overflow(250000))
	assert.Equal(t, overflowCount{tokens: 250000, counted: true}, unknown.overflow())
	unknown.calibrateOverflow(m, overflow(0))
	assert.Equal(t, overflowCount{tokens: 250000, counted: true}, unknown.overflow(), "an overflow that says nothing of its size leaves the count that stands")

	answer := &transcript.Message{ID: "y", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent("ok"), Usage: &transcript.Usage{}}
	unknown.calibrateUsage(answer)
	assert.Equal(t, overflowCount{tokens: 250000, counted: true}, unknown.overflow(), "a usage that counts nothing leaves the overflow's count")
	answer.Usage.Input = 10
	unknown.calibrateUsage(answer)
	assert.Equal(t, overflowCount{}, unknown.overflow(), "a usage that counts the context supersedes it")
}

// TestCalibratedFromAReplayedContext: a replayed context's ratio comes from
// its last assistant message whose usage counts something, wherever it is,
// the first message included.
func TestCalibratedFromAReplayedContext(t *testing.T) {
	long := strings.Repeat("abcd", 2048) // 2,048 estimated tokens, enough to calibrate
	assistant := func(id string, usage int) transcript.Message {
		return transcript.Message{ID: id, Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent(long),
			Usage: &transcript.Usage{Input: usage}}
	}
	user := transcript.Message{ID: "u", Role: transcript.RoleUser, Content: transcript.TextContent("go on")}

	first := runtimeContext{msgs: []transcript.Message{assistant("a", 4096), user}}
	est := sizes.Tokens(first.msgs[:1]...)
	assert.Equal(t, calibration(4096/float64(est)), first.calibrated(), "the first message's usage counts")

	zero := runtimeContext{msgs: []transcript.Message{assistant("a", 4096), user, assistant("b", 0)}}
	assert.Equal(t, calibration(4096/float64(est)), zero.calibrated(), "a later usage of no tokens is no count: the earlier one stands")
}

// TestTooLargeAtItsEdges: whether what every compaction keeps leaves room
// for a summary of one token, at the edges: a window no larger than its
// reserve (no fit to test, as with an unknown window), what is kept taking
// all the room but one token (it fits) or all of it (it does not), a tool
// result truncated to the room but one token, and the error's text with
// and without a reserve.
func TestTooLargeAtItsEdges(t *testing.T) {
	msgs := func(text string) []transcript.Message {
		return []transcript.Message{{ID: "u", Role: transcript.RoleUser, Content: transcript.TextContent(text)}}
	}
	kept := msgs(strings.Repeat("abcd", 99)) // 99 estimated tokens
	require.Equal(t, 99, sizes.Tokens(kept...))

	assert.Nil(t, calibrationEngine(t, 500, 500).tooLarge(kept, 500), "a window no larger than its reserve has no fit to test")
	assert.Nil(t, calibrationEngine(t, 100, 0).tooLarge(kept, 100), "99 kept and a summary of 1 fill the window exactly")
	tl := calibrationEngine(t, 99, 0).tooLarge(kept, 99)
	require.NotNil(t, tl, "99 kept leave no room under a window of 99")
	assert.Equal(t, tooLargeError{Tokens: 99, Window: 99}, *tl)
	assert.Equal(t, "the last message alone is 99 tokens, over the model's window of 99", tl.Error())
	tl = calibrationEngine(t, 149, 50).tooLarge(kept, 149)
	require.NotNil(t, tl)
	assert.Equal(t, "the last message alone is 99 tokens, over the model's window of 149 less its reserve of 50", tl.Error())

	// A tool result is truncated to leave the summary its token.
	call := transcript.Message{ID: "a", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonToolUse,
		Content: []transcript.Block{{Type: transcript.BlockToolCall, ID: "c", Name: "t", Arguments: json.RawMessage(`{}`)}}}
	result := transcript.Message{ID: "r", Role: transcript.RoleToolResult, ToolCallID: "c", Content: transcript.TextContent(strings.Repeat("abcd", 5000))}
	tail := append(msgs("read it"), call, result)
	assert.Nil(t, calibrationEngine(t, 1000, 0).tooLarge(tail, 1000), "a tool result truncated to the room left leaves a summary its token")
	window := sizes.Tokens(tail[lastCutPoint(tail):]...) - 1 // what every compaction keeps, one token over the window
	assert.Nil(t, calibrationEngine(t, window, 0).tooLarge(tail, window), "a tail just over the window is truncated to leave the summary its token")
}

// TestOverflowCutAtItsEdges: the cut of a compaction while an overflow's
// count stands, at the edges: a count no larger than the calibrated size
// leaves the cut the calibrated sizes chose, and a prompt waiting to be
// sent after the compaction takes its room from what is kept.
func TestOverflowCutAtItsEdges(t *testing.T) {
	// Ten messages of 1,000 estimated tokens each; a window of 10,000
	// with no reserve: a threshold of 8,500 and a summary budget of 2,125,
	// so 6,375 tokens for what is kept and the prompt.
	var msgs []transcript.Message
	for i := range 10 {
		role := transcript.RoleUser
		if i%2 == 1 {
			role = transcript.RoleAssistant
		}
		msgs = append(msgs, transcript.Message{ID: fmt.Sprint("m", i), Role: role, Content: transcript.TextContent(strings.Repeat("abcd", 1000))})
	}
	require.Equal(t, 10000, sizes.Tokens(msgs...))
	e := calibrationEngine(t, 10000, 0)

	e.setOverflow(overflowCount{tokens: 10000, counted: true})
	at, ok, counted, sizing := e.overflowCut(msgs, 1, true, 0)
	assert.Equal(t, []any{1, true, 10000, calibration(0)}, []any{at, ok, counted, sizing},
		"a count equal to the calibrated size: the cut the calibration chose stands")

	e.setOverflow(overflowCount{tokens: 20000, counted: true}) // twice the estimate
	at, _, _, sizing = e.overflowCut(msgs, 1, true, 0)
	assert.Equal(t, calibration(2), sizing)
	assert.Equal(t, 7, at, "three messages of 2,000 counted tokens fit in 6,375")
	at, _, _, _ = e.overflowCut(msgs, 1, true, 2000)
	assert.Equal(t, 8, at, "a prompt of 2,000 tokens leaves room for two")
}
