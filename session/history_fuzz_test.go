package session_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/scripted"
)

// validHistory is a history file with an entry of every type.
var validHistory = strings.Join([]string{
	`{"type":"message","id":"user-1","timestamp":1,"message":{"id":"user-1","role":"user","text":"hi","timestamp":1}}`,
	`{"type":"message","id":"call-1","timestamp":2,"message":{"id":"call-1","role":"assistant","stopReason":"error","errorMessage":"503 Service Unavailable","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3},"provider":"p","model":"m","timestamp":2,"httpStatus":503,"headers":{"retry-after":"2"}}}`,
	`{"type":"removal","id":"call-1","timestamp":3}`,
	`{"type":"message","id":"call-2","timestamp":4,"message":{"id":"call-2","role":"assistant","text":"reading","stopReason":"toolUse","timestamp":4}}`,
	`{"type":"message","id":"tool-call-2","timestamp":5,"message":{"id":"tool-call-2","role":"toolResult","text":"result","toolCallId":"call-2","timestamp":5}}`,
	`{"type":"compaction","id":"compaction-6","timestamp":6,"compaction":{"reason":"manual","summary":"s","firstKeptEntryId":"call-2","tokensBefore":3}}`,
}, "\n") + "\n"

// blocksHistory is a history file whose messages hold content blocks of
// every kind.
var blocksHistory = strings.Join([]string{
	`{"type":"message","id":"user-1","timestamp":1,"message":{"id":"user-1","role":"user","content":[{"type":"text","text":"look"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}],"timestamp":1}}`,
	`{"type":"message","id":"msg-2","timestamp":2,"message":{"id":"msg-2","role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"c2ln"},{"type":"thinking","thinking":"b3A=","redacted":true},{"type":"text","text":"reading","textSignature":"dA=="},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"<a>&b","n":[1,2.50,{"x":null}]}}],"stopReason":"toolUse","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}},"timestamp":2}}`,
	`{"type":"message","id":"msg-3","timestamp":3,"message":{"id":"msg-3","role":"toolResult","content":[{"type":"text","text":"no"}],"toolCallId":"t1","toolName":"read","isError":true,"timestamp":3}}`,
	`{"type":"message","id":"user-4","timestamp":4,"message":{"id":"user-4","role":"user","content":"plain","timestamp":4}}`,
}, "\n") + "\n"

// FuzzSessionOnFileHistory starts a session on arbitrary bytes opened as a
// history file (history's FuzzOpenFileHistory checks the file itself): on
// every file OpenFileHistory accepts, a session starts, holds a valid
// context, and closes.
func FuzzSessionOnFileHistory(f *testing.F) {
	f.Add([]byte(validHistory))
	f.Add([]byte(blocksHistory))
	f.Add([]byte(""))
	for cut := 1; cut < len(validHistory); cut += 13 {
		f.Add([]byte(validHistory[:cut]))
	}
	lines := strings.SplitAfter(validHistory, "\n")
	compactionAt := len(validHistory) - len(lines[5])
	for _, at := range []int{compactionAt, compactionAt - 1, compactionAt + 7} {
		withOffset := strings.Replace(validHistory, `"tokensBefore":3}}`, fmt.Sprintf(`"tokensBefore":3},"index":5,"offset":%d}`, at), 1)
		f.Add([]byte(withOffset))
		f.Add([]byte(strings.Replace(withOffset, lines[2], "", 1)))
	}
	f.Add([]byte(lines[0] + `{"type":"removal","id":"user-1","timestamp":7,"more":true}` + "\n" + lines[1]))

	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		h, err := history.OpenFileHistory(path)
		if err != nil {
			return // history's own fuzz target checks the refusal
		}
		defer h.Close()
		s, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
		require.NoError(t, err, "a session starts on an accepted history")
		for _, m := range s.Messages() {
			require.NoError(t, m.CheckContent(), "message %q", m.ID)
		}
		require.NoError(t, s.Close())
	})
}
