package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
)

// toolResult is a tool result whose text is n characters, so n/4 tokens
// (rounded up) by the estimate.
func toolResult(id string, n int) transcript.Message {
	return transcript.Message{ID: id, Role: transcript.RoleToolResult, ToolCallID: "c-" + id, Content: transcript.TextContent(strings.Repeat("a", n))}
}

// The tool results a compaction truncates, at the edges of truncateToFit's
// conditions. With the calibration at 1, a truncated result of n kept
// characters counts ceil((n + marker)/4) tokens, the marker being 103
// characters when the count it gives has 3 digits, 104 with 4 (and 11
// more with ", and 1 image"). The first guess keeps 4 × (the room left
// for the result) − 160 − the error message's length; only when that is
// negative does a search find the most that fits.
func TestTruncateToFitAtItsEdges(t *testing.T) {
	q := transcript.Message{ID: "q", Role: transcript.RoleUser, Content: transcript.TextContent("q")} // 1 token
	withError := toolResult("r1", 4000)
	withError.ErrorMessage = "boom!"
	withImage := toolResult("r1", 10)
	withImage.Content = append(withImage.Content, transcript.Block{Type: transcript.BlockImage, MimeType: "image/png"})
	cases := []struct {
		name  string
		msgs  []transcript.Message
		limit int
		want  []transcript.Truncation
		size  int // the messages' tokens once truncated
	}{{
		name: "a context that fits exactly is kept whole",
		msgs: []transcript.Message{q, toolResult("r1", 4000)}, limit: 1001,
		size: 1001,
	}, {
		name: "the first guess, when it fits, is what is kept: 4 × 500 − 160",
		msgs: []transcript.Message{q, toolResult("r1", 4000)}, limit: 501,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 1840}}, size: 1 + 486,
	}, {
		name: "the guess leaves room for the error message, which stays",
		msgs: []transcript.Message{q, withError}, limit: 501,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 1835}}, size: 1 + 486,
	}, {
		name: "a guess of exactly 0 fits and keeps the marker alone",
		msgs: []transcript.Message{q, toolResult("r1", 2000)}, limit: 41,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 0}}, size: 1 + 26,
	}, {
		// r1 has 30 tokens of room: 16 characters and the marker take
		// exactly 30, which reaches the limit: r2 stays whole.
		name: "a negative guess searches the most that fits, and a result that reaches the limit exactly is the last cut",
		msgs: []transcript.Message{q, toolResult("r1", 2000), toolResult("r2", 800)}, limit: 231,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 16}}, size: 231,
	}, {
		name: "the search may keep the whole text of a result whose image is dropped",
		msgs: []transcript.Message{q, withImage}, limit: 40,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 10}}, size: 1 + 31,
	}, {
		// r1 down to its marker still leaves 427 tokens: r2 is cut next,
		// with 73 tokens of room: 4 × 73 − 160 = 132.
		name: "when the largest down to its marker is not enough, the next is cut by the room then left",
		msgs: []transcript.Message{q, toolResult("r1", 2000), toolResult("r2", 1600)}, limit: 100,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 0}, {EntryID: "r2", KeptChars: 132}}, size: 1 + 26 + 59,
	}, {
		name: "of results of the same size the earliest is cut first, and the largest before a smaller one",
		msgs: []transcript.Message{q, toolResult("r1", 800), toolResult("r2", 800), toolResult("r3", 400)}, limit: 400,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 236}}, size: 1 + 85 + 200 + 100,
	}, {
		// r2's 101 characters are 26 tokens, as many as its marker.
		name: "a result whose marker takes as much room as its text is not cut",
		msgs: []transcript.Message{q, toolResult("r1", 2000), toolResult("r2", 101)}, limit: 10,
		want: []transcript.Truncation{{EntryID: "r1", KeptChars: 0}}, size: 1 + 26 + 26,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := cloneMessages(tc.msgs)
			out, cuts := (*Engine)(nil).truncateToFit(tc.msgs, tc.limit, 0)
			assert.Equal(t, tc.want, cuts)
			assert.Equal(t, tc.size, sizes.Tokens(out...))
			assert.Equal(t, before, tc.msgs, "the messages handed in are not changed")
			for i, m := range out {
				if m.Role == transcript.RoleToolResult {
					assert.Equal(t, len(tc.msgs[i].ErrorMessage), len(m.ErrorMessage), "an error message is never cut")
				}
			}
		})
	}
}

