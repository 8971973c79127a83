package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentfsm/agentfsm/transcript"
)

// TestInspectGolden: the story of a history a chat session wrote (with
// recovery entries), as text, Mermaid and JSON, and of one written before
// recovery entries existed, which still opens and tells what its
// messages, removals and compactions show. Run with -update to rewrite.
func TestInspectGolden(t *testing.T) {
	cases := []struct{ file, format, golden string }{
		{"testdata/history-recovery.jsonl", "text", "testdata/inspect-recovery.txt"},
		{"testdata/history-recovery.jsonl", "mermaid", "testdata/inspect-recovery.mmd"},
		{"testdata/history-recovery.jsonl", "json", "testdata/inspect-recovery.json"},
		{"testdata/history-before-recovery.jsonl", "text", "testdata/inspect-before-recovery.txt"},
		{"testdata/history-before-recovery.jsonl", "mermaid", "testdata/inspect-before-recovery.mmd"},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, out, errOut := runCmd("", "inspect", "--format", c.format, c.file)
			require.Equal(t, 0, code, errOut)
			assert.Empty(t, errOut)
			if *updateInspect {
				require.NoError(t, os.WriteFile(c.golden, []byte(out), 0o644))
			}
			want, err := os.ReadFile(c.golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), out)
		})
	}
}

// TestInspectOlderHistoryStillOpens: a history of the version before
// recovery entries opens in this version's session code too (the file is
// kept in testdata as that version wrote it).
func TestInspectOlderHistoryStillOpens(t *testing.T) {
	data, err := os.ReadFile("testdata/history-before-recovery.jsonl")
	require.NoError(t, err)
	n := 0
	for line := range bytes.Lines(data) {
		var e transcript.Entry
		require.NoError(t, json.Unmarshal(line, &e))
		require.NoError(t, e.Validate())
		n++
	}
	assert.Equal(t, 23, n)
}

