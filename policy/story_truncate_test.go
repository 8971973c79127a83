package policy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// A tool result alone over the window, the last thing of a run that
// overflows (issue 23 item 5): the compaction keeps it with its call,
// truncated with the marker so that the continuation fits, rather than
// failing the turn; the compaction entry records the truncation, and a
// session opened on the history holds the result truncated the same way.
func TestStoryToolResultOverTheWindowIsTruncated(t *testing.T) {
	const window = 20000
	cfg := policy.DefaultConfig()
	cfg.Compaction.ReserveTokens = 1000
	model := policy.Model{Provider: "p", ID: "m", ContextWindow: window}
	history := sizedHistory(10, 10)
	e, err := policy.New(policy.Setup{SessionID: "s", Model: model, Config: cfg, History: history})
	require.NoError(t, err)
	p := &player{e: e, now: t0}
	promptIn("read the log")(p)
	require.NoError(t, p.promptErr)
	call := okAnswer("reading it")
	call.ID, call.StopReason = "call-msg", transcript.StopReasonToolUse
	call.Content = append(call.Content, transcript.Block{Type: transcript.BlockToolCall, ID: "call-1", Name: "read", Arguments: json.RawMessage(`{"path":"big.log"}`)})
	result := transcript.Message{ID: "result-1", Role: transcript.RoleToolResult, ToolCallID: "call-1", ToolName: "read",
		Content: transcript.TextContent(strings.Repeat("log line\n", 30000))} // 270,000 characters, 67,500 tokens
	overflow := errorAnswer(fmt.Sprintf("prompt is too long: %d tokens > %d maximum", 70000, window))
	var lines []string
	for _, m := range []transcript.Message{call, result, overflow} {
		lines = append(lines, feed(events.MessageStart{Message: m}, events.MessageEnd{Message: m})(p)...)
	}
	lines = append(lines, feed(events.AgentEnd{})(p)...)
	lines = append(lines, returned(policy.RunReturn{})(p)...)
	require.False(t, p.turnDone, "the turn goes on: %v\n%s", p.turnErr, strings.Join(lines, "\n"))
	require.NotNil(t, p.request, strings.Join(lines, "\n"))
	require.Equal(t, []string{"call-msg", "result-1"}, idsOf(p.request.Kept), "the call and its result kept together")
	kept := p.request.Kept[1].Text()
	assert.True(t, strings.HasPrefix(kept, "log line\nlog line\n"), "the start kept")
	assert.Regexp(t, `\n\n\[\.\.\. \d+ more characters of this tool result truncated by compaction: it was too large to keep whole\]$`, kept)
	assert.Less(t, len(kept), len(result.Text()))
	assert.Len(t, result.Text(), 270000, "the message given is not changed")

	summarized("## Goal\nread the log")(p)
	require.False(t, p.turnDone, "the continuation runs: %v", p.turnErr)
	assert.Less(t, sizes.Tokens(p.runContext...), window-cfg.Compaction.ReserveTokens, "the continuation fits")
	assert.Equal(t, kept, p.runContext[len(p.runContext)-1].Text(), "the continuation holds the truncated result")

	var entry *transcript.Compaction
	for _, en := range p.history {
		if en.Type == transcript.EntryCompaction {
			entry = en.Compaction
		}
	}
	require.NotNil(t, entry)
	require.Len(t, entry.Truncated, 1)
	assert.Equal(t, "result-1", entry.Truncated[0].EntryID)
	assert.Equal(t, kept, transcript.TruncateToolResult(result, entry.Truncated[0].KeptChars).Text())
	for _, en := range p.history {
		if en.ID == "result-1" {
			assert.Len(t, en.Message.Text(), 270000, "the history keeps the result whole")
		}
	}

	// Opened on its history, a session holds the result truncated.
	e2, err := policy.New(policy.Setup{SessionID: "s", Model: model, Config: cfg, History: append(append([]transcript.Entry(nil), history...), p.history...)})
	require.NoError(t, err)
	msgs := e2.Messages()
	require.NotEmpty(t, msgs)
	assert.Equal(t, transcript.RoleSummary, msgs[0].Role)
	var reopened string
	for _, m := range msgs {
		if m.ID == "result-1" {
			reopened = m.Text()
		}
	}
	assert.Equal(t, kept, reopened)
}

func idsOf(msgs []transcript.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}