// The room the messages a compaction keeps may take, at the edges of
// keptLimit: the threshold less the summary's budget and the prompt after
// them; after an overflow, no more than the window less reserveTokens, a
// summary of one estimated token and the prompt, when that leaves any
// room. A window of 100 with a reserve of 97 has a threshold of 3, too
// small for a budget: only the window bounds an overflow's compaction.
func TestKeptLimitAtItsEdges(t *testing.T) {
	cases := []struct {
		name            string
		window, reserve int
		reason          transcript.CompactionReason
		extra           int
		c               calibration
		limit           int
		ok              bool
	}{
		// 1000 − 150 = 850, less a budget of 212 and the prompt's 7.
		{"threshold less budget less prompt", 1000, 0, transcript.ReasonThreshold, 7, 0, 631, true},
		{"after an overflow the threshold is the tighter", 1000, 0, transcript.ReasonOverflow, 7, 0, 631, true},
		{"no threshold: an overflow is bounded by the window", 100, 97, transcript.ReasonOverflow, 0, 0, 2, true},
		{"no threshold: the prompt takes from the window's room", 100, 97, transcript.ReasonOverflow, 1, 0, 1, true},
		{"no threshold: a summary's token is calibrated", 100, 97, transcript.ReasonOverflow, 0, 2, 1, true},
		{"no threshold, no room left under the window: no bound", 100, 97, transcript.ReasonOverflow, 2, 0, 0, false},
		{"no threshold and no overflow: no bound", 100, 97, transcript.ReasonThreshold, 0, 0, 0, false},
		{"a manual compaction is no overflow", 100, 97, transcript.ReasonManual, 0, 0, 0, false},
		{"an unknown window bounds nothing", 0, 0, transcript.ReasonOverflow, 0, 0, 0, false},
		// 60 − 40 = 20, budget 5: 15; the window leaves 60 − 40 − 16 = 4.
		{"a summary's token calibrated high leaves the window tighter than the threshold", 60, 40, transcript.ReasonOverflow, 0, 16, 4, true},
		{"the same without an overflow", 60, 40, transcript.ReasonThreshold, 0, 16, 15, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{model: Model{ContextWindow: tc.window}}
			e.cfg.Compaction.ReserveTokens = tc.reserve
			limit, ok := e.keptLimit(tc.reason, tc.extra, tc.c)
			assert.Equal(t, tc.limit, limit, "limit")
			assert.Equal(t, tc.ok, ok, "ok")
		})
	}
}

// When keepRecentTokens would keep everything after the first message, a
// compaction cuts at the first cut point only when the whole context does
// not fit under the threshold less the summary's budget: a context of
// exactly that size has nothing to compact, one token more is compacted.
func TestCompactionAtTheFirstCutPointNeedsTheWholeOver(t *testing.T) {
	// A window of 1000 without reserve: a threshold of 850 less a budget
	// of 212 leaves 638 tokens.
	for _, tc := range []struct {
		last int // the last message's characters
		want error
	}{{4 * 300, ErrNothingToCompact}, {4*300 + 1, nil}} {
		cfg := DefaultConfig()
		cfg.Compaction.ReserveTokens = 0
		history := []transcript.Entry{}
		for _, m := range []transcript.Message{
			{ID: "u1", Role: transcript.RoleUser, Content: transcript.TextContent(strings.Repeat("u", 4*300))},
			{ID: "a1", Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop, Content: transcript.TextContent(strings.Repeat("a", 4*38))},
			{ID: "u2", Role: transcript.RoleUser, Content: transcript.TextContent(strings.Repeat("u", tc.last))},
		} {
			history = append(history, transcript.Entry{Type: transcript.EntryMessage, ID: m.ID, Message: &m})
		}
		e, err := New(Setup{SessionID: "s", Model: Model{Provider: "p", ID: "m", ContextWindow: 1000}, Config: cfg, History: history})
		require.NoError(t, err)
		effects, err := e.Compact(time.Unix(1_700_000_000, 0), "")
		require.ErrorIs(t, err, tc.want, "a context of %d tokens", sizes.Tokens(e.ctx.msgs...))
		if tc.want == nil {
			var req *SummaryRequest
			for _, ef := range effects {
				if ef.Kind == StartCompaction {
					req = ef.Request
				}
			}
			require.NotNil(t, req)
			assert.Equal(t, []string{"u1"}, idsOf(req.Messages), "cut")
			assert.Equal(t, []string{"a1", "u2"}, idsOf(req.Kept), "kept")
		}
	}
}

func idsOf(msgs []transcript.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

// Why an overflow's compaction finds nothing to compact names the
// provider's count when its text gave one, and the model's window when
// it is known: each of the four messages, and ErrNothingToCompact behind
// each.
func TestNothingEarlierNamesWhatIsKnown(t *testing.T) {
	const tail = ", and nothing before the last message can be compacted"
	cases := []struct {
		window, tokens int
		counted        bool
		want           string
	}{
		{1000, 1200, true, "the provider counted 1200 tokens, over the model's window of 1000" + tail},
		{0, 1200, true, "the provider counted 1200 tokens, over the model's window" + tail},
		{1000, 0, false, "the provider said the request is over the model's window of 1000" + tail},
		{0, 0, false, "the provider said the request is over the model's window" + tail},
	}
	for _, tc := range cases {
		e := &Engine{model: Model{ContextWindow: tc.window}}
		e.setOverflow(overflowCount{tokens: tc.tokens, counted: tc.counted})
		err := e.nothingEarlier()
		require.ErrorIs(t, err, ErrNothingToCompact)
		assert.Equal(t, ErrNothingToCompact.Error()+": "+tc.want, err.Error())
	}
}
