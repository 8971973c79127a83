package rpc_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// A compaction that keeps a tool result truncated says so over the wire:
// the compact command's result and get_state's lastCompaction carry
// "truncated" (transcript.Compaction.Truncated), after the reference's
// fields, which stay as they were, byte for byte. Here a tool reads a
// result larger than the room a compaction leaves, the next call fails
// with a 503, and compact during the retry's wait keeps the call and its
// result, the result truncated.
func TestCompactResultSaysWhatItTruncated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef\n", 50000) // 850,000 characters: more than the room
		sv := serve(t, []scripted.Call{
			{StopReason: "stop", Text: "first answer"},
			{StopReason: transcript.StopReasonToolUse, Content: []transcript.Block{
				{Type: transcript.BlockToolCall, ID: "call-1", Name: "read", Arguments: []byte(`{"path":"big.log"}`)},
			}, ToolResults: []scripted.ToolResult{{Content: transcript.TextContent(big)}}},
			{StopReason: "error", ErrorMessage: "503 Service Unavailable"},
		})
		sv.send(t, `{"type":"prompt","message":"first question"}`+"\n")
		sv.until(t, "turn_settled")
		sv.send(t, `{"type":"prompt","message":"read big.log"}`+"\n")
		sv.until(t, "auto_retry_start")
		time.Sleep(time.Second) // within the 2 s wait
		sv.send(t, `{"id":"c","type":"compact"}`+"\n")
		var line string
		for range 100 {
			l, err := sv.out.ReadString('\n')
			require.NoError(t, err)
			if strings.Contains(l, `"command":"compact"`) {
				line = l
				break
			}
		}
		// The reference's fields first, as they were; then ours.
		re := regexp.MustCompile(`^\{"id":"c","type":"response","command":"compact","success":true,"data":\{"summary":".*","firstKeptEntryId":"[^"]+","tokensBefore":\d+,"tokensAfter":\d+,"truncated":\[\{"entryId":"([^"]+)","keptChars":(\d+)\}\]\}\}\n$`)
		m := re.FindStringSubmatch(line)
		require.NotNil(t, m, "the compact response: %.300s", line)
		sv.send(t, `{"id":"s","type":"get_state"}`+"\n")
		var state struct {
			Data struct {
				LastCompaction json.RawMessage `json:"lastCompaction"`
			} `json:"data"`
		}
		for range 100 {
			l, err := sv.out.ReadString('\n')
			require.NoError(t, err)
			if strings.Contains(l, `"command":"get_state"`) {
				require.NoError(t, json.Unmarshal([]byte(l), &state))
				break
			}
		}
		assert.Regexp(t, `^\{"reason":"manual","tokensBefore":\d+,"tokensAfter":\d+,"truncated":\[\{"entryId":"`+regexp.QuoteMeta(m[1])+`","keptChars":`+m[2]+`\}\]\}$`,
			string(state.Data.LastCompaction))
	})
}
