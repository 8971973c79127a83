package session_test

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

	"github.com/agentfsm/agentfsm/session"
)

var droppedNote = regexp.MustCompile(`^\[(\d+) earlier lines dropped\]$`)

// Digest after digest, each carrying the one before, a summary stays
// within MaxChars: the oldest lines go first, and the note counts every
// line dropped so far (issue item 23).
func TestDigestSummarizerStaysWithinMaxChars(t *testing.T) {
	d := session.DigestSummarizer{}
	prev := ""
	made := 0 // lines made by every digest so far
	for round := range 500 {
		var msgs []session.Message
		if prev != "" {
			msgs = append(msgs, session.Message{Role: session.RoleSummary, Content: session.TextContent(prev)})
		}
		for i := range 10 {
			n := round*10 + i
			msgs = append(msgs,
				session.Message{Role: session.RoleUser, Content: session.TextContent(fmt.Sprintf("question %d %s", n, strings.Repeat("q", 300)))},
				session.Message{Role: session.RoleAssistant, StopReason: "toolUse", Content: session.TextContent(fmt.Sprintf("answer %d", n))},
				session.Message{Role: session.RoleToolResult, Content: session.TextContent(fmt.Sprintf("result %d", n))})
		}
		made += 30
		sum, err := d.Summarize(context.Background(), session.SummaryRequest{Messages: msgs})
		require.NoError(t, err)
		again, _ := d.Summarize(context.Background(), session.SummaryRequest{Messages: msgs})
		require.Equal(t, sum, again, "deterministic")
		require.LessOrEqual(t, len(sum.Text), session.DefaultDigestChars, "round %d", round)

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
	msgs := []session.Message{
		{Role: session.RoleUser, Content: session.TextContent(strings.Repeat("é", 5000))},
		{Role: session.RoleAssistant, StopReason: "stop", Content: session.TextContent("fine")},
	}
	size := func(d session.DigestSummarizer, req session.SummaryRequest) string {
		req.Messages = msgs
		sum, err := d.Summarize(context.Background(), req)
		require.NoError(t, err)
		assert.True(t, utf8.ValidString(sum.Text))
		return sum.Text
	}
	assert.LessOrEqual(t, len(size(session.DigestSummarizer{MaxChars: 150}, session.SummaryRequest{MaxChars: 1000})), 150)
	assert.LessOrEqual(t, len(size(session.DigestSummarizer{MaxChars: 1000}, session.SummaryRequest{MaxChars: 150})), 150, "the request's smaller limit wins")
	// The header, then the note, then the newest line only.
	assert.Equal(t, "Summary of 2 earlier messages (1 from the user, 1 from the assistant, 0 tool results).\n[1 earlier lines dropped]\n- assistant (stop): fine",
		size(session.DigestSummarizer{MaxChars: 150}, session.SummaryRequest{}))
	// Even the header does not fit: cut short, between characters.
	tiny := size(session.DigestSummarizer{MaxChars: 12}, session.SummaryRequest{Instructions: strings.Repeat("é", 100)})
	assert.Equal(t, "Summary of 2", tiny)
	focus := size(session.DigestSummarizer{MaxChars: 100}, session.SummaryRequest{Instructions: strings.Repeat("é", 100)})
	assert.LessOrEqual(t, len(focus), 100)
	assert.True(t, strings.HasPrefix(focus, "Summary of 2 earlier messages"))
}

// An earlier summary written by another summarizer, one huge line, is
// dropped as a whole when it does not fit, and counted (issue item 23).
func TestDigestSummarizerDropsAForeignSummary(t *testing.T) {
	sum, err := session.DigestSummarizer{}.Summarize(context.Background(), session.SummaryRequest{Messages: []session.Message{
		{Role: session.RoleSummary, Content: session.TextContent(strings.Repeat("prose ", 1_000_000))},
		{Role: session.RoleUser, Content: session.TextContent("hello")},
	}})
	require.NoError(t, err)
	assert.Equal(t, "Summary of 2 earlier messages (1 from the user, 0 from the assistant, 0 tool results).\n[1 earlier lines dropped]\n- user: hello", sum.Text)
}

// The digest names the tools a message called, gives a tool result's tool
// and failure in brief, counts images, and leaves thinking out (issue 13
// item 1).
func TestDigestSummarizesBlocks(t *testing.T) {
	req := session.SummaryRequest{Messages: []session.Message{
		{Role: session.RoleUser, Content: []session.Block{session.TextBlock("what is in"), {Type: session.BlockImage, Data: "QUJD", MimeType: "image/png"}}},
		{Role: session.RoleAssistant, StopReason: "toolUse", Content: []session.Block{
			{Type: session.BlockThinking, Thinking: "SECRET REASONING", ThinkingSignature: "sig"},
			session.TextBlock("let me look"),
			{Type: session.BlockToolCall, ID: "c1", Name: "read", Arguments: []byte(`{"path":"a.go"}`)},
			{Type: session.BlockToolCall, ID: "c2", Name: "grep", Arguments: []byte(`{"q":"x"}`)},
		}},
		{Role: session.RoleToolResult, ToolCallID: "c1", ToolName: "read", Content: session.TextContent("package a")},
		{Role: session.RoleToolResult, ToolCallID: "c2", ToolName: "grep", ToolError: true, Content: session.TextContent("no match")},
	}}
	sum, err := session.DigestSummarizer{}.Summarize(context.Background(), req)
	require.NoError(t, err)
	assert.Contains(t, sum.Text, "- user: what is in [1 image]")
	assert.Contains(t, sum.Text, "- assistant (toolUse): let me look [called read] [called grep]")
	assert.Contains(t, sum.Text, "- tool result (read): package a")
	assert.Contains(t, sum.Text, "- tool result (grep) failed: no match")
	assert.NotContains(t, sum.Text, "SECRET")
	assert.NotContains(t, sum.Text, "a.go", "arguments are left out")
}
