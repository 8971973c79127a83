package policy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// Calibration (issue 23 items 1 and 2): every count the provider gives
// calibrates the session's chars/4 estimate, and a compaction after an
// overflow leaves a context that fits by that count, or fails at once
// saying why none can.

// answerOf is a successful answer of chars characters whose call reported
// usage u (nil for none).
func answerOf(chars int, u *transcript.Usage) transcript.Message {
	m := okAnswer(strings.Repeat("a", chars))
	m.Usage = u
	return m
}

// ratioOf is the engine's token ratio, as its snapshot records it: 1
// before any count.
func ratioOf(e *policy.Engine) float64 {
	if r := e.Snapshot().TokenRatio; r != 0 {
		return r
	}
	return 1
}

// calibrated is the size of msgs by the engine's calibrated count.
func calibrated(e *policy.Engine, msgs []transcript.Message) int {
	return int(math.Ceil(float64(sizes.Tokens(msgs...)) * ratioOf(e)))
}

// usable is the test model's window less the default reserveTokens.
var usable = testModel.ContextWindow - policy.DefaultConfig().Compaction.ReserveTokens

// The issue's reproduction: two answers of 68 KB each, then "prompt is too
// long: 210345 tokens > 200000 maximum". By chars/4 the answers are 17,000
// tokens each, so the compaction used to keep everything from the first
// answer on and summarise the first question only: the continuation sent
// more than the request that overflowed. The provider's count says the
// context is six times the estimate: the compaction keeps the second
// answer and the question, and the continuation fits.
func TestStoryCalibrationIssueReproduction(t *testing.T) {
	const answerChars = 68 * 1000
	var overflowed int // the estimate of the request that overflowed
	play(t, story{steps: []step{
		{in: promptIn("first question"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
		{in: reply(answerOf(answerChars, nil)), want: []string{
			"message msg-2 stop", "append message:msg-2", "agent_end [msg-2]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("second question"), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(answerOf(answerChars, nil)), want: []string{
			"message msg-4 stop", "append message:msg-4", "agent_end [msg-4]", "idle>classifying agent_end", "classifying>idle accept", "turn_settled ok", "finish_turn ok",
		}},
		{in: promptIn("third question"), want: []string{"start_run prompt user-5 context=[user-1 msg-2 user-3 msg-4 user-5]", "append message:user-5"}},
		{in: reply(errorAnswer("400 prompt is too long: 210345 tokens > 200000 maximum")), want: []string{
			`message msg-6 error p/m "400 prompt is too long: 210345 tokens > 200000 maximum"`, "append message:msg-6", "agent_end [msg-6]",
			"idle>classifying agent_end", "compaction_start overflow",
			"start_compaction overflow cut=[user-1 msg-2 user-3] kept=[msg-4 user-5] max=27488",
			"classifying>compacting overflow", "append removal:msg-6",
		}, check: func(t *testing.T, p *player) {
			overflowed = sizes.Tokens(p.runContext...)
			assert.InDelta(t, 210345.0/float64(overflowed), ratioOf(p.e), 1e-9, "the overflow's count calibrates the estimate of the request")
			// The summary's budget and what is kept fit under the window
			// less the reserve, by the calibrated count.
			r := p.request
			assert.LessOrEqual(t, calibrated(p.e, r.Kept)+calibrated(p.e, []transcript.Message{{Content: transcript.TextContent(strings.Repeat("s", r.MaxChars))}}), usable)
		}},
		{in: summarized("summary"), want: []string{
			"append compaction:compaction-7 await",
			`compaction_end ok willRetry=true overflow "summary" kept=msg-4 before=210345`,
			"start_run continuation context=[compaction-7 msg-4 user-5]",
			"compacting>continuing resume",
		}, check: func(t *testing.T, p *player) {
			st := p.e.Status()
			assert.Equal(t, transcript.ReasonOverflow, st.LastCompaction)
			assert.Equal(t, 210345, st.CompactionTokensBefore)
			after := calibrated(p.e, p.runContext)
			assert.Equal(t, after, st.CompactionTokensAfter)
			assert.Less(t, after, usable, "the continuation fits by the provider's count")
			// It is smaller than the request that overflowed, by the
			// estimate too (the characters sent).
			assert.Less(t, sizes.Tokens(p.runContext...), overflowed)
		}},
	}})
}

// Each call's usage calibrates the estimate of the messages it covered:
// everything it read and the answer it wrote. A count of a context too
// small to say anything (under MinCalibrationTokens), or no count at all,
// leaves it as it was; a garbage count is held within the bounds.
func TestStoryCalibrationFromUsage(t *testing.T) {
	for _, c := range []struct {
		name  string
		usage *transcript.Usage
		want  func(est int) float64
	}{
		{"input, cache and output", &transcript.Usage{Input: 1000, CacheRead: 2000, CacheWrite: 500, Output: 1500}, func(est int) float64 { return 5000 / float64(est) }},
		{"totalTokens first", &transcript.Usage{Input: 1, TotalTokens: 6000}, func(est int) float64 { return 6000 / float64(est) }},
		{"no usage", nil, func(int) float64 { return 1 }},
		{"zero usage", &transcript.Usage{}, func(int) float64 { return 1 }},
		{"negative usage", &transcript.Usage{Input: -5}, func(int) float64 { return 1 }},
		{"a garbage huge count", &transcript.Usage{TotalTokens: 1 << 60}, func(int) float64 { return 16.0 }},
		{"a garbage tiny count", &transcript.Usage{TotalTokens: 1}, func(int) float64 { return 0.25 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := play(t, story{steps: []step{
				{in: promptIn("question"), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
			}})
			p.lines(p.e.RunEvent(p.now, p.run, nil)) // nothing: a nil event is dropped
			reply(answerOf(8000, c.usage))(p)
			est := sizes.Tokens(p.e.Messages()...)
			assert.InDelta(t, c.want(est), ratioOf(p.e), 1e-9)
		})
	}
	// A short context does not calibrate: its count is mostly the system
	// prompt's and the tools'.
	p := play(t, story{steps: warmUp})
	assert.Equal(t, 1.0, ratioOf(p.e), "120 tokens for a few words is no measure")
}

// An overflow's error text calibrates the estimate of the request that
// overflowed, in every wording the classifier reads a count from.
func TestStoryCalibrationFromOverflowText(t *testing.T) {
	for _, text := range []string{
		"prompt is too long: %d tokens > 200000 maximum",
		"This model's maximum context length is 200000 tokens. However, your messages resulted in %d tokens.",
		`{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error","n_prompt_tokens":%d,"n_ctx":200000}}`,
	} {
		t.Run(text, func(t *testing.T) {
			p := play(t, story{steps: []step{
				{in: promptIn(strings.Repeat("q", 40000)), want: []string{"start_run prompt user-1 context=[user-1]", "append message:user-1"}},
			}})
			reply(answerOf(40000, nil))(p)
			promptIn("next")(p)
			est := sizes.Tokens(p.e.Messages()...)
			reply(errorAnswer(fmt.Sprintf(text, 150000)))(p)
			assert.InDelta(t, 150000/float64(est), ratioOf(p.e), 1e-9)
			require.NotNil(t, p.request, "the overflow compacts")
			assert.Equal(t, transcript.ReasonOverflow, p.request.Reason)
		})
	}
}

// When even the last message (with what it needs) is over the window less
// the reserve by the calibrated count, no compaction can help: the table's
// too_large rule fails the turn at once, saying so, rather than summarise
// and send a continuation that overflows again.
func TestStoryCalibrationTooLarge(t *testing.T) {
	huge := strings.Repeat("x", 600000) // 150,000 tokens by chars/4: under the window until the provider counts it
	p := play(t, story{steps: with(warmUp, []step{
		{in: promptIn(huge), want: []string{"start_run prompt user-3 context=[user-1 msg-2 user-3]", "append message:user-3"}},
		{in: reply(errorAnswer("prompt is too long: 230000 tokens > 200000 maximum")), want: []string{
			`message msg-4 error p/m "prompt is too long: 230000 tokens > 200000 maximum"`, "append message:msg-4", "agent_end [msg-4]",
			"idle>classifying agent_end",
			"compaction_start overflow",
			"compaction_end failed willRetry=false \"Context overflow recovery failed: the last message alone is 229981 tokens, over the model's window of 200000 less its reserve of 16384\"",
			"classifying>idle too_large",
			"turn_settled overflow",
			"finish_turn policy: context overflow not recovered: the last message alone is 229981 tokens, over the model's window of 200000 less its reserve of 16384",
		}, check: turnFailed(policy.ErrOverflow)},
	})})
	assert.Nil(t, p.request, "no summary was asked for")
}

// The token ratio is part of the snapshot; a snapshot written before it
// was (no tokenRatio) still restores, taking the ratio from the usage in
// its history; a ratio out of bounds is refused, naming the field.
func TestSnapshotKeepsTheTokenRatio(t *testing.T) {
	d := newDriver(t, policy.DefaultConfig())
	effects, err := d.e.Prompt(t0, strings.Repeat("q", 8000))
	require.NoError(t, err)
	d.feed(effects)
	d.answerRun(t0, answerOf(8000, &transcript.Usage{TotalTokens: 12000}), 0)
	ratio := ratioOf(d.e)
	require.InDelta(t, 3.0, ratio, 1e-9)

	snap := d.e.Snapshot()
	assert.Equal(t, ratio, snap.TokenRatio)
	e, _, err := policy.Restore(policy.Setup{Model: testModel, History: d.history}, snap, t0, 0)
	require.NoError(t, err)
	assert.Equal(t, ratio, ratioOf(e))

	// Written before: no tokenRatio in the JSON.
	b, err := json.Marshal(snap)
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	require.Contains(t, raw, "tokenRatio")
	delete(raw, "tokenRatio")
	b, err = json.Marshal(raw)
	require.NoError(t, err)
	var old policy.Snapshot
	require.NoError(t, json.Unmarshal(b, &old))
	e, _, err = policy.Restore(policy.Setup{Model: testModel, History: d.history}, old, t0, 0)
	require.NoError(t, err)
	assert.InDelta(t, ratio, ratioOf(e), 1e-9, "taken from the history's usage")

	for _, bad := range []float64{math.NaN(), math.Inf(1), -1, 0.1, 17} {
		s := snap
		s.TokenRatio = bad
		_, _, err := policy.Restore(policy.Setup{Model: testModel, History: d.history}, s, t0, 0)
		require.ErrorIs(t, err, policy.ErrSnapshot, "%v", bad)
		assert.ErrorContains(t, err, "tokenRatio:")
	}
}

// A property (issue 23 item 2): after any compaction that follows an
// overflow, the context is under the window less the reserve by the
// calibrated count, or the turn failed with ErrOverflow saying the last message alone is over the window. Histories of
// any sizes, windows, reserves and counts, the summarizer writing as long
// a summary as it may (or longer: the engine cuts it). Never "nothing to
// compact" but for a context of empty messages: the provider said the
// context does not fit, so the compaction cuts by its count even where the
// calibrated size says everything fits.
func TestPropertyOverflowCompactionFits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.IntRange(2000, 300000).Draw(t, "window")
		cfg := policy.DefaultConfig()
		cfg.Compaction.ReserveTokens = rapid.IntRange(0, window/2).Draw(t, "reserve")
		cfg.Compaction.KeepRecentTokens = rapid.IntRange(1, 2*window).Draw(t, "keepRecent")
		n := rapid.IntRange(1, 12).Draw(t, "messages")
		var history []transcript.Entry
		for i := range n {
			id, role := fmt.Sprintf("user-%d", i+1), transcript.RoleUser
			if i%2 == 1 {
				id, role = fmt.Sprintf("msg-%d", i+1), transcript.RoleAssistant
			}
			chars := rapid.IntRange(0, 4*window).Draw(t, "chars")
			m := &transcript.Message{ID: id, Role: role, Content: transcript.TextContent(strings.Repeat("w", chars))}
			if role == transcript.RoleAssistant {
				m.StopReason, m.Provider, m.Model = "stop", "p", "m"
			}
			history = append(history, transcript.Entry{Type: transcript.EntryMessage, ID: id, Message: m})
		}
		model := policy.Model{Provider: "p", ID: "m", ContextWindow: window}
		e, err := policy.New(policy.Setup{SessionID: "s", Model: model, Config: cfg, History: history})
		require.NoError(t, err)
		p := &player{e: e, now: t0}
		promptIn(strings.Repeat("p", rapid.IntRange(0, 4*window).Draw(t, "prompt")))(p)
		require.NoError(t, p.promptErr)
		if p.request != nil { // the check before the prompt compacted: go on with it
			summarized("s")(p)
		}
		count := rapid.IntRange(window+1, 8*window).Draw(t, "count")
		reply(errorAnswer(fmt.Sprintf("prompt is too long: %d tokens > %d maximum", count, window)))(p)
		if p.turnDone {
			if errors.Is(p.turnErr, policy.ErrOverflow) && strings.Contains(p.turnErr.Error(), "the last message alone is ") {
				// No room for a summary of one estimated token.
				var n, w int
				_, err := fmt.Sscanf(p.turnErr.Error()[strings.Index(p.turnErr.Error(), "alone is "):], "alone is %d tokens, over the model's window of %d", &n, &w)
				require.NoError(t, err)
				assert.Equal(t, window, w)
				assert.Greater(t, n+int(math.Ceil(ratioOf(e))), window-cfg.Compaction.ReserveTokens)
				return
			}
			// "Nothing to compact" only for a context of empty messages
			// (issue 23 item 6): the provider said the context does not
			// fit, and the prompt is a cut point after the first message.
			require.ErrorIs(t, p.turnErr, policy.ErrNothingToCompact)
			require.Zero(t, sizes.Tokens(e.Messages()...), "the overflow was not recovered: %v", p.turnErr)
			return
		}
		require.NotNil(t, p.request)
		longest := rapid.IntRange(0, 2*p.request.MaxChars+10).Draw(t, "summary")
		summarized(strings.Repeat("s", longest))(p)
		require.False(t, p.turnDone, "the continuation runs: %v", p.turnErr)
		assert.Less(t, calibrated(e, p.runContext), window-cfg.Compaction.ReserveTokens+1,
			"the continuation fits: ratio %v", ratioOf(e))
		assert.LessOrEqual(t, calibrated(e, p.runContext), e.Status().CompactionTokensAfter)
	})
}
