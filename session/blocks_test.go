package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/agentfsm/agentfsm/events"
	"github.com/agentfsm/agentfsm/history"
	"github.com/agentfsm/agentfsm/policy"
	"github.com/agentfsm/agentfsm/session"
	"github.com/agentfsm/agentfsm/session/rpc"
	"github.com/agentfsm/agentfsm/session/scripted"
	"github.com/agentfsm/agentfsm/transcript"
)

// A history file written before content blocks (text, an image count, a
// tool result's toolCallId naming the assistant message) still opens, and
// its runtime context reads into the new shape (issue 13 item 1).
func TestHistoryBeforeBlocksStillOpens(t *testing.T) {
	data, err := os.ReadFile("testdata/history-before-blocks.jsonl")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	entries := readAll(t, h)
	require.Len(t, entries, 9)
	assert.Equal(t, transcript.Message{ID: "tool-call-2", Role: transcript.RoleToolResult, ToolCallID: "call-2",
		Content: transcript.TextContent("result of: reading <a> & b"), Timestamp: 1796018689670}, *entries[4].Message)

	s, err := session.New(scripted.New(scripted.Script{}), session.WithHistory(h))
	require.NoError(t, err)
	defer s.Close()
	msgs := s.Messages()
	require.Len(t, msgs, 4)
	assert.Equal(t, transcript.RoleSummary, msgs[0].Role)
	assert.Equal(t, "Summary of 3 earlier messages.", msgs[0].Text())
	assert.Equal(t, "done", msgs[1].Text())
	assert.Equal(t, []transcript.Block{transcript.TextBlock("second question"), {Type: transcript.BlockImage}}, msgs[2].Content)
	assert.Equal(t, "second answer", msgs[3].Text())
	require.NoError(t, s.Prompt(context.Background(), "third"))
	assert.Equal(t, "ok", s.Messages()[5].Text())
}

// A scripted answer with thinking, a tool call and an image result goes
// through a retry and comes out, in the context and in history, as the
// script wrote it (issue 13 item 1).
func TestScriptedBlocksSurviveRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		args := json.RawMessage(`{"path":"<a>&b.go","opts":{"n":[1,2.50,null],"é":true}}`)
		call := scripted.Call{StopReason: "toolUse", Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "first look", ThinkingSignature: "c2ln"},
			{Type: transcript.BlockThinking, Thinking: "b3BhcXVl", Redacted: true},
			{Type: transcript.BlockText, Text: "reading", TextSignature: "dHh0"},
			{Type: transcript.BlockToolCall, ID: "t1", Name: "read", Arguments: args},
		}, ToolResults: []scripted.ToolResult{{Content: []transcript.Block{transcript.TextBlock("a picture"),
			{Type: transcript.BlockImage, Data: "iVBORw0KGgo=", MimeType: "image/png"}}, IsError: true}}}
		agent := scripted.New(scripted.Script{Calls: []scripted.Call{fail(service503), call, ok("done")}})
		var h history.MemoryHistory
		s, err := session.New(agent, session.WithHistory(&h))
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.Prompt(context.Background(), "look"))
		msgs := s.Messages()
		require.Len(t, msgs, 4)
		assert.Equal(t, call.Content, msgs[1].Content)
		assert.Equal(t, transcript.Message{ID: msgs[2].ID, Role: transcript.RoleToolResult, ToolCallID: "t1", ToolName: "read", ToolError: true,
			Content: call.ToolResults[0].Content, Timestamp: msgs[2].Timestamp}, msgs[2])
		checkRoundTrips(t, s, &h)
	})
}

