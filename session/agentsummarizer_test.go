package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// fakeAgent answers one run with answer (or err), recording the request.
type fakeAgent struct {
	answer session.Message
	err    error
	block  bool
	got    []session.RunRequest
}

func (a *fakeAgent) Run(ctx context.Context, req session.RunRequest, emit func(session.Event)) error {
	a.got = append(a.got, req)
	if a.err != nil {
		return a.err
	}
	emit(session.AgentStart{})
	emit(session.TurnStart{})
	if a.block {
		<-ctx.Done()
		m := session.Message{Role: session.RoleAssistant, StopReason: "aborted", ErrorMessage: "Request was aborted"}
		emit(session.MessageEnd{Message: m})
		emit(session.AgentEnd{})
		return nil
	}
	emit(session.MessageStart{Message: a.answer})
	emit(session.MessageEnd{Message: a.answer})
	emit(session.TurnEnd{})
	emit(session.AgentEnd{Messages: []session.Message{a.answer}})
	return nil
}

func summaryAnswer(text string) session.Message {
	return session.Message{Role: session.RoleAssistant, StopReason: "stop", Content: session.TextContent(text)}
}

func toolCall(id, name, args string) session.Block {
	return session.Block{Type: session.BlockToolCall, ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// cutConversation is a cut with a previous summary, tool calls and
// thinking.
func cutConversation() []session.Message {
	return []session.Message{
		{Role: session.RoleSummary, Content: session.TextContent("## Goal\nPort the parser.\n\n<read-files>\nold.go\n</read-files>")},
		{Role: session.RoleUser, Content: session.TextContent("Fix the lexer bug in lex.go")},
		{Role: session.RoleAssistant, StopReason: "toolUse", Content: []session.Block{
			{Type: session.BlockThinking, Thinking: "SECRET-THOUGHT", ThinkingSignature: "c2ln"},
			session.TextBlock("Reading it first."),
			toolCall("t1", "read", `{"path":"lex.go"}`),
		}},
		{Role: session.RoleToolResult, ToolCallID: "t1", ToolName: "read", Content: session.TextContent("package lex " + strings.Repeat("x", 2000))},
		{Role: session.RoleAssistant, StopReason: "toolUse", Content: []session.Block{toolCall("t2", "edit", `{"path":"lex.go","old":"a","new":"b"}`)}},
		{Role: session.RoleToolResult, ToolCallID: "t2", ToolName: "edit", Content: session.TextContent("ok")},
	}
}

// issue 13 item 3
func TestAgentSummarizerPromptHasTranscriptSummaryAndInstructions(t *testing.T) {
	agent := &fakeAgent{answer: summaryAnswer("## Goal\nFix the lexer.")}
	model := session.Model{Provider: "p", ID: "m"}
	sum, err := session.AgentSummarizer{Agent: agent, Model: model}.Summarize(context.Background(), session.SummaryRequest{
		Messages: cutConversation(), Instructions: "keep the parser plan", MaxChars: 4000,
	})
	require.NoError(t, err)
	require.Len(t, agent.got, 1)
	req := agent.got[0]
	assert.Equal(t, model, req.Model)
	assert.Nil(t, req.Prompt)
	require.Len(t, req.Context, 1)
	assert.Equal(t, session.RoleUser, req.Context[0].Role)
	prompt := req.Context[0].Text()
	for _, want := range []string{
		"[User]: Fix the lexer bug in lex.go",
		"[Assistant]: Reading it first.",
		`read({"path":"lex.go"})`,
		"[Tool result read]: package lex",
		`edit({"path":"lex.go","old":"a","new":"b"})`,
		"<previous-summary>\n## Goal\nPort the parser.\n</previous-summary>",
		"keep the parser plan",
		// The bound less the file lists appended after the answer.
		"under " + strconv.Itoa(4000-len("\n\n<read-files>\nold.go\n</read-files>\n\n<modified-files>\nlex.go\n</modified-files>")) + " characters",
	} {
		assert.Contains(t, prompt, want)
	}
	assert.NotContains(t, prompt, "SECRET-THOUGHT", "thinking is left out")
	assert.NotContains(t, prompt, strings.Repeat("x", 600), "a tool result is in brief")
	assert.Equal(t, "## Goal\nFix the lexer.\n\n<read-files>\nold.go\n</read-files>\n\n<modified-files>\nlex.go\n</modified-files>", sum.Text)
	assert.Equal(t, session.SummaryDetails{ReadFiles: []string{"old.go"}, ModifiedFiles: []string{"lex.go"}}, sum.Details)
	raw, err := json.Marshal(sum.Details)
	require.NoError(t, err)
	assert.JSONEq(t, `{"readFiles":["old.go"],"modifiedFiles":["lex.go"]}`, string(raw))
}

// issue 13 item 3
func TestAgentSummarizerFailures(t *testing.T) {
	req := session.SummaryRequest{Messages: cutConversation(), MaxChars: 1000}
	errAnswer := session.Message{Role: session.RoleAssistant, StopReason: "error", ErrorMessage: "529 overloaded_error: Overloaded"}
	for name, agent := range map[string]*fakeAgent{
		"error message": {answer: errAnswer},
		"run error":     {err: errors.New("no key")},
		"empty answer":  {answer: summaryAnswer("  ")},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := session.AgentSummarizer{Agent: agent}.Summarize(context.Background(), req)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "session: "), err.Error())
		})
	}
	_, err := session.AgentSummarizer{Agent: &fakeAgent{answer: errAnswer}}.Summarize(context.Background(), req)
	assert.ErrorContains(t, err, "529 overloaded_error: Overloaded")
	_, err = session.AgentSummarizer{}.Summarize(context.Background(), req)
	assert.ErrorContains(t, err, "no Agent")
}

