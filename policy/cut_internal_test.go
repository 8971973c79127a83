package policy

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// Estimates count every block: text and thinking characters, a tool
// call's name and arguments, and an image as 4,800 characters; signatures
// and image data are not counted (issue 13 item 1).
func TestEstimateTokensCountsEveryBlock(t *testing.T) {
	m := Message{Role: RoleAssistant, Content: []Block{
		{Type: BlockText, Text: "abcd", TextSignature: "ignored"},
		{Type: BlockThinking, Thinking: "efgh", ThinkingSignature: "ignored"},
		{Type: BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"p":1}`)},
		{Type: BlockImage, Data: "aWdub3JlZA==", MimeType: "image/png"},
	}, ErrorMessage: "err"}
	chars := 4 + 4 + len("read") + len(`{"p":1}`) + imageChars + 3
	if got, want := estimateTokens(m), (chars+3)/4; got != want {
		t.Errorf("estimate %d, want %d", got, want)
	}
}

// A cut never separates a tool call from its result, even when other
// messages come between them (issue 13 item 1).
func TestCutKeepsToolCallWithResult(t *testing.T) {
	call := func(id string, calls ...string) Message {
		m := Message{ID: id, Role: RoleAssistant, Content: TextContent("x")}
		for _, c := range calls {
			m.Content = append(m.Content, Block{Type: BlockToolCall, ID: c, Name: "t", Arguments: json.RawMessage(`{}`)})
		}
		return m
	}
	result := func(id, call string) Message {
		return Message{ID: id, Role: RoleToolResult, ToolCallID: call, Content: TextContent("r")}
	}
	msgs := []Message{
		{ID: "u1", Role: RoleUser, Content: TextContent("q")},
		call("a1", "c1", "c2"),
		result("r1", "c1"),
		call("a2"), // an assistant message between a call and its result
		{ID: "u2", Role: RoleUser, Content: TextContent("steer")},
		result("r2", "c2"),
		call("a3"),
		// A history from before content blocks: the result names the message.
		{ID: "a4", Role: RoleAssistant, StopReason: "toolUse"},
		{ID: "u3", Role: RoleUser},
		result("r3", "a4"),
		call("a5"),
	}
	want := []bool{true, true, false, false, false, false, true, true, false, false, true}
	if got := cutPoints(msgs); !slices.Equal(got, want) {
		t.Errorf("cut points %v, want %v", got, want)
	}
	if at, ok := nextCutPoint(msgs, 2); !ok || at != 6 {
		t.Errorf("next cut point after the call: %d %v, want 6", at, ok)
	}
	if at := deeperCut(msgs, 1, 0); at != 10 {
		t.Errorf("deeper cut: %d, want 10", at)
	}
}

// For random interleavings of user messages, assistant messages with tool
// calls and tool results, no valid cut point has a tool result at or after
// it answering a call before it, and every other user or assistant message
// is one (issue 13 item 1).
func TestCutPointsNeverSplitACall(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var msgs []Message
		var calls []string
		for i := range rapid.IntRange(0, 30).Draw(t, "n") {
			id := "m" + strconv.Itoa(i)
			switch rapid.IntRange(0, 2).Draw(t, "role") {
			case 0:
				msgs = append(msgs, Message{ID: id, Role: RoleUser})
			case 1:
				m := Message{ID: id, Role: RoleAssistant}
				for j := range rapid.IntRange(0, 2).Draw(t, "calls") {
					c := id + "-c" + strconv.Itoa(j)
					m.Content = append(m.Content, Block{Type: BlockToolCall, ID: c})
					calls = append(calls, c)
				}
				msgs = append(msgs, m)
			case 2:
				call := "none"
				if len(calls) > 0 && rapid.Bool().Draw(t, "answers") {
					call = rapid.SampledFrom(calls).Draw(t, "call")
				}
				msgs = append(msgs, Message{ID: id, Role: RoleToolResult, ToolCallID: call})
			}
		}
		valid := cutPoints(msgs)
		for i, ok := range valid {
			splits := false
			for _, r := range msgs[i:] {
				for _, m := range msgs[:i] {
					for _, c := range m.ToolCalls() {
						splits = splits || (r.Role == RoleToolResult && r.ToolCallID == c.ID)
					}
				}
			}
			want := msgs[i].Role != RoleToolResult && !splits
			if ok != want {
				t.Fatalf("cut point %d: %v, want %v", i, ok, want)
			}
		}
	})
}
