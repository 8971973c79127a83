package policy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"slices"
	"strconv"
	"testing"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/transcript"
	"pgregory.net/rapid"
)

// Estimates count every block: text and thinking characters, a tool
// call's name and arguments, and an image whose dimensions are unknown as
// sizes.MaxImageTokens; signatures and image data are not counted (issue 13
// item 1).
func TestEstimateTokensCountsEveryBlock(t *testing.T) {
	m := transcript.Message{Role: transcript.RoleAssistant, Content: []transcript.Block{
		{Type: transcript.BlockText, Text: "abcd", TextSignature: "ignored"},
		{Type: transcript.BlockThinking, Thinking: "efgh", ThinkingSignature: "ignored"},
		{Type: transcript.BlockToolCall, ID: "c1", Name: "read", Arguments: json.RawMessage(`{"p":1}`)},
		{Type: transcript.BlockImage, Data: "aWdub3JlZA==", MimeType: "image/png"},
	}, ErrorMessage: "err"}
	chars := 4 + 4 + len("read") + len(`{"p":1}`) + 4*sizes.MaxImageTokens + 3
	if got, want := sizes.Message(m), (chars+3)/4; got != want {
		t.Errorf("estimate %d, want %d", got, want)
	}
}

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

// An image counts at its provider's token cost, not its base64 length
// (issue 23 item 5): (width × height) / 750 tokens rounded up, scaled to
// 1,568 pixels on the long edge, at most 1,600; 1,600 when its data gives
// no dimensions.
func TestImageCountsAtTheProvidersCost(t *testing.T) {
	encode := func(w, h int, enc func(*bytes.Buffer, image.Image) error) string {
		var buf bytes.Buffer
		if err := enc(&buf, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	pngOf := func(b *bytes.Buffer, m image.Image) error { return png.Encode(b, m) }
	jpegOf := func(b *bytes.Buffer, m image.Image) error { return jpeg.Encode(b, m, nil) }
	gifOf := func(b *bytes.Buffer, m image.Image) error { return gif.Encode(b, m, nil) }
	cases := []struct {
		name, data string
		want       int
	}{
		{"png 1000×500", encode(1000, 500, pngOf), 667},
		{"jpeg 200×150", encode(200, 150, jpegOf), 40},
		{"gif 10×10", encode(10, 10, gifOf), 1},
		{"png 1568×700, the long edge's limit", encode(1568, 700, pngOf), 1464},
		{"png 4000×300, scaled to 1568×117.6", encode(4000, 300, pngOf), 246},
		{"png 1500×1500, capped", encode(1500, 1500, pngOf), 1600},
		{"no data", "", 1600},
		{"not an image", base64.StdEncoding.EncodeToString([]byte("not an image at all")), 1600},
		{"not base64", "%%%%", 1600},
	}
	for _, c := range cases {
		img := transcript.Message{Role: transcript.RoleUser, Content: []transcript.Block{{Type: transcript.BlockImage, Data: c.data, MimeType: "image/png"}}}
		if got := sizes.Tokens(img); got != c.want {
			t.Errorf("%s: %d tokens, want %d (base64 of %d characters)", c.name, got, c.want, len(c.data))
		}
	}
}
