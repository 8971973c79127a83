package policy_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/transcript"
)

var droppedNote = regexp.MustCompile(`^\[(\d+) earlier lines dropped\]$`)

// Digest after digest, each carrying the one before, a summary stays
// within MaxChars: the oldest lines go first, and the note counts every
// line dropped so far (issue item 23).
func TestDigestSummarizerStaysWithinMaxChars(t *testing.T) {
	d := policy.DigestSummarizer{}
	prev := ""
	made := 0 // lines made by every digest so far
	for round := range 500 {
		var msgs []transcript.Message
		if prev != "" {
			msgs = append(msgs, transcript.Message{Role: transcript.RoleSummary, Content: transcript.TextContent(prev)})
		}
		for i := range 10 {
			n := round*10 + i
			msgs = append(msgs,
				transcript.Message{Role: transcript.RoleUser, Content: transcript.TextContent(fmt.Sprintf("question %d %s", n, strings.Repeat("q", 300)))},
				transcript.Message{Role: transcript.RoleAssistant, StopReason: "toolUse", Content: transcript.TextContent(fmt.Sprintf("answer %d", n))},
				transcript.Message{Role: transcript.RoleToolResult, Content: transcript.TextContent(fmt.Sprintf("result %d", n))})
		}
		made += 30
		sum, err := d.Summarize(context.Background(), policy.SummaryRequest{Messages: msgs})
		require.NoError(t, err)
		again, _ := d.Summarize(context.Background(), policy.SummaryRequest{Messages: msgs})
		require.Equal(t, sum, again, "deterministic")
		require.LessOrEqual(t, len(sum.Text), sizes.DigestChars, "round %d", round)

		lines := strings.Split(sum.Text, "\n")
		require.True(t, strings.HasPrefix(lines[0], "Summary of "))
		body, dropped := lines[1:], 0
		if m := droppedNote.FindStringSubmatch(lines[1]); m != nil {
			dropped, _ = strconv.Atoi(m[1])
			body = lines[2:]
		}
		assert.Equal(t, made, dropped+len(body), "round %d: every line is kept or counted as dropped", round)
		assert.Equal(t, fmt.Sprintf("- tool result: result %d", round*10+9), body[len(body)-1], "the newest line is kept")
		for _, l := range body {
			require.True(t, strings.HasPrefix(l, "- "), "round %d: a carried line is kept as it was: %q", round, l)
		}
		prev = sum.Text
	}
}

func TestDigestSummarizerLimits(t *testing.T) {
	msgs := []transcript.Message{
		{Role: transcript.RoleUser, Content: transcript.TextContent(strings.Repeat("é", 5000))},
		{Role: transcript.RoleAssistant, StopReason: "stop", Content: transcript.TextContent("fine")},
	}
	size := func(d policy.DigestSummarizer, req policy.SummaryRequest) string {
		req.Messages = msgs
		sum, err := d.Summarize(context.Background(), req)
		require.NoError(t, err)
		assert.True(t, utf8.ValidString(sum.Text))
		return sum.Text
	}
	assert.LessOrEqual(t, len(size(policy.DigestSummarizer{MaxChars: 150}, policy.SummaryRequest{MaxChars: 1000})), 150)
	assert.LessOrEqual(t, len(size(policy.DigestSummarizer{MaxChars: 1000}, policy.SummaryRequest{MaxChars: 150})), 150, "the request's smaller limit wins")
	// The header, then the note, then the newest line only.
	assert.Equal(t, "Summary of 2 earlier messages (1 from the user, 1 from the assistant, 0 tool results).\n[1 earlier lines dropped]\n- assistant (stop): fine",
		size(policy.DigestSummarizer{MaxChars: 150}, policy.SummaryRequest{}))
	// Even the header does not fit: cut short, between characters.
	tiny := size(policy.DigestSummarizer{MaxChars: 12}, policy.SummaryRequest{Instructions: strings.Repeat("é", 100)})
	assert.Equal(t, "Summary of 2", tiny)
	focus := size(policy.DigestSummarizer{MaxChars: 100}, policy.SummaryRequest{Instructions: strings.Repeat("é", 100)})
	assert.LessOrEqual(t, len(focus), 100)
	assert.True(t, strings.HasPrefix(focus, "Summary of 2 earlier messages"))
}

