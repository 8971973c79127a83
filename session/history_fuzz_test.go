package session_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

// FuzzOpenFileHistory opens arbitrary bytes as a history file. It must
// never panic. A refusal is ErrCorruptHistory naming the file and the line,
// and leaves the file as it was. An accepted file is left as it was but
// for the documented tail repair (a last line without its newline dropped,
// or a newline added); reopening it gives the same entries and changes
// nothing more; it takes an append; and a session starts on it.
func FuzzOpenFileHistory(f *testing.F) {
	f.Add([]byte(validHistory))
	f.Add([]byte(blocksHistory))
	f.Add([]byte(""))
	f.Add([]byte("\n\n  \n"))
	f.Add([]byte(strings.ReplaceAll(validHistory, "\n", "\r\n")))
	f.Add([]byte(strings.TrimSuffix(validHistory, "\n")))
	f.Add([]byte(validHistory + "   "))
	f.Add([]byte(validHistory + "\u00a0")) // blank to bytes.TrimSpace, not to JSON
	for cut := 1; cut < len(validHistory); cut += 13 {
		f.Add([]byte(validHistory[:cut]))
	}
	lines := strings.SplitAfter(validHistory, "\n")
	f.Add([]byte(lines[0] + lines[1][:40] + "\n" + lines[2]))
	f.Add([]byte(lines[0] + `{"type":"removal","id":"","timestamp":3}` + "\n"))
	f.Add([]byte(lines[0] + `{"type":"message","id":"x","timestamp":3,"message":{"id":"y"}}` + "\n"))
	f.Add([]byte(lines[0] + `{"type":"removal","id":"a"}}` + "\n"))
	// A compaction's index, as written now, and indexes that do not add up.
	for _, index := range []string{`5`, `99`, `-3`, `0`, `"x"`, `1e30`} {
		withIndex := strings.Replace(validHistory, `"tokensBefore":3}}`, `"tokensBefore":3},"index":`+index+`}`, 1)
		f.Add([]byte(withIndex))
		f.Add([]byte(withIndex + lines[0]))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		h, err := session.OpenFileHistory(path)
		after, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		if err != nil {
			require.ErrorIs(t, err, session.ErrCorruptHistory)
			require.Contains(t, err.Error(), path)
			require.Contains(t, err.Error(), ": line ")
			require.Equal(t, data, after, "a refused file is left as it was")
			return
		}
		entries := readAll(t, h)
		require.NoError(t, h.Close())
		lastNewline := bytes.LastIndexByte(data, '\n')
		switch {
		case bytes.Equal(after, data):
		case len(data) > 0 && data[len(data)-1] != '\n' && bytes.Equal(after, append(bytes.Clone(data), '\n')):
			// A whole last entry got its newline back.
		case bytes.Equal(after, data[:lastNewline+1]):
			// A cut-short last line was dropped.
		default:
			t.Fatalf("the file changed beyond its tail:\nbefore %q\nafter  %q", data, after)
		}

		h, err = session.OpenFileHistory(path)
		require.NoError(t, err, "reopening")
		require.Equal(t, entries, readAll(t, h), "reopening gives the same entries")
		again, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		require.Equal(t, after, again, "reopening changes nothing more")

		s, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
		require.NoError(t, err, "a session starts on an accepted history")
		require.NoError(t, s.Close())
		extra := session.Entry{Type: session.EntryRemoval, ID: "fuzz", Timestamp: 1}
		require.NoError(t, h.Append(extra))
		require.NoError(t, h.Close())
		h, err = session.OpenFileHistory(path)
		require.NoError(t, err, "reopening after an append")
		require.Equal(t, append(entries, extra), readAll(t, h))
		require.NoError(t, h.Close())
	})
}
