package history_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/transcript"
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
// for the documented tail repair (a last line cut short dropped, and the
// lines marked "more" of an append cut short before it, or a newline
// added), and a complete JSON value is never dropped; reopening it gives
// the same entries and changes nothing more; its tail reads; and it takes
// an append. (session's FuzzSessionOnFileHistory starts a session on it.)
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

	// The compaction's line with its index and offset (as written now),
	// and the file edited before it.
	compactionAt := len(validHistory) - len(lines[5])
	for _, at := range []int{compactionAt, compactionAt - 1, compactionAt + 7} {
		withOffset := strings.Replace(validHistory, `"tokensBefore":3}}`, fmt.Sprintf(`"tokensBefore":3},"index":5,"offset":%d}`, at), 1)
		f.Add([]byte(withOffset))
		f.Add([]byte(strings.Replace(withOffset, lines[2], "", 1)))
		f.Add([]byte(lines[0] + withOffset))
		f.Add([]byte("\n" + withOffset))
	}
	// A last line that is a complete JSON value but no entry, without its
	// newline and with it, and cut short.
	for _, last := range []string{
		`{"type":"branch","id":"b","timestamp":7}`,
		`{"type":"message","id":"b","timestamp":7,"message":{"id":"b","role":"user","content":[{"type":"audio"}],"timestamp":7}}`,
		`5`, `-1e9`, `[1,[2]]`, `null`, `true`, `{}`, `"s"`, `"` + strings.Repeat("x", 70000) + `"`, ` {} `,
	} {
		f.Add([]byte(validHistory + last))
		f.Add([]byte(validHistory + last + "\n"))
		f.Add([]byte(validHistory + last[:len(last)/2]))
	}
	// The lines of an append marked "more": whole, cut at a line's end, cut
	// short, or followed by a blank line.
	step := `{"type":"message","id":"s1","timestamp":7,"message":{"id":"s1","role":"user","content":"x","timestamp":7},"more":true}` + "\n" +
		`{"type":"removal","id":"s1","timestamp":7,"more":true}` + "\n" +
		`{"type":"removal","id":"user-1","timestamp":7}` + "\n"
	for cut := 0; cut <= len(step); cut += 11 {
		f.Add([]byte(validHistory + step[:cut]))
	}
	stepLines := strings.SplitAfter(step, "\n")
	f.Add([]byte(validHistory + stepLines[0] + stepLines[1]))
	f.Add([]byte(validHistory + stepLines[0] + stepLines[1] + "  \n"))
	f.Add([]byte(validHistory + stepLines[0] + "  "))
	f.Add([]byte(validHistory + strings.TrimSuffix(step, "\n")))
	f.Add([]byte(stepLines[0] + validHistory))

	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		h, err := history.OpenFileHistory(path)
		after, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		if err != nil {
			require.ErrorIs(t, err, history.ErrCorruptHistory)
			require.Contains(t, err.Error(), path)
			require.Contains(t, err.Error(), ": line ")
			require.Equal(t, data, after, "a refused file is left as it was")
			return
		}
		entries := readAll(t, h)
		require.NoError(t, h.Close())
		switch {
		case bytes.Equal(after, data):
		case len(data) > 0 && data[len(data)-1] != '\n' && bytes.Equal(after, append(bytes.Clone(data), '\n')):
			// A whole last entry got its newline back.
		case bytes.HasPrefix(data, after) && (len(after) == 0 || after[len(after)-1] == '\n'):
			// A last line cut short was dropped, and the lines of an
			// append cut short before it: each marked "more", or blank.
			dropped := bytes.Split(data[len(after):], []byte("\n"))
			torn := dropped[len(dropped)-1]
			require.False(t, json.Valid(torn) && !more(torn) && len(bytes.TrimSpace(torn)) > 0,
				"a complete JSON value dropped: %q", torn)
			for _, line := range dropped[:len(dropped)-1] {
				require.True(t, more(line) || len(bytes.TrimSpace(line)) == 0, "a complete line dropped: %q", line)
			}
			require.True(t, len(torn) > 0 || len(dropped) > 1)
		default:
			t.Fatalf("the file changed beyond its tail:\nbefore %q\nafter  %q", data, after)
		}

		h, err = history.OpenFileHistory(path)
		require.NoError(t, err, "reopening")
		require.Equal(t, entries, readAll(t, h), "reopening gives the same entries")
		again, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		require.Equal(t, after, again, "reopening changes nothing more")

		_, tail, err := h.Tail()
		require.NoError(t, err, "the tail of an accepted history reads")
		require.LessOrEqual(t, len(tail), len(entries))
		extra := transcript.Entry{Type: transcript.EntryRemoval, ID: "fuzz", Timestamp: 1}
		require.NoError(t, h.Append(extra))
		require.NoError(t, h.Close())
		h, err = history.OpenFileHistory(path)
		require.NoError(t, err, "reopening after an append")
		require.Equal(t, append(entries, extra), readAll(t, h))
		require.NoError(t, h.Close())
	})
}

// more tells whether line is a whole JSON object marked "more": a line of an
// append that goes on after it.
func more(line []byte) bool {
	var l struct {
		More bool `json:"more"`
	}
	return json.Unmarshal(line, &l) == nil && l.More
}