// checkRoundTrips checks that each message of s's context survives JSON
// and that get_messages over RPC sends each as its own JSON.
// fataler is what the checks need of a test: a *testing.T or a *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func checkRoundTrips(t fataler, s *session.Session, h history.History) {
	msgs := s.Messages()
	for _, m := range msgs {
		b := encode(t, m)
		var back transcript.Message
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		if !assert.ObjectsAreEqual(m, back) {
			t.Fatalf("JSON round trip changed a message:\nwant %#v\ngot  %#v", m, back)
		}
	}
	var out bytes.Buffer
	in := strings.NewReader(`{"type":"get_messages","id":"1"}` + "\n")
	if err := rpc.Serve(context.Background(), s, in, &out); err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Data struct {
			Messages []json.RawMessage `json:"messages"`
		} `json:"data"`
	}
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, `"command":"get_messages"`) {
			if err := json.Unmarshal([]byte(line), &resp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(resp.Data.Messages) != len(msgs) {
		t.Fatalf("get_messages sent %d messages, want %d:\n%s", len(resp.Data.Messages), len(msgs), out.String())
	}
	for i, raw := range resp.Data.Messages {
		if want := encode(t, msgs[i]); !bytes.Equal(raw, want) {
			t.Fatalf("get_messages sent\n%s\nwant\n%s", raw, want)
		}
	}
}

// encode is a message's JSON as history and RPC write it.
func encode(t fataler, m transcript.Message) []byte {
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Generators of block-rich conversations.

var tricky = []string{"", "a", "<b>&amp;</b>", "é\u2028\u2029", "line\nbreak\ttab", `quote " and \ backslash`, "😀 日本語", "\x00\x1f"}

func genText(t *rapid.T, label string) string {
	if rapid.Bool().Draw(t, label+"Tricky") {
		return rapid.SampledFrom(tricky).Draw(t, label)
	}
	return rapid.StringN(0, 40, -1).Draw(t, label)
}

// genJSON is the compact JSON text of a random value, nested up to depth.
func genJSON(t *rapid.T, depth int) string {
	kind := rapid.IntRange(0, 5).Draw(t, "kind")
	if depth <= 0 {
		kind = rapid.IntRange(0, 3).Draw(t, "leaf")
	}
	switch kind {
	case 0:
		return rapid.SampledFrom([]string{"0", "-1", "2.50", "1e3", "-0.0", "12345678901234567890", "3.14159"}).Draw(t, "number")
	case 1:
		return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "literal")
	case 2, 3:
		return jsonString(genText(t, "string"))
	case 4:
		var items []string
		for range rapid.IntRange(0, 3).Draw(t, "items") {
			items = append(items, genJSON(t, depth-1))
		}
		return "[" + strings.Join(items, ",") + "]"
	}
	return genObject(t, depth-1)
}

func genObject(t *rapid.T, depth int) string {
	var fields []string
	for range rapid.IntRange(0, 4).Draw(t, "fields") {
		fields = append(fields, jsonString(genText(t, "key"))+":"+genJSON(t, depth))
	}
	return "{" + strings.Join(fields, ",") + "}"
}

// jsonString encodes s as encoding/json does, without HTML escaping.
func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

func genImage(t *rapid.T) transcript.Block {
	return transcript.Block{Type: transcript.BlockImage, Data: rapid.StringMatching(`[A-Za-z0-9+/]{0,16}={0,2}`).Draw(t, "data"),
		MimeType: rapid.SampledFrom([]string{"image/png", "image/jpeg", ""}).Draw(t, "mime")}
}

func genTextBlock(t *rapid.T) transcript.Block {
	b := transcript.TextBlock(genText(t, "text"))
	if rapid.Bool().Draw(t, "signed") {
		b.TextSignature = genText(t, "textSignature")
	}
	return b
}

// genAnswer is a scripted answer rich in blocks: a toolUse answer calls
// tools, whose results hold text and images.
func genAnswer(t *rapid.T, n int) scripted.Call {
	if rapid.IntRange(0, 4).Draw(t, "fails") == 0 {
		return fail(service503)
	}
	var content []transcript.Block
	calls := 0
	for range rapid.IntRange(0, 5).Draw(t, "blocks") {
		switch rapid.IntRange(0, 3).Draw(t, "blockType") {
		case 0:
			content = append(content, genTextBlock(t))
		case 1:
			b := transcript.Block{Type: transcript.BlockThinking, Thinking: genText(t, "thinking")}
			if rapid.Bool().Draw(t, "thinkingSigned") {
				b.ThinkingSignature = genText(t, "thinkingSignature")
			}
			b.Redacted = rapid.Bool().Draw(t, "redacted")
			content = append(content, b)
		case 2:
			calls++
			content = append(content, transcript.Block{Type: transcript.BlockToolCall, ID: "t" + strconv.Itoa(n) + "-" + strconv.Itoa(calls),
				Name: genText(t, "toolName"), Arguments: json.RawMessage(genObject(t, 3))})
		case 3:
			content = append(content, genImage(t))
		}
	}
	if calls == 0 {
		return scripted.Call{StopReason: "stop", Content: content}
	}
	c := scripted.Call{StopReason: "toolUse", Content: content}
	for range rapid.IntRange(0, calls).Draw(t, "results") {
		var rc []transcript.Block
		for range rapid.IntRange(0, 3).Draw(t, "resultBlocks") {
			if rapid.Bool().Draw(t, "resultImage") {
				rc = append(rc, genImage(t))
			} else {
				rc = append(rc, genTextBlock(t))
			}
		}
		c.ToolResults = append(c.ToolResults, scripted.ToolResult{Content: rc, IsError: rapid.Bool().Draw(t, "isError")})
	}
	return c
}

// For random block-rich conversations, retried and compacted, every block
// survives: the answers are in history as the script wrote them, each
// message survives JSON and get_messages over RPC byte for byte, a
// compaction never cuts between a tool call and its result, and a session
// reopened on the history file has the live runtime context (issue 13
// item 1).
func TestBlockRichConversationsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rapid.SyncTest(t, func(t *rapid.T) {
			dir, err := os.MkdirTemp("", "blocks")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			path := filepath.Join(dir, "h.jsonl")
			h, err := history.OpenFileHistory(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { h.Close() }()
			cfg := policy.DefaultConfig()
			cfg.Retry.BaseDelayMs = 10
			cfg.Compaction.KeepRecentTokens = rapid.IntRange(1, 3000).Draw(t, "keepRecentTokens")
			agent := scripted.New(scripted.Script{})
			s, err := session.New(agent, session.WithConfig(cfg), session.WithHistory(h))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			scripts := map[string][]transcript.Block{} // tool call ID → content of the message that made it
			for turn := range rapid.IntRange(1, 4).Draw(t, "turns") {
				for i := range rapid.IntRange(1, 3).Draw(t, "calls") {
					c := genAnswer(t, turn*10+i)
					for _, b := range c.Content {
						if b.Type == transcript.BlockToolCall {
							scripts[b.ID] = c.Content
						}
					}
					agent.Append(c)
				}
				if rapid.Bool().Draw(t, "compact") {
					_, _ = s.Compact(context.Background(), "")
				} else {
					_ = s.Prompt(context.Background(), genText(t, "prompt"))
				}
				checkPairs(t, s.Messages())
			}
			// Every scripted answer is in history as the script wrote it.
			for _, e := range readAll(t, h) {
				if m := e.Message; m != nil && m.Role == transcript.RoleAssistant {
					for _, c := range m.ToolCalls() {
						if !assert.ObjectsAreEqual(scripts[c.ID], m.Content) {
							t.Fatalf("message %s holds %#v, the script %#v", m.ID, m.Content, scripts[c.ID])
						}
					}
				}
			}
			checkRoundTrips(t, s, h)
			want := s.Messages()
			wantEntries := readAll(t, h)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if h, err = history.OpenFileHistory(path); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, h); !assert.ObjectsAreEqual(wantEntries, got) {
				t.Fatalf("reopened history differs:\nwant %#v\ngot  %#v", wantEntries, got)
			}
			if s, err = session.New(scripted.New(scripted.Script{}), session.WithConfig(cfg), session.WithHistory(h)); err != nil {
				t.Fatal(err)
			}
			if got := s.Messages(); !assert.ObjectsAreEqual(want, got) {
				t.Fatalf("reopened context differs:\nwant %#v\ngot  %#v", want, got)
			}
		})
	})
}

