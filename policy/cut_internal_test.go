package policy

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/agentfsm/agentfsm/transcript"
	"pgregory.net/rapid"
)

// A cut never separates a tool call from its result, even when other
// messages come between them (issue 13 item 1).
func TestCutKeepsToolCallWithResult(t *testing.T) {
	call := func(id string, calls ...string) transcript.Message {
		m := transcript.Message{ID: id, Role: transcript.RoleAssistant, Content: transcript.TextContent("x")}
		for _, c := range calls {
			m.Content = append(m.Content, transcript.Block{Type: transcript.BlockToolCall, ID: c, Name: "t", Arguments: json.RawMessage(`{}`)})
		}
		return m
	}
	result := func(id, call string) transcript.Message {
		return transcript.Message{ID: id, Role: transcript.RoleToolResult, ToolCallID: call, Content: transcript.TextContent("r")}
	}
	msgs := []transcript.Message{
		{ID: "u1", Role: transcript.RoleUser, Content: transcript.TextContent("q")},
		call("a1", "c1", "c2"),
		result("r1", "c1"),
		call("a2"), // an assistant message between a call and its result
		{ID: "u2", Role: transcript.RoleUser, Content: transcript.TextContent("steer")},
		result("r2", "c2"),
		call("a3"),
		// A history from before content blocks: the result names the message.
		{ID: "a4", Role: transcript.RoleAssistant, StopReason: "toolUse"},
		{ID: "u3", Role: transcript.RoleUser},
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
	if at := deeperCut(msgs, 1, 0, 0); at != 10 {
		t.Errorf("deeper cut: %d, want 10", at)
	}
}

// For random interleavings of user messages, assistant messages with tool
// calls and tool results, no valid cut point has a tool result at or after
// it answering a call before it, and every other user or assistant message
// is one (issue 13 item 1).
func TestCutPointsNeverSplitACall(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var msgs []transcript.Message
		var calls []string
		for i := range rapid.IntRange(0, 30).Draw(t, "n") {
			id := "m" + strconv.Itoa(i)
			switch rapid.IntRange(0, 2).Draw(t, "role") {
			case 0:
				msgs = append(msgs, transcript.Message{ID: id, Role: transcript.RoleUser})
			case 1:
				m := transcript.Message{ID: id, Role: transcript.RoleAssistant}
				for j := range rapid.IntRange(0, 2).Draw(t, "calls") {
					c := id + "-c" + strconv.Itoa(j)
					m.Content = append(m.Content, transcript.Block{Type: transcript.BlockToolCall, ID: c})
					calls = append(calls, c)
				}
				msgs = append(msgs, m)
			case 2:
				call := "none"
				if len(calls) > 0 && rapid.Bool().Draw(t, "answers") {
					call = rapid.SampledFrom(calls).Draw(t, "call")
				}
				msgs = append(msgs, transcript.Message{ID: id, Role: transcript.RoleToolResult, ToolCallID: call})
			}
		}
		valid := cutPoints(msgs)
		for i, ok := range valid {
			splits := false
			for _, r := range msgs[i:] {
				for _, m := range msgs[:i] {
					for _, c := range m.ToolCalls() {
						splits = splits || (r.Role == transcript.RoleToolResult && r.ToolCallID == c.ID)
					}
				}
			}
			want := msgs[i].Role != transcript.RoleToolResult && !splits
			if ok != want {
				t.Fatalf("cut point %d: %v, want %v", i, ok, want)
			}
		}
	})
}
