package transcript_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentfsm/agentfsm/transcript"
)

// TruncateToolResult keeps the start of the text on a rune boundary and
// ends it with the marker counting what it cut, images included; a result
// that fits is returned as it is (issue 23 item 5).
func TestTruncateToolResult(t *testing.T) {
	r := transcript.Message{ID: "r", Role: transcript.RoleToolResult, ToolCallID: "c", ToolName: "read", ToolError: true,
		Content: []transcript.Block{transcript.TextBlock("héllo "), {Type: transcript.BlockImage, Data: "QUJD", MimeType: "image/png"}, transcript.TextBlock("world")}}
	got := transcript.TruncateToolResult(r, 2) // "hé" is 3 bytes: the cut falls inside é
	want := "h\n\n[... 10 more characters, and 1 image of this tool result truncated by compaction: it was too large to keep whole]"
	if got.Text() != want || len(got.Content) != 1 {
		t.Errorf("truncated to %q (%d blocks), want %q", got.Text(), len(got.Content), want)
	}
	if got.ID != "r" || got.ToolCallID != "c" || got.ToolName != "read" || !got.ToolError || got.Role != transcript.RoleToolResult {
		t.Errorf("fields changed: %+v", got)
	}
	if len(r.Content) != 3 {
		t.Error("the message given changed")
	}
	if got := transcript.TruncateToolResult(r, -5).Text(); !strings.HasPrefix(got, "\n\n[... 11 more characters, and 1 image") {
		t.Errorf("a negative keep keeps nothing: %q", got)
	}
	plain := transcript.Message{Role: transcript.RoleToolResult, Content: transcript.TextContent("short")}
	if got := transcript.TruncateToolResult(plain, 5); got.Text() != "short" {
		t.Errorf("a result that fits changed: %q", got.Text())
	}
	long := transcript.Message{Role: transcript.RoleToolResult, Content: transcript.TextContent(strings.Repeat("日本", 1000))}
	if got := transcript.TruncateToolResult(long, 100).Text(); !utf8.ValidString(got) || !strings.HasPrefix(got, strings.Repeat("日本", 16)+"日\n\n[... 1967 more characters") {
		t.Errorf("CJK cut: %q", got[:min(len(got), 120)])
	}
}

// A compaction entry's truncations name an entry and keep 0 bytes or more:
// one that does not is refused, saying which.
func TestCompactionEntryTruncationsAreChecked(t *testing.T) {
	entry := func(tr ...transcript.Truncation) transcript.Entry {
		return transcript.Entry{Type: transcript.EntryCompaction, ID: "compaction-3", Compaction: &transcript.Compaction{
			Reason: transcript.ReasonOverflow, Summary: "s", FirstKeptEntryID: "msg-1", Truncated: tr}}
	}
	if err := entry(transcript.Truncation{EntryID: "result-2", KeptChars: 0}).Validate(); err != nil {
		t.Errorf("valid entry refused: %v", err)
	}
	for _, bad := range []transcript.Truncation{{EntryID: "", KeptChars: 3}, {EntryID: "result-2", KeptChars: -1}} {
		err := entry(transcript.Truncation{EntryID: "result-1", KeptChars: 5}, bad).Validate()
		if err == nil || !strings.Contains(err.Error(), "truncated[1]") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