// checkPairs fails when a tool result of msgs has lost the tool call it
// answers: a compaction cut between them.
func checkPairs(t *rapid.T, msgs []transcript.Message) {
	calls := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls() {
			calls[c.ID] = true
		}
		if m.Role == transcript.RoleToolResult && !calls[m.ToolCallID] {
			t.Fatalf("tool result %s kept without its call %s: %v", m.ID, m.ToolCallID, messageIDs(msgs))
		}
	}
}

// A message whose blocks cannot be written (an unknown type, tool call
// arguments that are not a JSON object) is refused by either history,
// naming the block, and the file is left as it was (issue 13 item 1).
func TestHistoryRefusesBadBlocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	fh, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	defer fh.Close()
	require.NoError(t, fh.Append(msgEntry("a", "x")))
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	bad := []struct {
		block transcript.Block
		says  string
	}{
		{transcript.Block{Type: "audio"}, `block 1: unknown content block type "audio"`},
		{transcript.Block{Type: transcript.BlockToolCall, ID: "c", Arguments: json.RawMessage(`[1]`)}, `block 1: tool call "c": arguments are not a JSON object`},
		{transcript.Block{Type: transcript.BlockToolCall, ID: "c", Arguments: json.RawMessage(`{"a":`)}, `arguments are not a JSON object`},
	}
	for _, c := range bad {
		e := msgEntry("b", "y")
		e.Message.Content = append(e.Message.Content, c.block)
		for _, h := range []history.History{fh, &history.MemoryHistory{}} {
			err := h.Append(e)
			require.ErrorIs(t, err, transcript.ErrInvalidEntry)
			assert.ErrorContains(t, err, c.says)
		}
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

// A history line whose content is not blocks is a corrupt line, named
// (issue 13 item 1).
func TestHistoryWithBadContentIsCorrupt(t *testing.T) {
	for _, content := range []string{`[{"type":"audio"}]`, `5`, `[{"type":"toolCall","id":"c","arguments":"x"}]`} {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		line := `{"type":"message","id":"u","timestamp":1,"message":{"id":"u","role":"user","content":` + content + `,"timestamp":1}}`
		require.NoError(t, os.WriteFile(path, []byte(line+"\n"+line+"\n"), 0o600))
		_, err := history.OpenFileHistory(path)
		require.ErrorIs(t, err, history.ErrCorruptHistory, content)
		assert.ErrorContains(t, err, "line 1", content)
	}
}

// blocksAgent answers each run with its messages, as they are.
type blocksAgent struct{ msgs []transcript.Message }

func (a blocksAgent) Run(ctx context.Context, req session.RunRequest, emit func(events.Event)) error {
	emit(events.AgentStart{})
	emit(events.CallStart{})
	for _, m := range a.msgs {
		emit(events.MessageStart{Message: m})
		emit(events.MessageEnd{Message: m})
	}
	emit(events.CallEnd{})
	emit(events.AgentEnd{Messages: a.msgs})
	return nil
}

// An agent's message marked as string content that cannot be a string, or
// that is one empty text block, is kept in the form it reads back in, so a
// reopened session has the live context (issue 13 item 1).
func TestStringContentKeptAsItReadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := history.OpenFileHistory(path)
	require.NoError(t, err)
	agent := blocksAgent{msgs: []transcript.Message{
		{Role: transcript.RoleToolResult, StringContent: true, Content: []transcript.Block{transcript.TextBlock("a"), {Type: transcript.BlockImage}}},
		{Role: transcript.RoleToolResult, StringContent: true, Content: []transcript.Block{{Type: transcript.BlockText, Text: "s", TextSignature: "sig"}}},
		{Role: transcript.RoleToolResult, StringContent: true, Content: transcript.TextContent("")},
		{Role: transcript.RoleAssistant, StringContent: true, Content: transcript.TextContent("fine"), StopReason: "stop"},
	}}
	s, err := session.New(agent, session.WithHistory(h))
	require.NoError(t, err)
	require.NoError(t, s.Prompt(context.Background(), "go"))
	live := s.Messages()
	require.NoError(t, s.Close())
	require.NoError(t, h.Close())
	assert.False(t, live[1].StringContent)
	assert.False(t, live[2].StringContent)
	assert.Nil(t, live[3].Content)
	assert.True(t, live[4].StringContent)

	h, err = history.OpenFileHistory(path)
	require.NoError(t, err)
	defer h.Close()
	s, err = session.New(agent, session.WithHistory(h))
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, live, s.Messages())
}