// issue 13 item 3
func TestAgentSummarizerCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		agent := &fakeAgent{block: true}
		ctx, cancel := context.WithCancelCause(context.Background())
		cause := errors.New("compaction aborted")
		time.AfterFunc(time.Second, func() { cancel(cause) })
		_, err := session.AgentSummarizer{Agent: agent}.Summarize(ctx, session.SummaryRequest{Messages: cutConversation()})
		assert.ErrorIs(t, err, cause)
		_, err = session.AgentSummarizer{Agent: agent}.Summarize(ctx, session.SummaryRequest{Messages: cutConversation()})
		assert.ErrorIs(t, err, cause, "an ended context makes no run")
		assert.Len(t, agent.got, 1)
	})
}

// issue 13 item 3
func TestAgentSummarizerMaxChars(t *testing.T) {
	long := strings.Repeat("é", 5000)
	agent := &fakeAgent{answer: summaryAnswer(long)}
	sum, err := session.AgentSummarizer{Agent: agent}.Summarize(context.Background(), session.SummaryRequest{Messages: cutConversation(), MaxChars: 301})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(sum.Text), 301)
	assert.True(t, strings.HasPrefix(sum.Text, "éé"), "the start is kept")
	assert.Contains(t, sum.Text, "<modified-files>\nlex.go\n</modified-files>", "the file lists stay")
	assert.True(t, utf8Valid(sum.Text))

	sum, err = session.AgentSummarizer{Agent: agent, MaxChars: 100}.Summarize(context.Background(), session.SummaryRequest{Messages: cutConversation()})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(sum.Text), 100, "the summarizer's own bound when the request has none")
	assert.Contains(t, agent.got[1].Context[0].Text(), "under ")

	sum, err = session.AgentSummarizer{Agent: agent}.Summarize(context.Background(), session.SummaryRequest{Messages: cutConversation()})
	require.NoError(t, err)
	assert.LessOrEqual(t, len(sum.Text), session.DefaultDigestChars, "the default bound")
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

// issue 13 item 3: an overflow compaction through a real session, the
// summary asked of the session's own (scripted) model.
func TestAgentSummarizerOverflowCompaction(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
			ok("first answer"), overflowCall(), ok("## Goal\nAnswer the questions."), ok("recovered"),
		}})
		sum := session.AgentSummarizer{Agent: agent, Model: scripted.DefaultModel}
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), smallKeep(), session.WithSummarizer(sum))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		warmUp(t, s)
		require.NoError(t, s.Prompt(context.Background(), "second question, long enough too"))
		assert.Equal(t, []string{"compaction_start overflow", "compaction_end ok willRetry=true"}, rec.recovery())
		msgs := s.Messages()
		require.NotEmpty(t, msgs)
		assert.Equal(t, session.RoleSummary, msgs[0].Role)
		assert.Equal(t, "## Goal\nAnswer the questions.", msgs[0].Text())
		assert.Equal(t, "recovered", msgs[len(msgs)-1].Text())
		assert.Zero(t, agent.Remaining())
	})
}

// issue 13 item 3: the summary's model failing fails the compaction.
func TestAgentSummarizerFailureFailsCompaction(t *testing.T) {
	bubble(t, func(t *testing.T) {
		agent := scripted.New(scripted.Script{Model: scripted.DefaultModel, Calls: []scripted.Call{
			ok("first answer"), overflowCall(), fail("529 overloaded_error: Overloaded"),
		}})
		s, err := session.New(agent, session.WithModel(scripted.DefaultModel), smallKeep(), session.WithSummarizer(session.AgentSummarizer{Agent: agent}))
		require.NoError(t, err)
		defer s.Close()
		rec := record(s)
		warmUp(t, s)
		require.ErrorIs(t, s.Prompt(context.Background(), "second question, long enough too"), session.ErrOverflow)
		assert.Equal(t, []string{"compaction_start overflow",
			`compaction_end failed "Context overflow recovery failed: session: the summary's model call failed: 529 overloaded_error: Overloaded"`}, rec.recovery())
	})
}
