package policy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

// A property (issue 23 item 5): no compaction separates a tool call from
// its result, on every path that chooses the cut: the check before a
// prompt, and after an overflow the cut at keepRecentTokens, the deeper cuts
// that make room for the summary and the cut at the first cut point.
// Histories of user messages, assistant messages with tool calls and tool
// results (answering any earlier call, other messages between), of any
// sizes, under any window, reserve and keepRecentTokens; the run that
// overflows calls tools first, its results up to twice the window, kept
// truncated when they do not fit.
func TestPropertyNoCutSeparatesAToolPair(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := rapid.IntRange(2000, 100000).Draw(t, "window")
		cfg := policy.DefaultConfig()
		cfg.Compaction.ReserveTokens = rapid.IntRange(0, window/2).Draw(t, "reserve")
		cfg.Compaction.KeepRecentTokens = rapid.IntRange(1, 2*window).Draw(t, "keepRecent")
		var history []transcript.Entry
		var open []string // calls not answered yet
		add := func(m *transcript.Message) {
			history = append(history, transcript.Entry{Type: transcript.EntryMessage, ID: m.ID, Message: m})
		}
		text := func(label string) string { return strings.Repeat("w", rapid.IntRange(0, 2*window).Draw(t, label)) }
		add(&transcript.Message{ID: "user-0", Role: transcript.RoleUser, Content: transcript.TextContent(text("first"))})
		for i := range rapid.IntRange(1, 20).Draw(t, "messages") {
			id := fmt.Sprintf("m-%d", i+1)
			switch kind := rapid.IntRange(0, 2).Draw(t, "kind"); {
			case kind == 0:
				add(&transcript.Message{ID: id, Role: transcript.RoleUser, Content: transcript.TextContent(text("user"))})
			case kind == 1 || len(open) == 0:
				m := &transcript.Message{ID: id, Role: transcript.RoleAssistant, StopReason: "stop", Provider: "p", Model: "m", Content: transcript.TextContent(text("assistant"))}
				for j := range rapid.IntRange(0, 2).Draw(t, "calls") {
					c := fmt.Sprintf("%s-c%d", id, j)
					m.Content = append(m.Content, transcript.Block{Type: transcript.BlockToolCall, ID: c, Name: "read", Arguments: json.RawMessage(`{}`)})
					open = append(open, c)
					m.StopReason = "toolUse"
				}
				add(m)
			default:
				k := rapid.IntRange(0, len(open)-1).Draw(t, "answers")
				call := open[k]
				open = append(open[:k], open[k+1:]...)
				// Up to twice the window: a result may be alone over it, and
				// be kept truncated.
				body := strings.Repeat("r", rapid.IntRange(0, 8*window).Draw(t, "result"))
				add(&transcript.Message{ID: id, Role: transcript.RoleToolResult, ToolCallID: call, ToolName: "read", Content: transcript.TextContent(body)})
			}
		}
		model := policy.Model{Provider: "p", ID: "m", ContextWindow: window}
		e, err := policy.New(policy.Setup{SessionID: "s", Model: model, Config: cfg, History: history})
		require.NoError(t, err)
		p := &player{e: e, now: t0}
		promptIn(text("prompt"))(p)
		require.NoError(t, p.promptErr)
		if p.request != nil { // the check before the prompt compacted
			requireToolPairsKept(t, p.request)
			p.request = nil
			summarized("s")(p)
		}
		if p.turnDone {
			return
		}
		// The run calls tools before it overflows: the call and its results
		// are then among what every compaction keeps.
		for i := range rapid.IntRange(0, 3).Draw(t, "run calls") {
			call := okAnswer("calling")
			call.ID, call.StopReason = fmt.Sprintf("run-call-%d", i), transcript.StopReasonToolUse
			call.Content = append(call.Content, transcript.Block{Type: transcript.BlockToolCall, ID: fmt.Sprintf("run-c%d", i), Name: "read", Arguments: json.RawMessage(`{}`)})
			result := transcript.Message{ID: fmt.Sprintf("run-result-%d", i), Role: transcript.RoleToolResult, ToolCallID: fmt.Sprintf("run-c%d", i), ToolName: "read",
				Content: transcript.TextContent(strings.Repeat("r", rapid.IntRange(0, 8*window).Draw(t, "run result")))}
			for _, m := range []transcript.Message{call, result} {
				feed(events.MessageStart{Message: m}, events.MessageEnd{Message: m})(p)
			}
		}
		count := rapid.IntRange(window+1, 8*window).Draw(t, "count")
		reply(errorAnswer(fmt.Sprintf("prompt is too long: %d tokens > %d maximum", count, window)))(p)
		if p.request != nil {
			requireToolPairsKept(t, p.request)
			summarized("s")(p)
			if !p.turnDone {
				// The continuation: every result it holds follows its call,
				// and it fits, truncated results and all.
				requireToolPairsKept(t, &policy.SummaryRequest{Kept: p.runContext[1:]})
				require.Less(t, calibrated(e, p.runContext), window-cfg.Compaction.ReserveTokens+1)
			}
		}
	})
}

// requireToolPairsKept fails when a tool result kept answers a call cut.
func requireToolPairsKept(t *rapid.T, req *policy.SummaryRequest) {
	cut := map[string]bool{}
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls() {
			cut[c.ID] = true
		}
	}
	for _, m := range req.Kept {
		if m.Role == transcript.RoleToolResult && cut[m.ToolCallID] {
			t.Fatalf("tool result %s kept, its call %s cut", m.ID, m.ToolCallID)
		}
	}
	require.NotEmpty(t, req.Kept)
	require.NotEqual(t, transcript.RoleToolResult, req.Kept[0].Role, "the first message kept is no tool result")
}