// A session snapshotted in a backoff after a block-rich answer resumes, on
// its reopened history file, with every block (issue 13 item 1).
func TestSnapshotResumesWithBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		h, err := history.OpenFileHistory(path)
		require.NoError(t, err)
		call := scripted.Call{StopReason: "toolUse", Content: []transcript.Block{
			{Type: transcript.BlockThinking, Thinking: "plan", ThinkingSignature: "c2ln"},
			{Type: transcript.BlockToolCall, ID: "t1", Name: "read", Arguments: json.RawMessage(`{"q":"<é>","deep":{"a":[{}]}}`)},
		}, ToolResults: []scripted.ToolResult{{Content: []transcript.Block{{Type: transcript.BlockImage, Data: "QUJD", MimeType: "image/gif"}}}}}
		s, err := session.New(scripted.New(scripted.Script{Calls: []scripted.Call{call, fail(service503)}}), session.WithHistory(h))
		require.NoError(t, err)
		done := promptAsync(s, "hi")
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		snap, err := s.Snapshot()
		require.NoError(t, err)
		before := s.Messages()
		require.Len(t, before, 3, "the prompt, the call and its result; the failure was removed for the retry")
		require.NoError(t, s.Close())
		require.ErrorIs(t, <-done, policy.ErrAborted)
		require.NoError(t, h.Close())

		h, err = history.OpenFileHistory(path)
		require.NoError(t, err)
		defer h.Close()
		r, err := session.New(scripted.New(scripted.Script{Calls: []scripted.Call{ok("done")}}), session.WithHistory(h), session.WithSnapshot(snap))
		require.NoError(t, err)
		defer r.Close()
		assert.Equal(t, before, r.Messages())
		assert.Equal(t, call.Content, r.Messages()[1].Content)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		assert.Equal(t, "done", r.Messages()[3].Text())
	})
}