func writeHistory(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

const (
	userLine  = `{"type":"message","id":"user-1","timestamp":1700000000000,"message":{"id":"user-1","role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1700000000000}}`
	errLine   = `{"type":"message","id":"msg-2","timestamp":1700000000100,"message":{"id":"msg-2","role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded","timestamp":1700000000100}}`
	retryLine = `{"type":"recovery","id":"retry:msg-2","timestamp":1700000000100,"recovery":{"kind":"retry","attempt":1,"maxAttempts":3,"delayMs":2000,"class":"retryable","error":"529 overloaded"}}`
)

// TestInspectBadInput: usage errors exit 2; a file that cannot be read
// exits 1 naming it; lines that are not entries are named by file and
// line, passed over, and exit 1 after the story; a last line cut short is
// reported and the story stands (exit 0). Nothing panics.
func TestInspectBadInput(t *testing.T) {
	code, _, errOut := runCmd("", "inspect")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "which history file?")
	code, _, errOut = runCmd("", "inspect", "a", "b")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "one history file at a time, not 2")
	code, _, errOut = runCmd("", "inspect", "--format", "svg", "a")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown --format "svg" (want text, mermaid or json)`)
	code, _, _ = runCmd("", "inspect", "--colour", "a")
	assert.Equal(t, 2, code)

	missing := filepath.Join(t.TempDir(), "nope.jsonl")
	code, out, errOut := runCmd("", "inspect", missing)
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, missing)
	assert.Contains(t, errOut, "no such file")

	dir := t.TempDir()
	code, _, errOut = runCmd("", "inspect", dir)
	assert.Equal(t, 1, code)
	assert.Equal(t, "agentfsm inspect: "+dir+" is not a history file: it is a directory\n", errOut)

	p := writeHistory(t, userLine+"\n"+"garbage\n"+`{"type":"message","id":"x"}`+"\n"+`[1,2]`+"\n"+errLine+"\n"+retryLine+"\n")
	code, out, errOut = runCmd("", "inspect", p)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, p+":2: not JSON: ")
	assert.Contains(t, errOut, p+":3: not a history entry: a message entry needs a message and nothing else; the line is passed over")
	assert.Contains(t, errOut, p+":4: not a history entry: ")
	assert.Contains(t, out, "in 2s, attempt 1 of 3; retryable: 529 overloaded", "the story of the good lines is told")

	// A crash cut the last line short: reported, the story stands.
	p = writeHistory(t, userLine+"\n"+errLine+"\n"+retryLine[:40])
	code, out, errOut = runCmd("", "inspect", p)
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "agentfsm inspect: "+p+":3: the last line is cut short (a write interrupted by a crash; a session reopening the file drops it); the story stops before it\n", errOut)
	assert.Contains(t, out, "call failed")
	// A complete last line without its newline is read.
	p = writeHistory(t, userLine+"\n"+errLine+"\n"+retryLine)
	code, out, errOut = runCmd("", "inspect", p)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "in 2s")

	// Many bad lines: the first ten are named, the rest counted.
	p = writeHistory(t, strings.Repeat("nope\n", 25)+userLine+"\n")
	code, _, errOut = runCmd("", "inspect", p)
	assert.Equal(t, 1, code)
	assert.Equal(t, 11, strings.Count(errOut, "\n"), errOut)
	assert.Contains(t, errOut, "15 more lines are not entries")

	// An empty file is an empty story.
	p = writeHistory(t, "")
	code, out, _ = runCmd("", "inspect", p)
	assert.Equal(t, 0, code)
	assert.Equal(t, p+": 0 entries, 0 turns\n", out)
}

// TestInspectLongLineStreamed: a line over the limit is named and passed
// over; the lines after it are read.
func TestInspectLongLineStreamed(t *testing.T) {
	old := maxInspectLine
	maxInspectLine = 1 << 10
	t.Cleanup(func() { maxInspectLine = old })
	p := writeHistory(t, userLine+"\n"+`{"type":"message","text":"`+strings.Repeat("x", 4<<10)+`"}`+"\n"+errLine+"\n"+retryLine+"\n")
	code, out, errOut := runCmd("", "inspect", p)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, p+":2: a line longer than 0 MiB")
	assert.Contains(t, out, "in 2s, attempt 1 of 3")
}

// TestStoryBuilder: the builder's reading of entries, one kind at a time.
func TestStoryBuilder(t *testing.T) {
	msg := func(id string, m transcript.Message) transcript.Entry {
		m.ID = id
		return transcript.Entry{Type: transcript.EntryMessage, ID: id, Timestamp: 1000, Message: &m}
	}
	rec := func(id string, r transcript.Recovery) transcript.Entry {
		return transcript.Entry{Type: transcript.EntryRecovery, ID: id, Timestamp: 1000, Recovery: &r}
	}
	user := transcript.Message{Role: transcript.RoleUser, Content: transcript.TextContent("a prompt\nover two lines")}
	failed := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonError, ErrorMessage: "overloaded", HTTPStatus: 529}
	ok := transcript.Message{Role: transcript.RoleAssistant, StopReason: transcript.StopReasonStop}
	b := newStoryBuilder()
	for i, e := range []transcript.Entry{
		{Type: transcript.EntryCompaction, ID: "compaction-1", Timestamp: 900, Compaction: &transcript.Compaction{Reason: transcript.ReasonManual, TokensBefore: 900, FirstKeptEntryID: "m"}},
		msg("user-2", user),
		msg("msg-3", failed),
		rec("retry:msg-3", transcript.Recovery{Kind: transcript.RecoveryRetry, Attempt: 1, MaxAttempts: -1, DelayMs: 60000, ResetAt: 61000, Class: "usage_limit", Error: "limit", Credential: "a", CredentialSwitched: true, MaxElapsedMs: 120000, ElapsedMs: 1000}),
		{Type: transcript.EntryRemoval, ID: "msg-3", Timestamp: 1000},
		msg("msg-4", failed),
		rec("compactionFailed:msg-4", transcript.Recovery{Kind: transcript.RecoveryCompactionFailed, Reason: "overflow", Error: "no summary"}),
		rec("fallback:msg-4", transcript.Recovery{Kind: transcript.RecoveryFallback, From: "big", To: "small", Reason: "overloaded", Until: 301000}),
		rec("x:msg-4", transcript.Recovery{Kind: "somethingNew", Error: "e"}),
		rec("chainEnd:msg-4", transcript.Recovery{Kind: transcript.RecoveryChainEnd, Attempt: 1, Outcome: "exhausted", Limit: "elapsed"}),
		msg("user-5", user),
		msg("msg-6", failed), // no record: an older history's failed turn
		msg("user-7", user),
		msg("msg-8", failed),
		{Type: transcript.EntryRemoval, ID: "msg-8", Timestamp: 1000}, // an older history's retry
		msg("msg-9", ok),
	} {
		require.NoError(t, e.Validate())
		b.add(e, i+1)
	}
	st := b.finish()
	require.Len(t, st.Turns, 4)
	whats := func(tr *storyTurn) []string {
		var out []string
		for _, s := range tr.Steps {
			out = append(out, s.What+": "+s.Detail)
		}
		return out
	}
	assert.Equal(t, 0, st.Turns[0].N)
	assert.Equal(t, []string{"compaction: manual: 900 tokens, kept from m"}, whats(st.Turns[0]))
	assert.Equal(t, "a prompt over two lines", st.Turns[1].Prompt)
	assert.Equal(t, []string{
		"call failed: HTTP 529: overloaded",
		"credential switch: from a (usage limit): the retry goes at once on the next free credential",
		"wait for reset: until 00:01:01.000 (1m0s), attempt 1, 1s of 2m0s budget used; usage_limit: limit",
		"call failed: HTTP 529: overloaded",
		"compaction failed: overflow: no summary",
		"fallback: from big to small (overloaded), until 00:05:01.000",
		`somethingNew: {"kind":"somethingNew","error":"e"}`,
		"exhausted: after 1 retry, limit: retry.maxElapsedMs, the chain's time budget",
	}, whats(st.Turns[1]))
	assert.True(t, st.Turns[2].Failed, "a failed call neither removed nor answered ended the turn")
	assert.Equal(t, "turn failed", st.Turns[2].Steps[1].What)
	assert.False(t, st.Turns[3].Failed)
	assert.Equal(t, []string{"call failed: HTTP 529: overloaded", "retried: the failed call was removed and the turn went on (delay and class not recorded)", "answer: stop"}, whats(st.Turns[3]))
	assert.Equal(t, 16, st.Entries)
	assert.Equal(t, 5, st.Recovery)
}

// FuzzInspect: no input makes the reader or a renderer panic, and every
// story renders in each format.
func FuzzInspect(f *testing.F) {
	for _, seed := range []string{"", userLine + "\n" + errLine + "\n" + retryLine + "\n", "garbage\n", retryLine[:30], "{}\n[]\nnull\n\"s\"\n",
		`{"type":"recovery","id":"r","recovery":{"kind":"retry","attempt":-5,"delayMs":-9223372036854775808,"resetAt":9223372036854775807}}` + "\n"} {
		f.Add([]byte(seed))
	}
	if data, err := os.ReadFile("testdata/history-recovery.jsonl"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, os.WriteFile(p, data, 0o600))
		st, _, err := readStory(p, io.Discard)
		require.NoError(t, err)
		for _, render := range []func(io.Writer, string, *story) error{renderText, renderMermaid, renderJSON} {
			var out bytes.Buffer
			require.NoError(t, render(&out, p, st))
		}
		var out bytes.Buffer
		require.NoError(t, renderMermaid(&out, p, st))
		for line := range strings.Lines(out.String()) {
			if body, ok := strings.CutPrefix(line, "        "); ok {
				assert.Equal(t, 1, strings.Count(body, " : "), "one period, one event: %q", line)
				assert.Equal(t, 1, strings.Count(body, ":"), "no colon but the separator: %q", line)
			}
		}
	})
}
