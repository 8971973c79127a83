package session_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/internal/sizes"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// issue 23 item 5, through a session and a history file: a tool reads a
// result larger than the window and the next call overflows; the
// compaction keeps the call and its result, truncated with the marker, and
// the turn recovers. The file keeps the result whole, and a session
// reopened on it holds the same runtime context, the result truncated.
func TestToolResultOverTheWindowTruncatedAndReopened(t *testing.T) {
	bubble(t, func(t *testing.T) {
		model := policy.Model{Provider: "scripted", ID: "small", ContextWindow: 30000}
		path := filepath.Join(t.TempDir(), "h.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		agent := bigToolResultAgent(model)
		s, err := session.New(agent, session.WithModel(model), session.WithHistory(h))
		require.NoError(t, err)
		rec := record(s)
		require.NoError(t, s.Prompt(context.Background(), "read big.log"))
		assert.Equal(t, []string{"compaction_start overflow", "compaction_end ok willRetry=true"}, rec.recovery())
		live := s.Messages()
		var result *transcript.Message
		for i, m := range live {
			if m.Role == transcript.RoleToolResult {
				result = &live[i]
				require.Greater(t, i, 0)
				assert.Equal(t, "call-1", live[i-1].ToolCalls()[0].ID, "kept after its call")
			}
		}
		require.NotNil(t, result)
		assert.Contains(t, result.Text(), "of this tool result truncated by compaction: it was too large to keep whole]")
		assert.Less(t, sizes.Tokens(live...), 30000-policy.DefaultConfig().Compaction.ReserveTokens)
		require.NoError(t, s.Close())
		require.NoError(t, h.Close())

		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"truncated":[{"entryId":"`+result.ID+`","keptChars":`)
		assert.Equal(t, 1, strings.Count(string(raw), strings.Repeat("0123456789abcdef\\n", 20000)), "the file keeps the result whole")

		h2, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h2.Close()
		s2, err := session.New(scripted.New(scripted.Script{Model: model}), session.WithModel(model), session.WithHistory(h2))
		require.NoError(t, err)
		defer s2.Close()
		assert.Equal(t, live, s2.Messages(), "reopened, the same runtime context")
	})
}

// TestCompactionResultIsTheSubscribers: the result an AutoCompactionEnd
// hands a subscriber is its own to change: the session's record of the
// tool results the compaction kept truncated (LastCompactionTruncated,
// get_state's lastCompaction.truncated) stays as it was. The result
// shared its Truncated with that record.
func TestCompactionResultIsTheSubscribers(t *testing.T) {
	bubble(t, func(t *testing.T) {
		model := policy.Model{Provider: "scripted", ID: "small", ContextWindow: 30000}
		agent := bigToolResultAgent(model)
		s, err := session.New(agent, session.WithModel(model))
		require.NoError(t, err)
		defer s.Close()
		s.Subscribe(func(ev events.Event) {
			if end, ok := ev.(events.AutoCompactionEnd); ok && end.Result != nil {
				for i := range end.Result.Truncated {
					end.Result.Truncated[i] = transcript.Truncation{EntryID: "changed by a subscriber", KeptChars: -1}
				}
			}
		})
		require.NoError(t, s.Prompt(context.Background(), "read big.log"))
		synctest.Wait()
		_, truncated := s.LastCompactionTruncated()
		require.Len(t, truncated, 1)
		assert.NotEqual(t, "changed by a subscriber", truncated[0].EntryID)
		assert.Positive(t, truncated[0].KeptChars)
	})
}

// bigToolResultAgent answers "read big.log" with a tool call whose result
// (340,000 characters, 85,000 tokens) overflows model's window of 30,000:
// the next call fails on it, the summary of the compaction comes, and the
// retried call answers.
func bigToolResultAgent(model policy.Model) *scripted.Agent {
	big := strings.Repeat("0123456789abcdef\n", 20000)
	return scripted.New(scripted.Script{Model: model, Calls: []scripted.Call{
		{StopReason: transcript.StopReasonToolUse, Content: []transcript.Block{
			transcript.TextBlock("reading it"),
			{Type: transcript.BlockToolCall, ID: "call-1", Name: "read", Arguments: []byte(`{"path":"big.log"}`)},
		}, ToolResults: []scripted.ToolResult{{Content: transcript.TextContent(big)}}},
		fail("prompt is too long: 90000 tokens > 30000 maximum"),
		ok("## Goal\nread big.log"), // the summary
		ok("the log is long"),
	}})
}