// An earlier summary written by another summarizer, one huge line, is
// dropped as a whole when it does not fit, and counted (issue item 23).
func TestDigestSummarizerDropsAForeignSummary(t *testing.T) {
	sum, err := policy.DigestSummarizer{}.Summarize(context.Background(), policy.SummaryRequest{Messages: []transcript.Message{
		{Role: transcript.RoleSummary, Content: transcript.TextContent(strings.Repeat("prose ", 1_000_000))},
		{Role: transcript.RoleUser, Content: transcript.TextContent("hello")},
	}})
	require.NoError(t, err)
	assert.Equal(t, "Summary of 2 earlier messages (1 from the user, 0 from the assistant, 0 tool results).\n[1 earlier lines dropped]\n- user: hello", sum.Text)
}

// The digest names the tools a message called, gives a tool result's tool
// and failure in brief, counts images, and leaves thinking out (issue 13
// item 1).
func TestDigestSummarizesBlocks(t *testing.T) {
	req := policy.SummaryRequest{Messages: []transcript.Message{
		{Role: transcript.RoleUser, Content: []transcript.Block{transcript.TextBlock("what is in"), {Type: transcript.BlockImage, Data: "QUJD", MimeType: "image/png"}}},
		{Role: transcript.RoleAssistant, StopReason: "toolUse", Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "SECRET REASONING", ThinkingSignature: "sig"},
			transcript.TextBlock("let me look"),
			{Type: transcript.BlockToolCall, ID: "c1", Name: "read", Arguments: []byte(`{"path":"a.go"}`)},
			{Type: transcript.BlockToolCall, ID: "c2", Name: "grep", Arguments: []byte(`{"q":"x"}`)},
		}},
		{Role: transcript.RoleToolResult, ToolCallID: "c1", ToolName: "read", Content: transcript.TextContent("package a")},
		{Role: transcript.RoleToolResult, ToolCallID: "c2", ToolName: "grep", ToolError: true, Content: transcript.TextContent("no match")},
	}}
	sum, err := policy.DigestSummarizer{}.Summarize(context.Background(), req)
	require.NoError(t, err)
	assert.Contains(t, sum.Text, "- user: what is in [1 image]")
	assert.Contains(t, sum.Text, "- assistant (toolUse): let me look [called read] [called grep]")
	assert.Contains(t, sum.Text, "- tool result (read): package a")
	assert.Contains(t, sum.Text, "- tool result (grep) failed: no match")
	assert.NotContains(t, sum.Text, "SECRET")
	assert.NotContains(t, sum.Text, "a.go", "arguments are left out")
}

// The digest summarizer: earlier summaries carried over, one line per
// message, deterministic, and cancelled with its context.
func TestDigestSummarizer(t *testing.T) {
	req := policy.SummaryRequest{Messages: []transcript.Message{
		{Role: transcript.RoleSummary, Content: transcript.TextContent("Summary of 2 earlier messages.\n- user: hello")},
		{Role: transcript.RoleUser, Content: transcript.TextContent("please\nread   the file " + strings.Repeat("x", 300))},
		{Role: transcript.RoleAssistant, StopReason: "toolUse", Content: transcript.TextContent("reading")},
		{Role: transcript.RoleToolResult, Content: transcript.TextContent("42 lines")},
		{Role: transcript.RoleAssistant, StopReason: "error", ErrorMessage: "503"},
	}}
	a, err := policy.DigestSummarizer{}.Summarize(context.Background(), req)
	require.NoError(t, err)
	b, _ := policy.DigestSummarizer{}.Summarize(context.Background(), req)
	assert.Equal(t, a, b, "deterministic")
	assert.Contains(t, a.Text, "\n- user: hello\n", "the earlier summary's lines are carried over")
	assert.NotContains(t, a.Text, "Summary of 2", "but not its header")
	assert.Contains(t, a.Text, "- user: please read the file xxx")
	assert.Contains(t, a.Text, "- assistant (toolUse): reading")
	assert.Contains(t, a.Text, "- tool result: 42 lines")
	assert.Contains(t, a.Text, "- error: 503")
	for _, line := range strings.Split(a.Text, "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 220)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = policy.DigestSummarizer{}.Summarize(ctx, req)
	assert.ErrorIs(t, err, context.Canceled)
}
